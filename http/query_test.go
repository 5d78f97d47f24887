package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"lookout/auth"
	"lookout/query"
	"lookout/store"
	"lookout/warehouse"
)

// queryWorld is a project with two models fed through the real /ingest, Analytics APIs
// bound to its embedded warehouse, and query clients of every kind the tests need.
//
// The records (the harness clock reads 2026-11-21T14:00:00Z when they arrive):
//
//	id  tenant country amount qty ok    ts
//	a1  a      NL      10     1   true  2026-11-21T13:00:00Z
//	a2  a      DE      20     2   false 2026-11-21T12:00:00Z
//	a3  a      NL      30     3   true  2026-11-19T14:00:00Z (48 h ago)
//	a4  a      -       5      1   true  2026-11-21T13:30:00Z
//	b1  b      NL      110    10  true  2026-11-21T13:00:00Z
//	b2  b      FR      200    20  false 2026-11-21T11:00:00Z
//
// and two records of "notenant", a model without a tenant field.
type queryWorld struct {
	*harness
	w         *world
	all       string // an all-scopes Management Token
	project   string
	warehouse string            // the project's embedded warehouse
	ingestKey string            // an ingest key of a client allowed both models
	keys      map[string]string // query keys by name: open, tenant, narrow
	clients   map[string]string // query clients by name
}

const (
	recordsA = `{"id":"a1","tenant":"a","country":"NL","amount":10,"qty":1,"ok":true,"ts":"2026-11-21T13:00:00Z"}
{"id":"a2","tenant":"a","country":"DE","amount":20,"qty":2,"ok":false,"ts":"2026-11-21T12:00:00Z"}
{"id":"a3","tenant":"a","country":"NL","amount":30,"qty":3,"ok":true,"ts":"2026-11-19T14:00:00Z"}
{"id":"a4","tenant":"a","amount":5,"qty":1,"ok":true,"ts":"2026-11-21T13:30:00Z"}
`
	recordsB = `{"id":"b1","tenant":"b","country":"NL","amount":110,"qty":10,"ok":true,"ts":"2026-11-21T13:00:00Z"}
{"id":"b2","tenant":"b","country":"FR","amount":200,"qty":20,"ok":false,"ts":"2026-11-21T11:00:00Z"}
`
	recordsNoTenant = `{"id":"n1","amount":1}
{"id":"n2","amount":2}
`
)

func newQueryWorld(t *testing.T, configure func(*Config)) *queryWorld {
	t.Helper()
	h := newHarnessWith(t, configure)
	w := h.world()
	qw := &queryWorld{harness: h, w: w, all: h.token(w, auth.AllScopes()), project: w.p1.ID, keys: map[string]string{}, clients: map[string]string{}}
	mg := "/management/v1"
	h.created(qw.all, mg+"/models", map[string]any{"project_id": qw.project, "key": "events", "timestamp_field": "ts", "fields": []map[string]any{
		{"name": "id", "type": "string", "required": true}, {"name": "tenant", "type": "string"}, {"name": "country", "type": "string"},
		{"name": "amount", "type": "number"}, {"name": "qty", "type": "integer"}, {"name": "ok", "type": "boolean"}, {"name": "ts", "type": "timestamp"}}})
	h.created(qw.all, mg+"/models", map[string]any{"project_id": qw.project, "key": "notenant", "fields": []map[string]any{
		{"name": "id", "type": "string", "required": true}, {"name": "amount", "type": "number"}}})
	var whs []store.Warehouse
	h.do("GET", mg+"/warehouses?project_id="+qw.project, qw.all, nil).data(t, &whs)
	for _, wh := range whs {
		if wh.Type == store.WarehouseEmbedded {
			qw.warehouse = wh.ID
		}
	}
	if qw.warehouse == "" {
		t.Fatal("the project has no embedded warehouse")
	}
	feeder := h.created(qw.all, mg+"/ingest-clients", map[string]any{"project_id": qw.project, "name": "feeder", "models": []string{"events", "notenant"}})
	qw.ingestKey = qw.key(feeder, "ingest", nil)

	api := func(key string, body map[string]any) string {
		body["project_id"], body["key"] = qw.project, key
		if body["model_key"] == nil {
			body["model_key"] = "events"
		}
		if body["params"] == nil {
			body["params"] = []map[string]any{}
		}
		return h.created(qw.all, mg+"/analytics-apis", body)
	}
	count := []map[string]any{{"fn": "count"}}
	qw.bind(api("sales", map[string]any{
		"query": map[string]any{
			"filters":      []map[string]any{{"field": "country", "op": "eq", "value": map[string]any{"param": "country"}}, {"field": "amount", "op": "gte", "value": map[string]any{"param": "min_amount"}}},
			"aggregations": []map[string]any{{"fn": "count"}, {"fn": "sum", "field": "amount", "as": "total"}}},
		"params": []map[string]any{{"name": "country", "type": "string", "required": true}, {"name": "min_amount", "type": "number", "default": 15}}}))
	qw.bind(api("tenant_b", map[string]any{"query": map[string]any{"filters": []map[string]any{{"field": "tenant", "op": "eq", "value": "b"}}, "aggregations": count}}))
	qw.bind(api("by_tenant", map[string]any{
		"query":  map[string]any{"filters": []map[string]any{{"field": "tenant", "op": "eq", "value": map[string]any{"param": "tenant"}}}, "group_by": []string{"tenant"}, "aggregations": count},
		"params": []map[string]any{{"name": "tenant", "type": "string", "required": true}}}))
	qw.bind(api("everyone", map[string]any{"query": map[string]any{"group_by": []string{"tenant"}, "aggregations": count}}))
	qw.bind(api("notenant_all", map[string]any{"model_key": "notenant", "query": map[string]any{"select": []string{"id"}}}))
	api("unbound", map[string]any{"query": map[string]any{"aggregations": count}})
	old := api("old", map[string]any{"query": map[string]any{"aggregations": count}})
	qw.bind(old)
	qw.bind(api("unlisted", map[string]any{"query": map[string]any{"aggregations": count}}))

	apis := []string{"sales", "tenant_b", "by_tenant", "everyone", "notenant_all", "unbound", "old"}
	qw.clients["open"] = h.created(qw.all, mg+"/query-clients", map[string]any{"project_id": qw.project, "name": "open",
		"models": []string{"events", "notenant"}, "adhoc_models": []string{"events"}, "analytics_apis": apis})
	qw.clients["tenant"] = h.created(qw.all, mg+"/query-clients", map[string]any{"project_id": qw.project, "name": "tenant a",
		"models": []string{"events", "notenant"}, "adhoc_models": []string{"events", "notenant"}, "analytics_apis": apis,
		"required_filters": []map[string]any{{"field": "tenant", "op": "eq", "value": "a"}}})
	qw.keys["open"] = qw.key(qw.clients["open"], "query", nil)
	qw.keys["tenant"] = qw.key(qw.clients["tenant"], "query", nil)
	qw.keys["narrow"] = qw.key(qw.clients["open"], "query", []string{"notenant"})
	if r := h.do("DELETE", mg+"/analytics-apis/"+old, qw.all, nil); r.status != 200 {
		t.Fatalf("archive: %s", r.body)
	}

	qw.ingestRecords("events", recordsA+recordsB)
	qw.ingestRecords("notenant", recordsNoTenant)
	return qw
}

// key makes a runtime API key and returns its secret.
func (qw *queryWorld) key(client, kind string, models []string) string {
	qw.t.Helper()
	body := map[string]any{"project_id": qw.project, "name": "k", "kind": kind, "client_id": client}
	if models != nil {
		body["models"] = models
	}
	r := qw.do("POST", "/management/v1/runtime-api-keys", qw.all, body)
	var k struct{ Key string }
	r.data(qw.t, &k)
	if k.Key == "" {
		qw.t.Fatalf("key: %s", r.body)
	}
	return k.Key
}

// bind binds an Analytics API to the embedded warehouse and promotes the binding.
func (qw *queryWorld) bind(apiID string) {
	qw.t.Helper()
	id := qw.created(qw.all, "/management/v1/analytics-bindings", map[string]any{"project_id": qw.project, "analytics_api_id": apiID, "warehouse_id": qw.warehouse})
	if r := qw.do("POST", "/management/v1/analytics-bindings/"+id+"/promote", qw.all, nil); r.status != 200 {
		qw.t.Fatalf("promote: %s", r.body)
	}
}

// ingestRecords sends NDJSON through the real /ingest and fails unless all were stored.
func (qw *queryWorld) ingestRecords(model, ndjson string) {
	qw.t.Helper()
	r := qw.runtime(ingestReq{path: "/ingest?schema=" + model, header: map[string]string{"Authorization": "ApiKey " + qw.ingestKey}, body: ndjson})
	if r.status != 202 || !strings.Contains(r.body, `"rejected":0`) {
		qw.t.Fatalf("ingest %s: %d %s", model, r.status, r.body)
	}
}

// seal moves every record of both models from the log into column blocks.
func (qw *queryWorld) seal() {
	qw.t.Helper()
	log, err := qw.records.Log(qw.warehouse)
	if err != nil {
		qw.t.Fatal(err)
	}
	for _, key := range []string{"events", "notenant"} {
		m, err := qw.st.ModelByKey(qw.project, key)
		if err != nil {
			qw.t.Fatal(err)
		}
		for {
			n, err := log.Seal(&m, qw.clock.Now(), warehouse.SealPolicy{MinAge: 0})
			if err != nil {
				qw.t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		if st, err := log.Stats(m.ID); err != nil || st.LogRecords != 0 {
			qw.t.Fatalf("after sealing %s: %+v %v", key, st, err)
		}
	}
}

// queryDo sends a request to the query listener. body: nil, a string (sent as is) or a
// value (JSON-encoded); hdr are header name/value pairs.
func (h *harness) queryDo(method, path, authz string, body any, hdr ...string) *response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.queryURL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.queryTLS.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := &response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.env); err != nil {
			h.t.Fatalf("%s %s: body is not JSON: %q", method, path, raw)
		}
	}
	return r
}

// runQuery is run (mgmt_test.go) against the query listener.
func (h *harness) runQuery(t *testing.T, sc scenario) *response {
	t.Helper()
	r := h.queryDo(sc.method, sc.url, sc.auth, sc.body)
	if r.status != sc.status {
		t.Fatalf("%s %s %v: status %d, want %d; body %s", sc.method, sc.url, sc.body, r.status, sc.status, r.body)
	}
	r.checkEnvelope(t)
	for _, c := range sc.contains {
		if !strings.Contains(r.body, c) {
			t.Errorf("body lacks %q: %s", c, r.body)
		}
	}
	for _, c := range sc.notContains {
		if strings.Contains(r.body, c) {
			t.Errorf("body has %q: %s", c, r.body)
		}
	}
	return r
}

func apiKey(k string) string { return "ApiKey " + k }

// q builds an ad-hoc query body on events from key/value pairs.
func q(kv ...any) map[string]any {
	b := map[string]any{"schema": "events"}
	for i := 0; i+1 < len(kv); i += 2 {
		b[kv[i].(string)] = kv[i+1]
	}
	return b
}

func flt(field, op string, value any) map[string]any {
	f := map[string]any{"field": field, "op": op}
	if value != nil {
		f["value"] = value
	}
	return f
}

var countAgg = []map[string]any{{"fn": "count"}}

// TestQueryAdhoc runs the ad-hoc form over records ingested through /ingest: counts,
// groups, filters, select with order and limit, time ranges, and the response's shape.
func TestQueryAdhoc(t *testing.T) {
	qw := newQueryWorld(t, nil)
	open := apiKey(qw.keys["open"])
	scenarios := []scenario{
		{name: "count", body: q("aggregations", countAgg),
			contains: []string{`"columns":[{"name":"count","type":"integer"}],"rows":[[6]]`, `"scanned":6`, `"returned":1`, `"elapsed_ms":`}},
		{name: "count of a field counts non-null values", body: q("aggregations", []map[string]any{{"fn": "count", "field": "country"}}),
			contains: []string{`"columns":[{"name":"count_country","type":"integer"}],"rows":[[5]]`}},
		{name: "group_by with count and avg, nulls first", body: q("group_by", []string{"country"}, "aggregations", []map[string]any{{"fn": "count"}, {"fn": "avg", "field": "amount", "as": "avg_amount"}}),
			contains: []string{`"columns":[{"name":"country","type":"string"},{"name":"count","type":"integer"},{"name":"avg_amount","type":"number"}]`,
				`"rows":[[null,1,5],["DE",1,20],["FR",1,200],["NL",3,50]]`, `"returned":4`}},
		{name: "group_by boolean, order_by count desc", body: q("group_by", []string{"ok"}, "aggregations", countAgg, "order_by", []map[string]any{{"field": "count", "desc": true}}),
			contains: []string{`"columns":[{"name":"ok","type":"boolean"},{"name":"count","type":"integer"}],"rows":[[true,4],[false,2]]`}},
		{name: "sum min max count_distinct", body: q("aggregations", []map[string]any{{"fn": "sum", "field": "qty"}, {"fn": "min", "field": "ts"}, {"fn": "max", "field": "country"}, {"fn": "count_distinct", "field": "tenant"}}),
			contains: []string{`{"name":"sum_qty","type":"number"},{"name":"min_ts","type":"timestamp"},{"name":"max_country","type":"string"},{"name":"count_distinct_tenant","type":"integer"}]`,
				`"rows":[[37,"2026-11-19T14:00:00Z","NL",2]]`}},
		{name: "filter gte on a number", body: q("filters", []any{flt("amount", "gte", 100)}, "aggregations", countAgg), contains: []string{`"rows":[[2]]`}},
		{name: "filter eq on a boolean", body: q("filters", []any{flt("ok", "eq", true)}, "aggregations", countAgg), contains: []string{`"rows":[[4]]`}},
		{name: "filter in", body: q("filters", []any{flt("country", "in", []string{"DE", "FR"})}, "aggregations", countAgg), contains: []string{`"rows":[[2]]`}},
		{name: "filter not_exists", body: q("filters", []any{flt("country", "not_exists", nil)}, "select", []string{"id"}), contains: []string{`"rows":[["a4"]]`}},
		{name: "filters are ANDed", body: q("filters", []any{flt("country", "eq", "NL"), flt("qty", "lt", 10)}, "select", []string{"id"}), contains: []string{`"rows":[["a1"],["a3"]]`}},
		{name: "a null country fails neq", body: q("filters", []any{flt("country", "neq", "NL")}, "select", []string{"id"}), contains: []string{`"rows":[["a2"],["b2"]]`}},
		{name: "select with order_by and limit", body: q("select", []string{"id", "amount"}, "order_by", []map[string]any{{"field": "amount", "desc": true}}, "limit", 2),
			contains: []string{`"columns":[{"name":"id","type":"string"},{"name":"amount","type":"number"}],"rows":[["b2",200],["b1",110]]`, `"returned":2`}},
		{name: "select types every field", body: q("select", []string{"id", "amount", "qty", "ok", "ts", "tenant"}, "filters", []any{flt("id", "eq", "a1")}),
			contains: []string{`"columns":[{"name":"id","type":"string"},{"name":"amount","type":"number"},{"name":"qty","type":"integer"},{"name":"ok","type":"boolean"},{"name":"ts","type":"timestamp"},{"name":"tenant","type":"string"}]`,
				`"rows":[["a1",10,1,true,"2026-11-21T13:00:00Z","a"]]`}},
		{name: "no select: every model field", body: q("filters", []any{flt("id", "eq", "b2")}),
			contains: []string{`"rows":[["b2","b","FR",200,20,false,"2026-11-21T11:00:00Z"]]`}},
		{name: "time_range relative -24h drops a3", body: q("time_range", map[string]any{"from": "-24h"}, "aggregations", countAgg), contains: []string{`"rows":[[5]]`}},
		{name: "time_range relative to -1h ends before 13:00", body: q("time_range", map[string]any{"from": "-24h", "to": "-1h"}, "select", []string{"id"}, "order_by", []map[string]any{{"field": "id"}}),
			contains: []string{`"rows":[["a2"],["b2"]]`}},
		{name: "time_range RFC 3339, from inclusive, to exclusive", body: q("time_range", map[string]any{"from": "2026-11-21T12:00:00Z", "to": "2026-11-21T13:00:00Z"}, "select", []string{"id"}),
			contains: []string{`"rows":[["a2"]]`}},
		{name: "a filter matching nothing still answers one row", body: q("filters", []any{flt("country", "eq", "XX")}, "aggregations", []map[string]any{{"fn": "count"}, {"fn": "sum", "field": "amount"}}),
			contains: []string{`"rows":[[0,null]]`}},
		{name: "a system field", body: q("group_by", []string{"_received_at"}, "aggregations", countAgg), contains: []string{`"rows":[["2026-11-21T14:00:00Z",6]]`}},
		{name: "unknown field names the path", body: q("filters", []any{flt("nope", "eq", 1)}), status: 400, contains: []string{`"field":"filters[0].field"`, `"code":"validation_failed"`}},
		{name: "operator that does not fit the type", body: q("filters", []any{flt("amount", "contains", "1")}), status: 400, contains: []string{`"field":"filters[0].op"`}},
		{name: "order_by on a column not in the output", body: q("select", []string{"id"}, "order_by", []map[string]any{{"field": "amount"}}), status: 400, contains: []string{`"field":"order_by[0].field"`}},
		{name: "limit over 10000", body: q("select", []string{"id"}, "limit", 10001), status: 400, contains: []string{`"field":"limit"`}},
		{name: "bad time_range", body: q("time_range", map[string]any{"from": "yesterday"}), status: 400, contains: []string{`"field":"time_range.from"`}},
		{name: "unknown model", body: map[string]any{"schema": "nope"}, status: 403, contains: []string{`"code":"forbidden"`}},
		{name: "no schema", body: map[string]any{"select": []string{"id"}}, status: 400, contains: []string{`"field":"schema"`}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			sc.method, sc.url, sc.auth = "POST", "/query", open
			if sc.status == 0 {
				sc.status = 200
			}
			qw.runQuery(t, sc)
		})
	}

	t.Run("response shape", func(t *testing.T) {
		r := qw.queryDo("POST", "/query", open, q("group_by", []string{"country"}, "aggregations", countAgg))
		var got map[string]json.RawMessage
		r.data(t, &got)
		if len(got) != 3 || got["columns"] == nil || got["rows"] == nil || got["stats"] == nil {
			t.Fatalf("data keys: %s", r.env.Data)
		}
		var stats map[string]json.Number
		if err := json.Unmarshal(got["stats"], &stats); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"scanned", "returned", "elapsed_ms"} {
			if _, ok := stats[k]; !ok {
				t.Errorf("stats lack %s: %s", k, got["stats"])
			}
		}
		if stats["scanned"] != "6" || stats["returned"] != "4" {
			t.Errorf("stats %s", got["stats"])
		}
	})
}

// TestQueryCredentials checks which credentials /query and /ingest take: each listener
// wants its own kind of key, a bad credential is 401, and a query key's models narrow its
// client's ad-hoc models.
func TestQueryCredentials(t *testing.T) {
	qw := newQueryWorld(t, nil)
	count := q("aggregations", countAgg)
	scenarios := []scenario{
		{name: "query key", auth: apiKey(qw.keys["open"]), body: count, status: 200, contains: []string{`"rows":[[6]]`}},
		{name: "ingest key on /query", auth: apiKey(qw.ingestKey), body: count, status: 403, contains: []string{`"code":"forbidden"`}, notContains: []string{`"rows"`}},
		{name: "no credential", body: count, status: 401, contains: []string{`"code":"unauthenticated"`}},
		{name: "unknown key", auth: apiKey(otherKey(qw.keys["open"])), body: count, status: 401, contains: []string{`"code":"unauthenticated"`}},
		{name: "malformed key", auth: "ApiKey lk_ak_short", body: count, status: 401},
		{name: "a Management Token", auth: qw.all, body: count, status: 401},
		{name: "a console session", auth: bearer(qw.w.ownerSes), body: count, status: 401},
		{name: "model not in adhoc_models", auth: apiKey(qw.keys["open"]), body: map[string]any{"schema": "notenant"}, status: 403, contains: []string{`notenant`}, notContains: []string{`"rows"`}},
		{name: "key narrowed to another model", auth: apiKey(qw.keys["narrow"]), body: count, status: 403, contains: []string{`"code":"forbidden"`}, notContains: []string{`"rows"`}},
		{name: "key narrowed to another model, API on events", auth: apiKey(qw.keys["narrow"]), body: map[string]any{"api": "sales", "params": map[string]any{"country": "NL"}}, status: 403, contains: []string{`"code":"forbidden"`, `outside the key's models`}, notContains: []string{`"rows"`}},
		{name: "key narrowed to another model, API on its model", auth: apiKey(qw.keys["narrow"]), body: map[string]any{"api": "notenant_all"}, status: 200, contains: []string{`"rows":[["n1"],["n2"]]`}},
		{name: "an API not in analytics_apis", auth: apiKey(qw.keys["open"]), body: map[string]any{"api": "unlisted"}, status: 403, contains: []string{`unlisted`}},
		{name: "an API of no client, unknown", auth: apiKey(qw.keys["open"]), body: map[string]any{"api": "nope"}, status: 404, contains: []string{`"code":"not_found"`}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			sc.method, sc.url = "POST", "/query"
			r := qw.runQuery(t, sc)
			if sc.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	t.Run("query key on /ingest", func(t *testing.T) {
		r := qw.runtime(ingestReq{path: "/ingest?schema=events", header: map[string]string{"Authorization": apiKey(qw.keys["open"])}, body: recordsA})
		if r.status != 403 || r.env.Code != "forbidden" {
			t.Fatalf("%d %s", r.status, r.body)
		}
		c := qw.queryDo("POST", "/query", apiKey(qw.keys["open"]), count)
		if !strings.Contains(c.body, `"rows":[[6]]`) {
			t.Fatalf("the refused ingest stored records: %s", c.body)
		}
	})
	t.Run("/ingest is not on the query listener", func(t *testing.T) {
		r := qw.queryDo("POST", "/ingest?schema=events", apiKey(qw.ingestKey), recordsA)
		if r.status != 404 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
}

// TestQueryAPIForm runs Analytics APIs through their active binding: params typed and
// checked, defaults applied, and each way the call can be refused.
func TestQueryAPIForm(t *testing.T) {
	qw := newQueryWorld(t, nil)
	open := apiKey(qw.keys["open"])
	call := func(api string, params map[string]any) map[string]any {
		b := map[string]any{"api": api}
		if params != nil {
			b["params"] = params
		}
		return b
	}
	scenarios := []scenario{
		{name: "default min_amount 15 applied", body: call("sales", map[string]any{"country": "NL"}),
			contains: []string{`"columns":[{"name":"count","type":"integer"},{"name":"total","type":"number"}],"rows":[[2,140]]`}},
		{name: "param given", body: call("sales", map[string]any{"country": "NL", "min_amount": 100}), contains: []string{`"rows":[[1,110]]`}},
		{name: "a number param with a fraction", body: call("sales", map[string]any{"country": "NL", "min_amount": 10.5}), contains: []string{`"rows":[[2,140]]`}},
		{name: "missing required param", body: call("sales", map[string]any{}), status: 400, contains: []string{`"field":"params.country"`, `required`}},
		{name: "no params at all", body: call("sales", nil), status: 400, contains: []string{`"field":"params.country"`}},
		{name: "null for a required param", body: call("sales", map[string]any{"country": nil}), status: 400, contains: []string{`"field":"params.country"`}},
		{name: "wrong type", body: call("sales", map[string]any{"country": 5}), status: 400, contains: []string{`"field":"params.country"`}},
		{name: "wrong type of an optional param", body: call("sales", map[string]any{"country": "NL", "min_amount": "lots"}), status: 400, contains: []string{`"field":"params.min_amount"`}},
		{name: "unknown param", body: call("sales", map[string]any{"country": "NL", "region": "EU"}), status: 400, contains: []string{`"field":"params.region"`}},
		{name: "params not an object", body: map[string]any{"api": "sales", "params": []string{"NL"}}, status: 400, contains: []string{`"code":"invalid_json"`}},
		{name: "stored filter", body: call("tenant_b", nil), contains: []string{`"rows":[[2]]`}},
		{name: "required param used in a filter", body: call("by_tenant", map[string]any{"tenant": "a"}), contains: []string{`"rows":[["a",4]]`}},
		{name: "an API on another model", body: call("notenant_all", nil), contains: []string{`"rows":[["n1"],["n2"]]`}},
		{name: "archived API", body: call("old", nil), status: 404, contains: []string{`"code":"not_found"`, `archived`}},
		{name: "no active binding", body: call("unbound", nil), status: 409, contains: []string{`"code":"conflict"`, `no active binding`}},
		{name: "not in analytics_apis", body: call("unlisted", nil), status: 403},
		{name: "api plus filters", body: map[string]any{"api": "sales", "params": map[string]any{"country": "NL"}, "filters": []any{flt("tenant", "eq", "a")}}, status: 400, contains: []string{`"field":"filters"`}},
		{name: "api plus schema", body: map[string]any{"api": "sales", "schema": "events"}, status: 400, contains: []string{`"field":"schema"`}},
		{name: "a key twice", body: `{"schema":"events","schema":"notenant","aggregations":[{"fn":"count"}]}`, status: 400, contains: []string{`"code":"invalid_json"`, `schema`}, notContains: []string{`"rows"`}},
		{name: "params without api", body: map[string]any{"schema": "events", "params": map[string]any{"country": "NL"}}, status: 400, contains: []string{`"field":"params"`}},
		{name: "empty api", body: map[string]any{"api": ""}, status: 400, contains: []string{`"field":"api"`}},
		{name: "api not a string", body: map[string]any{"api": 7}, status: 400, contains: []string{`"code":"invalid_json"`}},
		{name: "unknown body key", body: map[string]any{"api": "sales", "params": map[string]any{"country": "NL"}, "version": 2}, status: 400, contains: []string{`"field":"version"`}},
		{name: "unknown body key, ad hoc", body: q("aggregations", countAgg, "having", []any{}), status: 400, contains: []string{`"field":"having"`}},
		{name: "a key in another case", body: map[string]any{"API": "sales"}, status: 400, contains: []string{`"field":"API"`}},
		{name: "not a JSON object", body: `[1,2]`, status: 400, contains: []string{`"code":"invalid_json"`}},
		{name: "not JSON", body: `{"api":`, status: 400, contains: []string{`"code":"invalid_json"`}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			sc.method, sc.url, sc.auth = "POST", "/query", open
			if sc.status == 0 {
				sc.status = 200
			}
			r := qw.runQuery(t, sc)
			if sc.status == 200 {
				return
			}
			if strings.Contains(r.body, `"rows"`) {
				t.Errorf("a refused call carries rows: %s", r.body)
			}
		})
	}
	t.Run("content type", func(t *testing.T) {
		r := qw.queryDo("POST", "/query", open, `{"api":"tenant_b"}`, "Content-Type", "text/plain")
		if r.status != 415 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
}

// TestQueryRequiredFilters tries every way we could think of to read past a client's
// required filter tenant = a: whatever the body says, rows of tenant b never appear and
// counts are tenant a's.
func TestQueryRequiredFilters(t *testing.T) {
	qw := newQueryWorld(t, nil)
	tenant := apiKey(qw.keys["tenant"])
	noB := []string{`"b1"`, `"b2"`, `"b"`, `"FR"`}
	count := func(kv ...any) map[string]any { return q(append(kv, "aggregations", countAgg)...) }
	scenarios := []scenario{
		{name: "plain count is tenant a's", body: count(), contains: []string{`"rows":[[4]]`}},
		{name: "select every row", body: q(), contains: []string{`"a1"`, `"a4"`, `"returned":4`}, notContains: noB},
		{name: "select tenant", body: q("select", []string{"id", "tenant"}, "order_by", []map[string]any{{"field": "id"}}), contains: []string{`"rows":[["a1","a"],["a2","a"],["a3","a"],["a4","a"]]`}, notContains: noB},
		{name: "group_by tenant", body: q("group_by", []string{"tenant"}, "aggregations", countAgg), contains: []string{`"rows":[["a",4]]`}, notContains: noB},
		{name: "group_by country", body: q("group_by", []string{"country"}, "aggregations", countAgg), contains: []string{`"rows":[[null,1],["DE",1],["NL",2]]`}, notContains: noB},
		{name: "count_distinct tenant", body: q("aggregations", []map[string]any{{"fn": "count_distinct", "field": "tenant"}}), contains: []string{`"rows":[[1]]`}},
		{name: "max tenant", body: q("aggregations", []map[string]any{{"fn": "max", "field": "tenant"}}), contains: []string{`"rows":[["a"]]`}, notContains: noB},
		{name: "sum amount", body: q("aggregations", []map[string]any{{"fn": "sum", "field": "amount"}}), contains: []string{`"rows":[[65]]`}},
		{name: "filter tenant eq b", body: count("filters", []any{flt("tenant", "eq", "b")}), contains: []string{`"rows":[[0]]`}},
		{name: "filter tenant neq a", body: count("filters", []any{flt("tenant", "neq", "a")}), contains: []string{`"rows":[[0]]`}},
		{name: "filter tenant in a, b (OR)", body: count("filters", []any{flt("tenant", "in", []string{"a", "b"})}), contains: []string{`"rows":[[4]]`}},
		{name: "filter tenant not_in a", body: count("filters", []any{flt("tenant", "not_in", []string{"a"})}), contains: []string{`"rows":[[0]]`}},
		{name: "filter tenant matches anything", body: count("filters", []any{flt("tenant", "matches", ".*")}), contains: []string{`"rows":[[4]]`}},
		{name: "filter tenant exists", body: count("filters", []any{flt("tenant", "exists", nil)}), contains: []string{`"rows":[[4]]`}},
		{name: "filter tenant not_exists", body: count("filters", []any{flt("tenant", "not_exists", nil)}), contains: []string{`"rows":[[0]]`}},
		{name: "filter tenant starts_with empty", body: count("filters", []any{flt("tenant", "starts_with", "")}), contains: []string{`"rows":[[4]]`}},
		{name: "filter tenant eq a and eq b", body: count("filters", []any{flt("tenant", "eq", "a"), flt("tenant", "eq", "b")}), contains: []string{`"rows":[[0]]`}},
		{name: "filter tenant eq b then eq a", body: count("filters", []any{flt("tenant", "eq", "b"), flt("tenant", "eq", "a")}), contains: []string{`"rows":[[0]]`}},
		{name: "filter on another field", body: q("filters", []any{flt("country", "eq", "NL")}, "select", []string{"id"}), contains: []string{`"rows":[["a1"],["a3"]]`}, notContains: noB},
		{name: "filter amount gte 100", body: count("filters", []any{flt("amount", "gte", 100)}), contains: []string{`"rows":[[0]]`}},
		{name: "time_range -24h", body: count("time_range", map[string]any{"from": "-24h"}), contains: []string{`"rows":[[3]]`}},
		{name: "time_range over everything", body: count("time_range", map[string]any{"from": "2000-01-01T00:00:00Z", "to": "2100-01-01T00:00:00Z"}), contains: []string{`"rows":[[4]]`}},
		{name: "order_by and limit", body: q("select", []string{"id", "amount"}, "order_by", []map[string]any{{"field": "amount", "desc": true}}, "limit", 10000), contains: []string{`"rows":[["a3",30],["a2",20],["a1",10],["a4",5]]`}, notContains: noB},
		{name: "body key required_filters", body: count("required_filters", []any{}), status: 400, contains: []string{`"field":"required_filters"`}},
		{name: "body key match any", body: count("match", "any"), status: 400, contains: []string{`"field":"match"`}},
		{name: "body key or", body: count("or", []any{flt("tenant", "eq", "b")}), status: 400, contains: []string{`"field":"or"`}},
		{name: "a filter with an extra key", body: count("filters", []any{map[string]any{"field": "tenant", "op": "eq", "value": "b", "required": false}}), status: 400},
		{name: "API with a stored filter tenant = b", body: map[string]any{"api": "tenant_b"}, contains: []string{`"rows":[[0]]`}},
		{name: "API param sets tenant b", body: map[string]any{"api": "by_tenant", "params": map[string]any{"tenant": "b"}}, contains: []string{`"rows":[]`}, notContains: noB},
		{name: "API param sets tenant a", body: map[string]any{"api": "by_tenant", "params": map[string]any{"tenant": "a"}}, contains: []string{`"rows":[["a",4]]`}},
		{name: "API grouping by tenant", body: map[string]any{"api": "everyone"}, contains: []string{`"rows":[["a",4]]`}, notContains: noB},
		{name: "API with a param", body: map[string]any{"api": "sales", "params": map[string]any{"country": "NL"}}, contains: []string{`"rows":[[1,30]]`}},
		{name: "API with an undeclared tenant param", body: map[string]any{"api": "everyone", "params": map[string]any{"tenant": "b"}}, status: 400, contains: []string{`"field":"params.tenant"`}},
		{name: "model without the tenant field: count", body: map[string]any{"schema": "notenant", "aggregations": countAgg}, contains: []string{`"rows":[[0]]`}},
		{name: "model without the tenant field: select", body: map[string]any{"schema": "notenant"}, contains: []string{`"rows":[]`}, notContains: []string{`"n1"`, `"n2"`}},
		{name: "model without the tenant field: API", body: map[string]any{"api": "notenant_all"}, contains: []string{`"rows":[]`}, notContains: []string{`"n1"`, `"n2"`}},
		{name: "model without the tenant field: filter on tenant", body: map[string]any{"schema": "notenant", "filters": []any{flt("tenant", "not_exists", nil)}}, status: 400, contains: []string{`"field":"filters[0].field"`}},
	}
	run := func(t *testing.T) {
		for _, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) {
				sc.method, sc.url, sc.auth = "POST", "/query", tenant
				if sc.status == 0 {
					sc.status = 200
				}
				qw.runQuery(t, sc)
			})
		}
	}
	t.Run("log", run)
	qw.seal()
	t.Run("sealed", run)
}

// TestQueryCORS checks the CORS headers of the query listener, and their absence on the
// console's query routes.
func TestQueryCORS(t *testing.T) {
	qw := newQueryWorld(t, nil)
	t.Run("preflight", func(t *testing.T) {
		r := qw.queryDo("OPTIONS", "/query", "", nil, "Origin", "https://dash.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type")
		if r.status != 204 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		want := map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "Authorization, Content-Type",
			"Access-Control-Allow-Methods": "POST, OPTIONS", "Access-Control-Max-Age": "600", "Access-Control-Allow-Credentials": ""}
		for k, v := range want {
			if got := r.header.Get(k); got != v {
				t.Errorf("%s: %q, want %q", k, got, v)
			}
		}
	})
	for _, c := range []struct {
		name, authz string
		status      int
	}{{"answer", apiKey(qw.keys["open"]), 200}, {"401", "", 401}, {"403", apiKey(qw.ingestKey), 403}} {
		t.Run(c.name+" carries Allow-Origin", func(t *testing.T) {
			r := qw.queryDo("POST", "/query", c.authz, q("aggregations", countAgg), "Origin", "https://dash.example")
			if r.status != c.status || r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Access-Control-Allow-Credentials") != "" {
				t.Fatalf("%d %v", r.status, r.header)
			}
		})
	}
	t.Run("console routes send none", func(t *testing.T) {
		p := "/api/v1/projects/" + qw.project
		for _, rq := range []struct {
			method, path string
			body         any
		}{{"POST", p + "/query", q("aggregations", countAgg)}, {"GET", p + "/stats", nil}, {"OPTIONS", p + "/query", nil}} {
			r := qw.do(rq.method, rq.path, bearer(qw.w.memberSes), rq.body, "Origin", "https://dash.example")
			for k := range r.header {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("%s %s: %s: %s", rq.method, rq.path, k, r.header.Get(k))
				}
			}
		}
	})
}

// TestQueryQuota spends a client's requests_per_minute.
func TestQueryQuota(t *testing.T) {
	qw := newQueryWorld(t, nil)
	id := qw.created(qw.all, "/management/v1/query-clients", map[string]any{"project_id": qw.project, "name": "slow",
		"adhoc_models": []string{"events"}, "quota": map[string]any{"requests_per_minute": 2}})
	k := apiKey(qw.key(id, "query", nil))
	body := q("aggregations", countAgg)
	for i := 0; i < 2; i++ {
		qw.runQuery(t, scenario{method: "POST", url: "/query", auth: k, body: body, status: 200})
	}
	r := qw.runQuery(t, scenario{method: "POST", url: "/query", auth: k, body: body, status: 429, contains: []string{`"code":"rate_limited"`, `2 queries a minute`}})
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After %q", ra)
	}
	// Another client's budget is its own.
	qw.runQuery(t, scenario{method: "POST", url: "/query", auth: apiKey(qw.keys["open"]), body: body, status: 200})
	qw.clock.Advance(time.Minute)
	qw.runQuery(t, scenario{method: "POST", url: "/query", auth: k, body: body, status: 200})
}

// TestQueryCaps: the group and count_distinct caps answer 400 naming the cap, never a
// partial result; under the caps the same queries answer.
func TestQueryCaps(t *testing.T) {
	qw := newQueryWorld(t, func(c *Config) { c.Query.Caps.Groups, c.Query.Caps.Distinct = 3, 2 })
	open := apiKey(qw.keys["open"])
	scenarios := []scenario{
		{name: "4 groups over a cap of 3", body: q("group_by", []string{"country"}, "aggregations", countAgg), status: 400,
			contains: []string{`"code":"validation_failed"`, `more than 3 groups (the group cap)`, `"field":"group_by"`}, notContains: []string{`"rows"`}},
		{name: "6 groups of two fields", body: q("group_by", []string{"country", "ok"}, "aggregations", countAgg), status: 400, contains: []string{`group cap`}},
		{name: "2 groups", body: q("group_by", []string{"ok"}, "aggregations", countAgg), status: 200, contains: []string{`"rows":[[false,2],[true,4]]`}},
		{name: "3 groups, at the cap", body: q("group_by", []string{"country"}, "filters", []any{flt("country", "exists", nil)}, "aggregations", countAgg), status: 200, contains: []string{`"rows":[["DE",1],["FR",1],["NL",3]]`}},
		{name: "count_distinct over the cap", body: q("aggregations", []map[string]any{{"fn": "count_distinct", "field": "amount"}}), status: 400,
			contains: []string{`more than 2 values (the distinct cap)`, `"field":"aggregations"`}, notContains: []string{`"rows"`}},
		{name: "count_distinct at the cap", body: q("aggregations", []map[string]any{{"fn": "count_distinct", "field": "tenant"}}), status: 200, contains: []string{`"rows":[[2]]`}},
		{name: "select is not capped by groups", body: q("select", []string{"id"}), status: 200, contains: []string{`"returned":6`}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			sc.method, sc.url, sc.auth = "POST", "/query", open
			qw.runQuery(t, sc)
		})
	}
	t.Run("a cap left at 0 takes its default", func(t *testing.T) {
		qw := newQueryWorld(t, func(c *Config) { c.Query.Caps = query.Caps{Groups: 3} })
		qw.runQuery(t, scenario{method: "POST", url: "/query", auth: apiKey(qw.keys["open"]), status: 200,
			body: q("aggregations", []map[string]any{{"fn": "count_distinct", "field": "amount"}}), contains: []string{`"rows":[[6]]`}})
	})
}

// TestQueryTimeout: a query that outlives --query-timeout is a 503 with Retry-After, on
// the runtime and the console route alike.
func TestQueryTimeout(t *testing.T) {
	qw := newQueryWorld(t, func(c *Config) { c.QueryTimeout = time.Nanosecond })
	check := func(t *testing.T, r *response) {
		t.Helper()
		if r.status != 503 || r.env.Code != "unavailable" || !strings.Contains(r.env.Message, "deadline") || r.header.Get("Retry-After") == "" {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
		if strings.Contains(r.body, `"rows"`) {
			t.Fatalf("partial result: %s", r.body)
		}
	}
	t.Run("runtime", func(t *testing.T) {
		check(t, qw.queryDo("POST", "/query", apiKey(qw.keys["open"]), q("aggregations", countAgg)))
	})
	t.Run("console", func(t *testing.T) {
		check(t, qw.do("POST", "/api/v1/projects/"+qw.project+"/query", bearer(qw.w.memberSes), q("aggregations", countAgg)))
	})
	t.Run("sealed", func(t *testing.T) {
		qw.seal()
		check(t, qw.queryDo("POST", "/query", apiKey(qw.keys["open"]), q("select", []string{"id"})))
	})
}

// sameLayerQueries are queries whose answers must not depend on where records are
// stored: filters the block statistics can prune, time ranges that cut blocks, groups,
// order and limit.
var sameLayerQueries = []map[string]any{
	q("aggregations", countAgg),
	q(),
	q("select", []string{"id", "amount", "ts"}, "order_by", []map[string]any{{"field": "amount", "desc": true}}, "limit", 3),
	q("group_by", []string{"country"}, "aggregations", []map[string]any{{"fn": "count"}, {"fn": "avg", "field": "amount"}, {"fn": "sum", "field": "qty"}, {"fn": "min", "field": "ts"}, {"fn": "max", "field": "id"}, {"fn": "count_distinct", "field": "tenant"}}),
	q("group_by", []string{"tenant", "ok"}, "aggregations", countAgg),
	q("filters", []any{flt("amount", "gte", 100)}, "select", []string{"id"}),
	q("filters", []any{flt("amount", "gt", 1000)}, "aggregations", countAgg),
	q("filters", []any{flt("country", "eq", "FR")}, "select", []string{"id"}),
	q("filters", []any{flt("country", "not_exists", nil)}, "select", []string{"id"}),
	q("filters", []any{flt("country", "in", []string{"DE", "ZZ"})}, "select", []string{"id"}),
	q("filters", []any{flt("qty", "lte", 2), flt("ok", "eq", true)}, "select", []string{"id"}),
	q("filters", []any{flt("id", "starts_with", "b")}, "aggregations", countAgg),
	q("time_range", map[string]any{"from": "-24h"}, "select", []string{"id"}),
	q("time_range", map[string]any{"from": "2026-11-21T12:00:00Z", "to": "2026-11-21T13:00:01Z"}, "aggregations", countAgg),
	q("time_range", map[string]any{"to": "2026-11-20T00:00:00Z"}, "select", []string{"id"}),
	{"schema": "notenant", "select": []string{"id", "amount"}},
	{"api": "sales", "params": map[string]any{"country": "NL"}},
	{"api": "everyone"},
}

// answers runs sameLayerQueries with a key and returns each answer's columns and rows.
func (qw *queryWorld) answers(t *testing.T, key string) []string {
	t.Helper()
	out := make([]string, len(sameLayerQueries))
	for i, body := range sameLayerQueries {
		r := qw.queryDo("POST", "/query", key, body)
		if r.status == 403 { // a model outside this client's adhoc_models
			out[i] = r.body
			continue
		}
		if r.status != 200 {
			t.Fatalf("%v: %d %s", body, r.status, r.body)
		}
		var d struct {
			Columns json.RawMessage `json:"columns"`
			Rows    json.RawMessage `json:"rows"`
		}
		r.data(t, &d)
		out[i] = string(d.Columns) + " " + string(d.Rows)
	}
	return out
}

// TestQuerySameAnswerSealedOrNot runs the same queries over the record log, over sealed
// blocks, and over both (records arriving after a seal), comparing the rows.
func TestQuerySameAnswerSealedOrNot(t *testing.T) {
	qw := newQueryWorld(t, nil)
	keys := []string{apiKey(qw.keys["open"]), apiKey(qw.keys["tenant"])}
	compare := func(t *testing.T, what string, before [][]string) {
		t.Helper()
		for i, k := range keys {
			after := qw.answers(t, k)
			for j := range after {
				if after[j] != before[i][j] {
					t.Errorf("%s, key %d, %v:\n log:    %s\n %s: %s", what, i, sameLayerQueries[j], before[i][j], what, after[j])
				}
			}
		}
	}
	snapshot := func(t *testing.T) [][]string {
		var out [][]string
		for _, k := range keys {
			out = append(out, qw.answers(t, k))
		}
		return out
	}
	logged := snapshot(t)
	if !strings.Contains(logged[0][0], "[[6]]") || !strings.Contains(logged[1][0], "[[4]]") {
		t.Fatalf("counts before sealing: %v %v", logged[0][0], logged[1][0])
	}
	qw.seal()
	compare(t, "sealed", logged)

	// More records after the seal: one layer in blocks, the rest in the log. A second world
	// with the same records, never sealed, gives the answer to compare with.
	qw.ingestRecords("events", recordsB+recordsA)
	qw.clock.Advance(time.Hour)
	mixed := snapshot(t)
	other := newQueryWorld(t, nil)
	other.ingestRecords("events", recordsB+recordsA)
	other.clock.Advance(time.Hour)
	for i, k := range []string{apiKey(other.keys["open"]), apiKey(other.keys["tenant"])} {
		want := other.answers(t, k)
		for j := range want {
			if mixed[i][j] != want[j] {
				t.Errorf("mixed layers, key %d, %v:\n all in the log: %s\n mixed:          %s", i, sameLayerQueries[j], want[j], mixed[i][j])
			}
		}
	}
	if !strings.Contains(mixed[0][0], "[[12]]") || !strings.Contains(mixed[1][0], "[[8]]") {
		t.Fatalf("counts over both layers: %v %v", mixed[0][0], mixed[1][0])
	}
	qw.seal()
	compare(t, "sealed again", mixed)
}

// TestConsoleQuery: a workspace member queries any model of a project from the console,
// without required filters; users who cannot see the project get what every project
// route answers them.
func TestConsoleQuery(t *testing.T) {
	qw := newQueryWorld(t, nil)
	w := qw.w
	p := "/api/v1/projects/" + qw.project
	restricted := "/api/v1/projects/" + w.restricted.ID
	// What a project route answers a user who may not see the project.
	statusOf := func(path, ses string) int {
		return qw.do("GET", path, bearer(ses), nil).status
	}
	strangerStatus := statusOf(p, w.strangerSes)
	memberRestricted := statusOf(restricted, w.memberSes)
	if strangerStatus < 400 || memberRestricted < 400 {
		t.Fatalf("the world changed: stranger %d, member on restricted %d", strangerStatus, memberRestricted)
	}
	count := q("aggregations", countAgg)
	scenarios := []scenario{
		{name: "member, every tenant", auth: bearer(w.memberSes), url: p + "/query", body: count, status: 200, contains: []string{`"rows":[[6]]`}},
		{name: "member, a model no client may query ad hoc", auth: bearer(w.memberSes), url: p + "/query", body: map[string]any{"schema": "notenant", "select": []string{"id"}}, status: 200, contains: []string{`"rows":[["n1"],["n2"]]`}},
		{name: "owner, group_by tenant", auth: bearer(w.ownerSes), url: p + "/query", body: q("group_by", []string{"tenant"}, "aggregations", countAgg), status: 200, contains: []string{`"rows":[["a",4],["b",2]]`}},
		{name: "API form", auth: bearer(w.memberSes), url: p + "/query", body: map[string]any{"api": "sales", "params": map[string]any{"country": "NL"}}, status: 200, contains: []string{`"rows":[[2,140]]`}},
		{name: "API no client lists", auth: bearer(w.memberSes), url: p + "/query", body: map[string]any{"api": "unlisted"}, status: 200, contains: []string{`"rows":[[6]]`}},
		{name: "unknown API", auth: bearer(w.memberSes), url: p + "/query", body: map[string]any{"api": "nope"}, status: 404, contains: []string{`"code":"not_found"`}},
		{name: "archived API", auth: bearer(w.memberSes), url: p + "/query", body: map[string]any{"api": "old"}, status: 404},
		{name: "API without binding", auth: bearer(w.memberSes), url: p + "/query", body: map[string]any{"api": "unbound"}, status: 409, contains: []string{`no active binding`}},
		{name: "missing param", auth: bearer(w.memberSes), url: p + "/query", body: map[string]any{"api": "sales"}, status: 400, contains: []string{`"field":"params.country"`}},
		{name: "unknown model", auth: bearer(w.memberSes), url: p + "/query", body: map[string]any{"schema": "nope"}, status: 400, contains: []string{`"field":"schema"`}},
		{name: "unknown key", auth: bearer(w.memberSes), url: p + "/query", body: q("required_filters", []any{}), status: 400, contains: []string{`"field":"required_filters"`}},
		{name: "no session", url: p + "/query", body: count, status: 401},
		{name: "a runtime key", auth: apiKey(qw.keys["open"]), url: p + "/query", body: count, status: 401},
		{name: "stranger", auth: bearer(w.strangerSes), url: p + "/query", body: count, status: strangerStatus, notContains: []string{`"rows"`}},
		{name: "member on a restricted project", auth: bearer(w.memberSes), url: restricted + "/query", body: count, status: memberRestricted},
		{name: "stats, stranger", method: "GET", auth: bearer(w.strangerSes), url: p + "/stats", status: strangerStatus, notContains: []string{`"records"`}},
		{name: "stats, member on a restricted project", method: "GET", auth: bearer(w.memberSes), url: restricted + "/stats", status: memberRestricted},
		{name: "stats, no session", method: "GET", url: p + "/stats", status: 401},
		{name: "stats, member", method: "GET", auth: bearer(w.memberSes), url: p + "/stats", status: 200, contains: []string{`"project_id":"` + qw.project + `"`, `"model_key":"events"`}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if sc.method == "" {
				sc.method = "POST"
			}
			qw.run(t, sc)
		})
	}

	type line struct {
		ModelKey string `json:"model_key"`
		warehouse.ModelStats
	}
	stats := func(t *testing.T) map[string]line {
		t.Helper()
		r := qw.do("GET", p+"/stats", bearer(w.memberSes), nil)
		var d struct {
			Models []line `json:"models"`
		}
		r.data(t, &d)
		out := map[string]line{}
		for _, l := range d.Models {
			out[l.ModelKey] = l
		}
		if len(out) != 2 {
			t.Fatalf("stats: %s", r.body)
		}
		return out
	}
	received := time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC)
	t.Run("stats before sealing", func(t *testing.T) {
		s := stats(t)
		ev := s["events"]
		if ev.Records != 6 || ev.LogRecords != 6 || ev.SealedRecords != 0 || ev.Blocks != 0 || ev.LogBytes <= 0 || ev.Bytes != ev.LogBytes || !ev.LastIngestAt.Equal(received) {
			t.Fatalf("events: %+v", ev)
		}
		if nt := s["notenant"]; nt.Records != 2 || nt.LogRecords != 2 {
			t.Fatalf("notenant: %+v", nt)
		}
	})
	t.Run("stats after sealing", func(t *testing.T) {
		qw.seal()
		ev := stats(t)["events"]
		if ev.Records != 6 || ev.LogRecords != 0 || ev.SealedRecords != 6 || ev.Blocks != 1 || ev.SealedBytes <= 0 || ev.Bytes != ev.SealedBytes || !ev.LastIngestAt.Equal(received) {
			t.Fatalf("events: %+v", ev)
		}
		qw.clock.Advance(time.Minute)
		qw.ingestRecords("events", recordsB)
		ev = stats(t)["events"]
		if ev.Records != 8 || ev.LogRecords != 2 || ev.SealedRecords != 6 || ev.Bytes != ev.SealedBytes+ev.LogBytes || !ev.LastIngestAt.Equal(received.Add(time.Minute)) {
			t.Fatalf("events after more records: %+v", ev)
		}
	})
	t.Run("a project without data", func(t *testing.T) {
		r := qw.do("GET", "/api/v1/projects/"+w.p2.ID+"/stats", bearer(w.memberSes), nil)
		if r.status != 200 || !strings.Contains(r.body, `"models":[]`) {
			t.Fatalf("%d %s", r.status, r.body)
		}
		r = qw.do("POST", "/api/v1/projects/"+w.p2.ID+"/query", bearer(w.memberSes), q())
		if r.status != 400 || !strings.Contains(r.body, `"field":"schema"`) {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
}

// TestQueryMetrics: /metrics counts queries by form and the parts they scanned or skipped.
func TestQueryMetrics(t *testing.T) {
	qw := newQueryWorld(t, nil)
	open := apiKey(qw.keys["open"])
	qw.runQuery(t, scenario{method: "POST", url: "/query", auth: open, body: q("aggregations", countAgg), status: 200})
	qw.runQuery(t, scenario{method: "POST", url: "/query", auth: open, body: map[string]any{"api": "sales", "params": map[string]any{"country": "NL"}}, status: 200})
	r := qw.do("GET", "/metrics", "", nil)
	for _, want := range []string{
		`lookout_query_duration_seconds_count{form="adhoc"} 1`,
		`lookout_query_duration_seconds_count{form="api"} 1`,
		`lookout_query_blocks_total{outcome="scanned"}`,
		`lookout_query_blocks_total{outcome="skipped"}`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestConsoleExport: a member downloads a model's records as NDJSON or Parquet, whole or
// by record time; bad formats and bounds are 400s, and users who may not see the project
// get what every project route answers them.
func TestConsoleExport(t *testing.T) {
	qw := newQueryWorld(t, nil)
	w := qw.w
	p := "/api/v1/projects/" + qw.project + "/models"
	ndjson := func(url string, n int, has, hasNot []string) {
		t.Helper()
		r := qw.do("GET", url, bearer(w.memberSes), nil)
		if r.status != 200 || r.header.Get("Content-Type") != "application/x-ndjson" || strings.Count(r.body, "\n") != n {
			t.Fatalf("%s: %d %v %q", url, r.status, r.header, r.body)
		}
		for _, s := range has {
			if !strings.Contains(r.body, s) {
				t.Errorf("%s lacks %s", url, s)
			}
		}
		for _, s := range hasNot {
			if strings.Contains(r.body, s) {
				t.Errorf("%s has %s", url, s)
			}
		}
	}
	ndjson(p+"/events/export", 6, []string{`{"id":"a1","tenant":"a","country":"NL","amount":10,"qty":1,"ok":true,"ts":"2026-11-21T13:00:00Z","_received_at":"`, `"id":"b2"`, `"_client_id":"ic_`}, nil)
	ndjson(p+"/events/export?format=ndjson&from=2026-11-21T00:00:00Z&to=2026-11-21T13:00:00Z", 2, []string{`"id":"a2"`, `"id":"b2"`}, []string{`"id":"a3"`, `"id":"a1"`})
	// A relative bound counts back from the server's clock.
	from := qw.clock.Now().Add(-time.Hour)
	n := 0
	for _, ts := range []string{"2026-11-21T13:00:00Z", "2026-11-21T12:00:00Z", "2026-11-19T14:00:00Z", "2026-11-21T13:30:00Z", "2026-11-21T13:00:00Z", "2026-11-21T11:00:00Z"} {
		if at, _ := time.Parse(time.RFC3339, ts); !at.Before(from) {
			n++
		}
	}
	ndjson(p+"/events/export?from=-1h", n, nil, []string{`"id":"a3"`})

	r := qw.do("GET", p+"/events/export?format=parquet", bearer(w.memberSes), nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/vnd.apache.parquet" || !strings.Contains(r.header.Get("Content-Disposition"), `filename="events.parquet"`) {
		t.Fatalf("parquet: %d %v", r.status, r.header)
	}
	f, err := parquet.OpenFile(strings.NewReader(r.body), int64(len(r.body)))
	if err != nil || f.NumRows() != 6 {
		t.Fatalf("parquet file: %v rows, %v", f, err)
	}

	if r.header.Get("Content-Length") != fmt.Sprint(len(r.body)) {
		t.Fatalf("Content-Length %q for %d bytes", r.header.Get("Content-Length"), len(r.body))
	}
	// Every export slot taken: the next one is told to come back.
	for range maxExports {
		qw.srv.exports <- struct{}{}
	}
	if busy := qw.do("GET", p+"/events/export", bearer(w.memberSes), nil); busy.status != 503 || busy.header.Get("Retry-After") == "" {
		t.Fatalf("with every slot taken: %d %v", busy.status, busy.header)
	}
	for range maxExports {
		<-qw.srv.exports
	}

	strangerStatus := qw.do("GET", "/api/v1/projects/"+qw.project, bearer(w.strangerSes), nil).status
	for _, sc := range []scenario{
		{name: "bad format", method: "GET", auth: bearer(w.memberSes), url: p + "/events/export?format=csv", status: 400, contains: []string{`"field":"format"`}},
		{name: "bad from", method: "GET", auth: bearer(w.memberSes), url: p + "/events/export?from=yesterday", status: 400, contains: []string{`"field":"from"`}},
		{name: "from after to", method: "GET", auth: bearer(w.memberSes), url: p + "/events/export?from=2026-11-21T00:00:00Z&to=2026-11-20T00:00:00Z", status: 400, contains: []string{`"field":"to"`, "after from"}},
		{name: "unknown model", method: "GET", auth: bearer(w.memberSes), url: p + "/nope/export", status: 404},
		{name: "no session", method: "GET", url: p + "/events/export", status: 401},
		{name: "a management token", method: "GET", auth: qw.all, url: p + "/events/export", status: 401},
		{name: "stranger", method: "GET", auth: bearer(w.strangerSes), url: p + "/events/export", status: strangerStatus, notContains: []string{`"id":"a1"`}},
	} {
		t.Run(sc.name, func(t *testing.T) { qw.run(t, sc) })
	}
}

// TestConsoleActivity: the overview's time series count what the project's models received
// per hour (the same count a query gives), and the route takes the project checks of every
// console project route.
func TestConsoleActivity(t *testing.T) {
	qw := newQueryWorld(t, nil)
	w := qw.w
	p := "/api/v1/projects/" + qw.project
	strangerStatus := qw.do("GET", p, bearer(w.strangerSes), nil).status
	for _, sc := range []scenario{
		{name: "no session", method: "GET", url: p + "/activity", status: 401},
		{name: "stranger", method: "GET", auth: bearer(w.strangerSes), url: p + "/activity", status: strangerStatus, notContains: []string{`"records"`}},
		{name: "hours out of range", method: "GET", auth: bearer(w.memberSes), url: p + "/activity?hours=97", status: 400, contains: []string{`"field":"hours"`}},
		{name: "days not a number", method: "GET", auth: bearer(w.memberSes), url: p + "/activity?days=x", status: 400, contains: []string{`"field":"days"`}},
		{name: "hours present but empty", method: "GET", auth: bearer(w.memberSes), url: p + "/activity?hours=", status: 400, contains: []string{`"field":"hours"`}},
	} {
		t.Run(sc.name, func(t *testing.T) { qw.run(t, sc) })
	}
	r := qw.do("GET", p+"/activity?hours=3&days=2", bearer(w.memberSes), nil)
	var got struct {
		StepSeconds int `json:"step_seconds"`
		Records     []struct {
			ModelKey string  `json:"model_key"`
			Counts   []int64 `json:"counts"`
		} `json:"records"`
		Alerts struct {
			Days            []string       `json:"days"`
			IncidentsOpened []int          `json:"incidents_opened"`
			Deliveries      map[string]int `json:"deliveries"`
			SuccessRate     *float64       `json:"success_rate"`
		} `json:"alerts"`
	}
	if r.status != 200 || json.Unmarshal(r.env.Data, &got) != nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	counted := map[string]int64{}
	for _, m := range got.Records {
		if len(m.Counts) != 3 {
			t.Fatalf("%s: %d steps", m.ModelKey, len(m.Counts))
		}
		for _, n := range m.Counts {
			counted[m.ModelKey] += n
		}
	}
	// What a count query says each model holds: every record was received within the hour.
	for _, m := range got.Records {
		q := qw.do("POST", p+"/query", bearer(w.memberSes), map[string]any{"schema": m.ModelKey, "aggregations": countAgg})
		var res struct{ Rows [][]int64 }
		if err := json.Unmarshal(q.env.Data, &res); err != nil || len(res.Rows) != 1 {
			t.Fatalf("%s: %s", m.ModelKey, q.body)
		}
		if counted[m.ModelKey] != res.Rows[0][0] || m.Counts[2] != res.Rows[0][0] {
			t.Errorf("%s: activity %v, query %d", m.ModelKey, m.Counts, res.Rows[0][0])
		}
	}
	if counted["events"] != 6 || got.StepSeconds != 3600 || len(got.Alerts.Days) != 2 || len(got.Alerts.IncidentsOpened) != 2 || got.Alerts.SuccessRate != nil {
		t.Fatalf("%s", r.body)
	}
}
