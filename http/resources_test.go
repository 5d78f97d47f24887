package http

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"lookout/auth"
	"lookout/internal/testclock"
	"lookout/store"
)

// certPEM makes a self-signed certificate: a CA or not, valid until notAfter.
func certPEM(t testing.TB, cn string, isCA bool, notAfter time.Time) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"Lookout Test"}},
		NotBefore: testclock.Start.Add(-24 * time.Hour), NotAfter: notAfter,
		IsCA: isCA, BasicConstraintsValid: true,
	}
	if isCA {
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func publicKeyPEM(t testing.TB) string {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// token issues a Management Token for the world's owner.
func (h *harness) token(w *world, scopes []string, projects ...string) string {
	h.t.Helper()
	tok, _, err := auth.CreateToken(h.st, w.owner.ID, auth.TokenRequest{Name: "t", WorkspaceID: w.ws.ID, Scopes: scopes, ProjectIDs: projects})
	if err != nil {
		h.t.Fatal(err)
	}
	return bearer(tok)
}

// created posts a body and returns the new resource's id, failing the test otherwise.
func (h *harness) created(authz, path string, body any) string {
	h.t.Helper()
	r := h.do("POST", path, authz, body)
	if r.status != 201 {
		h.t.Fatalf("POST %s: %d %s", path, r.status, r.body)
	}
	var v struct{ ID string }
	r.data(h.t, &v)
	return v.ID
}

// fixtures are one of every resource in a project, made through the API.
type fixtures struct {
	project                                               string
	model, warehouse, credential, ingest, query, key, api string
	binding, ca, caPEM                                    string
}

func (h *harness) fixtures(w *world, all, project string) fixtures {
	f := fixtures{project: project}
	mg := "/management/v1"
	f.model = h.created(all, mg+"/models", map[string]any{"project_id": project, "key": "orders", "name": "Orders",
		"fields":          []map[string]any{{"name": "id", "type": "string", "required": true}, {"name": "amount", "type": "number"}, {"name": "country", "type": "string"}, {"name": "ts", "type": "timestamp"}},
		"timestamp_field": "ts"})
	f.credential = h.created(all, mg+"/warehouse-credentials", map[string]any{"project_id": project, "name": "pg", "type": "password", "username": "lookout", "secret": "s3cret-password-1234"})
	f.warehouse = h.created(all, mg+"/warehouses", map[string]any{"project_id": project, "name": "pg", "type": "postgres", "config": map[string]any{"host": "db.internal", "database": "events"}, "credential_id": f.credential})
	f.ingest = h.created(all, mg+"/ingest-clients", map[string]any{"project_id": project, "name": "web", "models": []string{"orders"}, "quota": map[string]any{"requests_per_minute": 600}})
	f.key = h.created(all, mg+"/runtime-api-keys", map[string]any{"project_id": project, "name": "browser", "kind": "ingest", "client_id": f.ingest, "models": []string{"orders"}})
	f.api = h.created(all, mg+"/analytics-apis", map[string]any{"project_id": project, "key": "revenue", "model_key": "orders",
		"query":  map[string]any{"group_by": []string{"country"}, "aggregations": []map[string]any{{"fn": "sum", "field": "amount", "as": "revenue"}}},
		"params": []map[string]any{}})
	f.query = h.created(all, mg+"/query-clients", map[string]any{"project_id": project, "name": "dash", "models": []string{"orders"}, "analytics_apis": []string{"revenue"}, "adhoc_models": []string{"orders"},
		"required_filters": []map[string]any{{"field": "country", "op": "eq", "value": "NL"}}})
	f.binding = h.created(all, mg+"/analytics-bindings", map[string]any{"project_id": project, "analytics_api_id": f.api, "warehouse_id": f.warehouse})
	f.caPEM = certPEM(h.t, "Test CA", true, testclock.Start.Add(365*24*time.Hour))
	f.ca = h.created(all, mg+"/client-cas", map[string]any{"project_id": project, "name": "devices", "certificate_pem": f.caPEM})
	return f
}

// newResourceHarness is a harness with a populated world, an all-scopes workspace-wide
// token and one of every resource in the world's first project.
func newResourceHarness(t *testing.T) (*harness, *world, string, fixtures) {
	h := newHarness(t)
	w := h.world()
	all := h.token(w, auth.AllScopes())
	return h, w, all, h.fixtures(w, all, w.p1.ID)
}

// TestResourceScopeMatrix sends every route of every resource through the credential cases
// that differ between resources: the family's read scope, its write scope, another family,
// a token restricted to another project, and no token.
func TestResourceScopeMatrix(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	p := w.p1.ID
	type rc struct {
		family, method, path string
		body                 any
	}
	routes := []rc{
		{"models", "GET", "/models?project_id=" + p, nil},
		{"models", "POST", "/models", map[string]any{"project_id": p, "key": "m2"}},
		{"models", "GET", "/models/" + f.model, nil},
		{"models", "PUT", "/models/" + f.model, map[string]any{"description": "x"}},
		{"models", "DELETE", "/models/" + f.model, nil},
		{"warehouses", "GET", "/warehouses?project_id=" + p, nil},
		{"warehouses", "POST", "/warehouses", map[string]any{"project_id": p, "name": "w", "type": "embedded"}},
		{"warehouses", "GET", "/warehouses/" + f.warehouse, nil},
		{"warehouses", "PUT", "/warehouses/" + f.warehouse, map[string]any{"name": "w2"}},
		{"warehouses", "POST", "/warehouses/" + f.warehouse + "/test", nil},
		{"warehouses", "GET", "/warehouse-credentials?project_id=" + p, nil},
		{"warehouses", "POST", "/warehouse-credentials", map[string]any{"project_id": p, "name": "c", "type": "token", "secret": "abc"}},
		{"warehouses", "GET", "/warehouse-credentials/" + f.credential, nil},
		{"warehouses", "PUT", "/warehouse-credentials/" + f.credential, map[string]any{"name": "c2"}},
		{"clients", "GET", "/ingest-clients?project_id=" + p, nil},
		{"clients", "POST", "/ingest-clients", map[string]any{"project_id": p, "name": "c"}},
		{"clients", "GET", "/ingest-clients/" + f.ingest, nil},
		{"clients", "PUT", "/ingest-clients/" + f.ingest, map[string]any{"name": "c"}},
		{"clients", "DELETE", "/ingest-clients/" + f.ingest, nil},
		{"clients", "PUT", "/ingest-clients/" + f.ingest + "/authentication", map[string]any{"methods": []string{"api_key"}}},
		{"clients", "GET", "/query-clients?project_id=" + p, nil},
		{"clients", "POST", "/query-clients", map[string]any{"project_id": p, "name": "c"}},
		{"clients", "GET", "/query-clients/" + f.query, nil},
		{"clients", "PUT", "/query-clients/" + f.query, map[string]any{"name": "c"}},
		{"clients", "DELETE", "/query-clients/" + f.query, nil},
		{"clients", "PUT", "/query-clients/" + f.query + "/authentication", map[string]any{"methods": []string{"api_key"}}},
		{"clients", "GET", "/runtime-api-keys?project_id=" + p, nil},
		{"clients", "POST", "/runtime-api-keys", map[string]any{"project_id": p, "name": "k", "kind": "ingest", "client_id": f.ingest}},
		{"clients", "GET", "/runtime-api-keys/" + f.key, nil},
		{"clients", "PUT", "/runtime-api-keys/" + f.key, map[string]any{"name": "k2"}},
		{"clients", "DELETE", "/runtime-api-keys/" + f.key, nil},
		{"analytics", "GET", "/analytics-apis?project_id=" + p, nil},
		{"analytics", "POST", "/analytics-apis", map[string]any{"project_id": p, "key": "a2", "model_key": "orders", "query": map[string]any{}}},
		{"analytics", "GET", "/analytics-apis/" + f.api, nil},
		{"analytics", "PUT", "/analytics-apis/" + f.api, map[string]any{"name": "x"}},
		{"analytics", "DELETE", "/analytics-apis/" + f.api, nil},
		{"analytics", "GET", "/analytics-bindings?project_id=" + p, nil},
		{"analytics", "POST", "/analytics-bindings", map[string]any{"project_id": p, "analytics_api_id": f.api, "warehouse_id": f.warehouse}},
		{"analytics", "GET", "/analytics-bindings/" + f.binding, nil},
		{"analytics", "POST", "/analytics-bindings/" + f.binding + "/promote", nil},
		{"security", "GET", "/client-cas?project_id=" + p, nil},
		{"security", "POST", "/client-cas", map[string]any{"project_id": p, "name": "x", "certificate_pem": f.caPEM}},
		{"security", "GET", "/client-cas/" + f.ca, nil},
		{"security", "DELETE", "/client-cas/" + f.ca, nil},
	}
	otherFamily := map[string]string{"models": "security", "warehouses": "models", "clients": "analytics", "analytics": "clients", "security": "warehouses"}
	tokens := map[string]string{}
	tok := func(scopes ...string) string {
		key := strings.Join(scopes, ",")
		if tokens[key] == "" {
			tokens[key] = h.token(w, scopes)
		}
		return tokens[key]
	}
	restricted := h.token(w, auth.AllScopes(), w.p2.ID)
	before := h.do("GET", "/management/v1/models/"+f.model, all, nil).body
	for _, rt := range routes {
		read := rt.method == "GET"
		cases := []struct {
			name, authz string
			status      int
		}{
			{"no token", "", 401},
			{"other family", tok(otherFamily[rt.family]+":read", otherFamily[rt.family]+":write"), 403},
			{"other project", restricted, 404}, // a project the token may not see does not exist for it
		}
		if read {
			cases = append(cases, struct {
				name, authz string
				status      int
			}{"write scope only", tok(rt.family + ":write"), 403})
		} else {
			cases = append(cases, struct {
				name, authz string
				status      int
			}{"read scope only", tok(rt.family + ":read"), 403})
		}
		for _, c := range cases {
			for _, root := range []string{"/management/v1"} {
				t.Run(fmt.Sprintf("%s %s/%s", rt.method, rt.path, c.name), func(t *testing.T) {
					h.run(t, scenario{method: rt.method, url: root + rt.path, auth: c.authz, body: rt.body, status: c.status})
				})
			}
		}
		if read {
			t.Run(rt.method+" "+rt.path+"/read scope", func(t *testing.T) {
				h.run(t, scenario{method: rt.method, url: "/management/v1" + rt.path, auth: tok(rt.family + ":read"), status: 200})
			})
			t.Run(rt.method+" "+rt.path+"/console owner", func(t *testing.T) {
				h.run(t, scenario{method: rt.method, url: "/api/v1" + rt.path, auth: bearer(w.ownerSes), status: 200})
			})
			t.Run(rt.method+" "+rt.path+"/console stranger", func(t *testing.T) {
				h.run(t, scenario{method: rt.method, url: "/api/v1" + rt.path, auth: bearer(w.strangerSes), status: 404})
			})
		} else {
			t.Run(rt.method+" "+rt.path+"/console member", func(t *testing.T) {
				h.run(t, scenario{method: rt.method, url: "/api/v1" + rt.path, auth: bearer(w.memberSes), body: rt.body, status: 403})
			})
		}
	}
	if after := h.do("GET", "/management/v1/models/"+f.model, all, nil).body; after != before {
		t.Fatalf("denied requests changed the model:\n%s\n%s", before, after)
	}
}

// TestModels covers the model rules: validation, key uniqueness, additive updates only,
// archive instead of delete.
func TestModels(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	mg := "/management/v1/models"
	p := w.p1.ID
	base := []map[string]any{{"name": "id", "type": "string", "required": true}, {"name": "amount", "type": "number"}, {"name": "country", "type": "string"}, {"name": "ts", "type": "timestamp"}}
	with := func(extra ...map[string]any) []map[string]any {
		return append(append([]map[string]any{}, base...), extra...)
	}
	for _, sc := range []scenario{
		{name: "no key", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p}, status: 400, contains: []string{`"field":"key"`}},
		{name: "bad key", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "key": "Orders!"}, status: 400, contains: []string{`"field":"key"`}},
		{name: "no project", method: "POST", url: mg, auth: all, body: map[string]any{"key": "x"}, status: 400, contains: []string{`"field":"project_id"`}},
		{name: "list without project", method: "GET", url: mg, auth: all, status: 400, contains: []string{`"field":"project_id"`}},
		{name: "bad field type", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "key": "x", "fields": []map[string]any{{"name": "a", "type": "text"}}}, status: 400, contains: []string{`"field":"fields[0].type"`}},
		{name: "duplicate field", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "key": "x", "fields": []map[string]any{{"name": "a", "type": "string"}, {"name": "a", "type": "string"}}}, status: 400, contains: []string{`"field":"fields[1].name"`}},
		{name: "system field name", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "key": "x", "fields": []map[string]any{{"name": "_received_at", "type": "string"}}}, status: 400, contains: []string{`"field":"fields[0].name"`}},
		{name: "timestamp field not a timestamp", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "key": "x", "fields": []map[string]any{{"name": "a", "type": "string"}}, "timestamp_field": "a"}, status: 400, contains: []string{`"field":"timestamp_field"`}},
		{name: "bad unknown_fields", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "key": "x", "unknown_fields": "keep"}, status: 400, contains: []string{`"field":"unknown_fields"`}},
		{name: "foreign warehouse", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "key": "x", "warehouse_id": "wh_nope"}, status: 400, contains: []string{`"field":"warehouse_id"`}},
		{name: "duplicate key", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "key": "orders"}, status: 409, contains: []string{`"field":"key"`}},
		{name: "same key in another project", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": w.p2.ID, "key": "orders"}, status: 201},
		{name: "unknown id", method: "GET", url: mg + "/mdl_01M7Z4MMBV5BFTG68JM01QSV4X", auth: all, status: 404},
		{name: "remove a field", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"fields": base[:3]}, status: 409, contains: []string{`"field":"fields[3]"`}},
		{name: "rename a field", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"fields": []map[string]any{{"name": "ident", "type": "string", "required": true}, base[1], base[2], base[3]}}, status: 409, contains: []string{`"field":"fields[0]"`}},
		{name: "change a type", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"fields": []map[string]any{base[0], {"name": "amount", "type": "integer"}, base[2], base[3]}}, status: 409, contains: []string{`"field":"fields[1].type"`}},
		{name: "make a field required", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"fields": []map[string]any{base[0], {"name": "amount", "type": "number", "required": true}, base[2], base[3]}}, status: 409, contains: []string{`"field":"fields[1].required"`}},
		{name: "add a required field", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"fields": with(map[string]any{"name": "sku", "type": "string", "required": true})}, status: 409, contains: []string{`"field":"fields[4].required"`}},
		{name: "change the key", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"key": "orders2"}, status: 409, contains: []string{`"field":"key"`}},
		{name: "move project", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"project_id": w.p2.ID}, status: 400, contains: []string{`"field":"project_id"`}},
		{name: "move to a foreign warehouse", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"warehouse_id": "wh_nope"}, status: 400, contains: []string{`"field":"warehouse_id"`}},
		{name: "stale If-Match", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"description": "x"}, status: 412},
		{name: "add an optional field and describe", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"name": "All orders", "fields": with(map[string]any{"name": "sku", "type": "string", "description": "stock unit"})}, status: 200, contains: []string{`"version":2`, `"sku"`}},
		{name: "archive", method: "DELETE", url: mg + "/" + f.model, auth: all, status: 200, contains: []string{`"status":"archived"`, `"version":3`}},
		{name: "read archived", method: "GET", url: mg + "/" + f.model, auth: all, status: 200, contains: []string{`"status":"archived"`}},
		{name: "write archived", method: "PUT", url: mg + "/" + f.model, auth: all, body: map[string]any{"description": "x"}, status: 409},
		{name: "list archived", method: "GET", url: mg + "?status=archived&project_id=" + p, auth: all, status: 200, contains: []string{f.model}},
		{name: "list active", method: "GET", url: mg + "?status=active&project_id=" + p, auth: all, status: 200, notContains: []string{f.model}},
		{name: "list bad status", method: "GET", url: mg + "?status=gone&project_id=" + p, auth: all, status: 400},
	} {
		t.Run(sc.name, func(t *testing.T) {
			if sc.name == "stale If-Match" {
				r := h.do(sc.method, sc.url, sc.auth, sc.body, "If-Match", `"7"`)
				if r.status != 412 {
					t.Fatalf("%d %s", r.status, r.body)
				}
				return
			}
			h.run(t, sc)
		})
	}
}

func TestModelValidateRecords(t *testing.T) {
	m := &store.Model{Key: "orders", UnknownFields: store.UnknownReject, Fields: []store.Field{
		{Name: "id", Type: "string", Required: true}, {Name: "n", Type: "integer"}, {Name: "x", Type: "number"},
		{Name: "ok", Type: "boolean"}, {Name: "at", Type: "timestamp"}, {Name: "o", Type: "object"}, {Name: "a", Type: "array"},
	}}
	for _, tc := range []struct {
		rec string
		bad string // the field named in the first error, "" when valid
	}{
		{`{"id":"1"}`, ""},
		{`{"id":"1","n":3,"x":1.5,"ok":true,"at":"2026-01-02T03:04:05Z","o":{},"a":[1]}`, ""},
		{`{"id":"1","at":1767323045000,"n":null}`, ""},
		{`{"n":3}`, "id"},
		{`{"id":null}`, "id"},
		{`{"id":1}`, "id"},
		{`{"id":"1","n":1.5}`, "n"},
		{`{"id":"1","n":"3"}`, "n"},
		{`{"id":"1","x":"1"}`, "x"},
		{`{"id":"1","ok":"true"}`, "ok"},
		{`{"id":"1","at":"yesterday"}`, "at"},
		{`{"id":"1","at":-5}`, "at"},
		{`{"id":"1","o":[]}`, "o"},
		{`{"id":"1","a":{}}`, "a"},
		{`{"id":"1","extra":1}`, "extra"},
	} {
		rec := decodeRecord(t, tc.rec)
		out, errs := m.Validate(rec)
		if tc.bad == "" {
			if len(errs) > 0 {
				t.Errorf("%s: %v", tc.rec, errs)
			}
			continue
		}
		if out != nil || len(errs) == 0 || errs[0].Field != tc.bad {
			t.Errorf("%s: errors %v, want one naming %s", tc.rec, errs, tc.bad)
		}
	}
	m.UnknownFields = store.UnknownDrop
	out, errs := m.Validate(decodeRecord(t, `{"id":"1","extra":1}`))
	if len(errs) > 0 || out["extra"] != nil || out["id"] != "1" {
		t.Fatalf("drop: %v %v", out, errs)
	}
}

func TestCredentialsAreMasked(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	all := h.token(w, auth.AllScopes())
	p := w.p1.ID
	url := "/management/v1/warehouse-credentials"
	id := h.created(all, url, map[string]any{"project_id": p, "name": "pg", "type": "password", "username": "u", "secret": "first-secret-value-1111"})
	for _, sc := range []scenario{
		{name: "read masked", method: "GET", url: url + "/" + id, auth: all, status: 200, contains: []string{`"secret_set":true`, `"secret_hint":"****1111"`}, notContains: []string{"first-secret", "sealed"}},
		{name: "no secret", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "token"}, status: 400, contains: []string{`"field":"secret"`}},
		{name: "password without username", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "password", "secret": "x"}, status: 400, contains: []string{`"field":"username"`}},
		{name: "bad type", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "kerberos", "secret": "x"}, status: 400, contains: []string{`"field":"type"`}},
		{name: "rename keeps the secret", method: "PUT", url: url + "/" + id, auth: all, body: map[string]any{"name": "pg2"}, status: 200, contains: []string{`"secret_hint":"****1111"`, `"version":2`}},
		{name: "rotate", method: "PUT", url: url + "/" + id, auth: all, body: map[string]any{"secret": "second-secret-value-2222"}, status: 200, contains: []string{`"secret_hint":"****2222"`, `"version":3`}},
		{name: "short secret shows nothing", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "token", "secret": "abc"}, status: 201, contains: []string{`"secret_hint":"****"`}},
		{name: "list", method: "GET", url: url + "?type=password&project_id=" + p, auth: all, status: 200, contains: []string{id}, notContains: []string{"second-secret"}},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	secret, err := h.st.CredentialSecret(p, id)
	if err != nil || secret != "second-secret-value-2222" {
		t.Fatalf("unsealed %q, %v", secret, err)
	}
}

func TestWarehouses(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	all := h.token(w, auth.AllScopes())
	p := w.p1.ID
	url := "/management/v1/warehouses"
	for _, sc := range []scenario{
		{name: "every project has a default embedded warehouse", method: "GET", url: url + "?type=embedded&project_id=" + p, auth: all, status: 200, contains: []string{`"name":"default"`, `"type":"embedded"`}},
		{name: "postgres defaults", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "pg", "type": "postgres", "config": map[string]any{"host": "db", "database": "d"}}, status: 201, contains: []string{`"port":5432`, `"schema":"public"`, `"sslmode":"prefer"`}},
		{name: "postgres without host", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "pg", "type": "postgres", "config": map[string]any{"database": "d"}}, status: 400, contains: []string{`"field":"config.host"`}},
		{name: "bad port and sslmode", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "pg", "type": "postgres", "config": map[string]any{"host": "db", "database": "d", "port": 70000, "sslmode": "maybe"}}, status: 400, contains: []string{`"field":"config.port"`, `"field":"config.sslmode"`}},
		{name: "unknown config field", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "pg", "type": "postgres", "config": map[string]any{"host": "db", "database": "d", "password": "x"}}, status: 400, contains: []string{`"field":"password"`}},
		{name: "embedded with config", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "e", "type": "embedded", "config": map[string]any{"host": "db"}}, status: 400, contains: []string{`"field":"config"`}},
		{name: "foreign credential", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "pg", "type": "postgres", "config": map[string]any{"host": "db", "database": "d"}, "credential_id": "whc_nope"}, status: 400, contains: []string{`"field":"credential_id"`}},
		{name: "bad type", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "oracle"}, status: 400, contains: []string{`"field":"type"`}},
		{name: "update of an unknown id", method: "PUT", url: url + "/wh_x", auth: all, body: map[string]any{}, status: 404},
		{name: "unknown id", method: "GET", url: url + "/wh_nope", auth: all, status: 404},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
}

func TestClientsAndAuthentication(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	p := w.p1.ID
	ic := "/management/v1/ingest-clients"
	qc := "/management/v1/query-clients"
	authURL := ic + "/" + f.ingest + "/authentication"
	hs := strings.Repeat("k", 40)
	for _, sc := range []scenario{
		{name: "defaults", method: "GET", url: ic + "/" + f.ingest, auth: all, status: 200, contains: []string{`"enabled":true`, `"methods":["api_key"]`, `"mode":"any"`, `"transports":["http","websocket"]`}, notContains: []string{"analytics_apis"}},
		{name: "query client has query options", method: "GET", url: qc + "/" + f.query, auth: all, status: 200, contains: []string{`"analytics_apis":["revenue"]`, `"required_filters":[{"field":"country","op":"eq","value":"NL"}]`}},
		{name: "unknown model", method: "POST", url: ic, auth: all, body: map[string]any{"project_id": p, "name": "x", "models": []string{"ghost"}}, status: 400, contains: []string{`"field":"models[0]"`}},
		{name: "query options on an ingest client", method: "POST", url: ic, auth: all, body: map[string]any{"project_id": p, "name": "x", "adhoc_models": []string{"orders"}}, status: 400, contains: []string{`"field":"adhoc_models"`}},
		{name: "negative quota", method: "POST", url: ic, auth: all, body: map[string]any{"project_id": p, "name": "x", "quota": map[string]any{"records_per_minute": -1}}, status: 400, contains: []string{`"field":"quota.records_per_minute"`}},
		{name: "unknown api", method: "POST", url: qc, auth: all, body: map[string]any{"project_id": p, "name": "x", "analytics_apis": []string{"ghost"}}, status: 400, contains: []string{`"field":"analytics_apis[0]"`}},
		{name: "bad required filter", method: "POST", url: qc, auth: all, body: map[string]any{"project_id": p, "name": "x", "required_filters": []map[string]any{{"field": "country", "op": "like", "value": "x"}}}, status: 400, contains: []string{`"field":"required_filters[0].op"`}},
		{name: "disable", method: "PUT", url: ic + "/" + f.ingest, auth: all, body: map[string]any{"enabled": false}, status: 200, contains: []string{`"enabled":false`}},
		{name: "list disabled", method: "GET", url: ic + "?enabled=false&project_id=" + p, auth: all, status: 200, contains: []string{f.ingest}},
		{name: "list bad enabled", method: "GET", url: ic + "?enabled=maybe&project_id=" + p, auth: all, status: 400},
		{name: "no methods", method: "PUT", url: authURL, auth: all, body: map[string]any{"methods": []string{}}, status: 400, contains: []string{`"field":"methods"`}},
		{name: "bad method", method: "PUT", url: authURL, auth: all, body: map[string]any{"methods": []string{"password"}}, status: 400, contains: []string{`"field":"methods[0]"`}},
		{name: "jwt without config", method: "PUT", url: authURL, auth: all, body: map[string]any{"methods": []string{"jwt"}}, status: 400, contains: []string{`"field":"jwt"`}},
		{name: "short hs256", method: "PUT", url: authURL, auth: all, body: map[string]any{"methods": []string{"jwt"}, "jwt": map[string]any{"algorithms": []string{"HS256"}, "hs256_secret": "short"}}, status: 400, contains: []string{`"field":"jwt.hs256_secret"`}},
		{name: "hs256 required", method: "PUT", url: authURL, auth: all, body: map[string]any{"methods": []string{"jwt"}, "jwt": map[string]any{"algorithms": []string{"HS256"}}}, status: 400, contains: []string{`"field":"jwt.hs256_secret"`}},
		{name: "rs256 with an ec key", method: "PUT", url: authURL, auth: all, body: map[string]any{"methods": []string{"jwt"}, "jwt": map[string]any{"algorithms": []string{"RS256"}, "public_key_pem": publicKeyPEM(t)}}, status: 400, contains: []string{`"field":"jwt.public_key_pem"`}},
		{name: "mtls with a foreign CA", method: "PUT", url: authURL, auth: all, body: map[string]any{"methods": []string{"mtls"}, "mtls": map[string]any{"client_ca_ids": []string{"ca_nope"}}}, status: 400, contains: []string{`"field":"mtls.client_ca_ids[0]"`}},
		{name: "bad cidr and transport", method: "PUT", url: authURL, auth: all, body: map[string]any{"methods": []string{"api_key"}, "allowed_cidrs": []string{"10.0.0.0/33"}, "transports": []string{"smtp"}}, status: 400, contains: []string{`"field":"allowed_cidrs[0]"`, `"field":"transports[0]"`}},
		{name: "full policy", method: "PUT", url: authURL, auth: all, body: map[string]any{"mode": "all", "methods": []string{"jwt", "mtls"},
			"jwt":           map[string]any{"algorithms": []string{"HS256"}, "hs256_secret": hs, "issuer": "https://id.example.com", "audience": "lookout"},
			"mtls":          map[string]any{"client_ca_ids": []string{f.ca}, "allowed_uris": []string{"spiffe://example.org/edge"}},
			"allowed_cidrs": []string{"10.1.2.3", "192.168.0.0/16"}, "allowed_user_agents": []string{"edge-agent/"}, "transports": []string{"http"}},
			status: 200, contains: []string{`"mode":"all"`, `"hs256_secret_set":true`, `"allowed_cidrs":["10.1.2.3/32","192.168.0.0/16"]`}, notContains: []string{hs}},
		{name: "policy kept without resending the secret", method: "PUT", url: authURL, auth: all, body: map[string]any{"methods": []string{"jwt"}, "jwt": map[string]any{"algorithms": []string{"HS256", "ES256"}, "public_key_pem": publicKeyPEM(t)}}, status: 200, contains: []string{`"hs256_secret_set":true`, `"ES256"`}},
		{name: "a CA no longer referenced can go", method: "DELETE", url: "/management/v1/client-cas/" + f.ca, auth: all, status: 200, contains: []string{`"deleted":true`}},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	secret, err := h.st.ClientHS256Secret(store.ClientIngest, p, f.ingest)
	if err != nil || string(secret) != hs {
		t.Fatalf("stored HS256 secret %q %v", secret, err)
	}
	// Deleting a client revokes its keys.
	h.run(t, scenario{method: "DELETE", url: ic + "/" + f.ingest, auth: all, status: 200, contains: []string{`"deleted":true`}})
	h.run(t, scenario{method: "GET", url: ic + "/" + f.ingest, auth: all, status: 404})
	h.run(t, scenario{method: "GET", url: "/management/v1/runtime-api-keys/" + f.key, auth: all, status: 200, contains: []string{`"revoked_at":"`}})
}

func TestClientCAs(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	p := w.p1.ID
	url := "/management/v1/client-cas"
	h.run(t, scenario{method: "PUT", url: "/management/v1/ingest-clients/" + f.ingest + "/authentication", auth: all, status: 200,
		body: map[string]any{"methods": []string{"mtls"}, "mtls": map[string]any{"client_ca_ids": []string{f.ca}}}})
	two := certPEM(t, "a", true, testclock.Start.Add(time.Hour)) + certPEM(t, "b", true, testclock.Start.Add(time.Hour))
	for _, sc := range []scenario{
		{name: "read adds metadata", method: "GET", url: url + "/" + f.ca, auth: all, status: 200, contains: []string{`"fingerprint_sha256":"`, `"subject":"CN=Test CA,O=Lookout Test"`, `"not_after":"2027-11-21T12:00:00Z"`}},
		{name: "referenced", method: "DELETE", url: url + "/" + f.ca, auth: all, status: 409, contains: []string{f.ingest}},
		{name: "not PEM", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "x", "certificate_pem": "hello"}, status: 400, contains: []string{`"field":"certificate_pem"`}},
		{name: "not a CA", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "x", "certificate_pem": certPEM(t, "leaf", false, testclock.Start.Add(time.Hour))}, status: 400, contains: []string{"not a CA"}},
		{name: "expired", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "x", "certificate_pem": certPEM(t, "old", true, testclock.Start.Add(-time.Hour))}, status: 400, contains: []string{"expired"}},
		{name: "two certificates", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "x", "certificate_pem": two}, status: 400, contains: []string{"exactly one"}},
		{name: "no name", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "certificate_pem": f.caPEM}, status: 400, contains: []string{`"field":"name"`}},
		{name: "unknown", method: "DELETE", url: url + "/ca_nope", auth: all, status: 404},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	h.run(t, scenario{method: "PUT", url: "/management/v1/ingest-clients/" + f.ingest + "/authentication", auth: all, status: 200, body: map[string]any{"methods": []string{"api_key"}}})
	h.run(t, scenario{method: "DELETE", url: url + "/" + f.ca, auth: all, status: 200, contains: []string{`"deleted":true`}})
	h.run(t, scenario{method: "GET", url: url + "/" + f.ca, auth: all, status: 404})
}

func TestRuntimeKeys(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	p := w.p1.ID
	url := "/management/v1/runtime-api-keys"
	r := h.run(t, scenario{method: "POST", url: url, auth: all, status: 201, body: map[string]any{"project_id": p, "name": "k", "kind": "ingest", "client_id": f.ingest, "expires_at": "2027-01-01T00:00:00Z"}, contains: []string{`"key":"lk_ak_`, `"models":[]`}})
	var created struct {
		ID, Key   string
		KeyPrefix string `json:"key_prefix"`
	}
	r.data(t, &created)
	if !auth.ParseRuntimeKey(created.Key) || !strings.HasPrefix(created.Key, created.KeyPrefix) || len(created.KeyPrefix) != 14 {
		t.Fatalf("key %q prefix %q", created.Key, created.KeyPrefix)
	}
	if k, err := h.st.RuntimeKeyByHash(auth.HashSecret(created.Key)); err != nil || k.ID != created.ID {
		t.Fatalf("lookup by hash: %v", err)
	}
	for _, sc := range []scenario{
		{name: "read never shows the key", method: "GET", url: url + "/" + created.ID, auth: all, status: 200, contains: []string{created.KeyPrefix}, notContains: []string{created.Key, "key_hash"}},
		{name: "wider than the client", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "k", "kind": "ingest", "client_id": f.ingest, "models": []string{"orders", "other"}}, status: 400, contains: []string{`"field":"models[1]"`}},
		{name: "wrong kind for the client", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "k", "kind": "query", "client_id": f.ingest}, status: 400, contains: []string{`"field":"client_id"`}},
		{name: "unknown client, in words", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "k", "kind": "ingest", "client_id": "ic_nope"}, status: 400, contains: []string{"is not an ingest client of this project"}, notContains: []string{"a ingest"}},
		{name: "bad kind", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "k", "kind": "admin", "client_id": f.ingest}, status: 400, contains: []string{`"field":"kind"`}},
		{name: "past expiry", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "name": "k", "kind": "ingest", "client_id": f.ingest, "expires_at": "2020-01-01T00:00:00Z"}, status: 400, contains: []string{`"field":"expires_at"`}},
		{name: "cannot change client", method: "PUT", url: url + "/" + created.ID, auth: all, body: map[string]any{"client_id": f.query}, status: 400, contains: []string{`"field":"client_id"`}},
		{name: "narrow", method: "PUT", url: url + "/" + created.ID, auth: all, body: map[string]any{"models": []string{"orders"}, "name": "k2"}, status: 200, contains: []string{`"models":["orders"]`, `"version":2`}},
		{name: "filter by client", method: "GET", url: url + "?status=active&client_id=" + f.ingest + "&project_id=" + p, auth: all, status: 200, contains: []string{created.ID}},
		{name: "bad status filter", method: "GET", url: url + "?status=zombie&project_id=" + p, auth: all, status: 400},
		{name: "revoke", method: "DELETE", url: url + "/" + created.ID, auth: all, status: 200, contains: []string{`"revoked_at":"`}},
		{name: "revoked is listed as revoked", method: "GET", url: url + "?status=revoked&project_id=" + p, auth: all, status: 200, contains: []string{created.ID}},
		{name: "revoked cannot change", method: "PUT", url: url + "/" + created.ID, auth: all, body: map[string]any{"name": "x"}, status: 409},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
}

func TestAnalyticsAPIsAndBindings(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	p := w.p1.ID
	url := "/management/v1/analytics-apis"
	bind := "/management/v1/analytics-bindings"
	q := func(query map[string]any) map[string]any {
		return map[string]any{"project_id": p, "key": "q1", "model_key": "orders", "query": query}
	}
	for _, sc := range []scenario{
		{name: "duplicate key", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "key": "revenue", "model_key": "orders", "query": map[string]any{}}, status: 409, contains: []string{`"field":"key"`}},
		{name: "unknown model", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "key": "x", "model_key": "ghost", "query": map[string]any{}}, status: 400, contains: []string{`"field":"model_key"`}},
		{name: "unknown select field", method: "POST", url: url, auth: all, body: q(map[string]any{"select": []string{"ghost"}}), status: 400, contains: []string{`"field":"query.select[0]"`}},
		{name: "sum of a string", method: "POST", url: url, auth: all, body: q(map[string]any{"aggregations": []map[string]any{{"fn": "sum", "field": "country"}}}), status: 400, contains: []string{`"field":"query.aggregations[0].field"`}},
		{name: "bad fn", method: "POST", url: url, auth: all, body: q(map[string]any{"aggregations": []map[string]any{{"fn": "median", "field": "amount"}}}), status: 400, contains: []string{`"field":"query.aggregations[0].fn"`}},
		{name: "wrong value type", method: "POST", url: url, auth: all, body: q(map[string]any{"filters": []map[string]any{{"field": "amount", "op": "gt", "value": "big"}}}), status: 400, contains: []string{`"field":"query.filters[0].value"`}},
		{name: "contains on a number", method: "POST", url: url, auth: all, body: q(map[string]any{"filters": []map[string]any{{"field": "amount", "op": "contains", "value": "1"}}}), status: 400, contains: []string{`"field":"query.filters[0].op"`}},
		{name: "undeclared param", method: "POST", url: url, auth: all, body: q(map[string]any{"filters": []map[string]any{{"field": "country", "op": "eq", "value": map[string]any{"param": "c"}}}}), status: 400, contains: []string{"undeclared param"}},
		{name: "order by a non-column", method: "POST", url: url, auth: all, body: q(map[string]any{"group_by": []string{"country"}, "order_by": []map[string]any{{"field": "amount"}}}), status: 400, contains: []string{`"field":"query.order_by[0].field"`}},
		{name: "select with group_by", method: "POST", url: url, auth: all, body: q(map[string]any{"select": []string{"id"}, "group_by": []string{"country"}}), status: 400, contains: []string{`"field":"query.select"`}},
		{name: "limit too high", method: "POST", url: url, auth: all, body: q(map[string]any{"limit": 10001}), status: 400, contains: []string{`"field":"query.limit"`}},
		{name: "bad time range", method: "POST", url: url, auth: all, body: q(map[string]any{"time_range": map[string]any{"from": "-1h", "to": "-2h"}}), status: 400, contains: []string{`"field":"query.time_range"`}},
		{name: "param default of the wrong type", method: "POST", url: url, auth: all, body: map[string]any{"project_id": p, "key": "x", "model_key": "orders", "query": map[string]any{}, "params": []map[string]any{{"name": "c", "type": "integer", "default": "x"}}}, status: 400, contains: []string{`"field":"params[0].default"`}},
		{name: "valid with params", method: "POST", url: url, auth: all, status: 201, body: map[string]any{"project_id": p, "key": "by_country", "model_key": "orders",
			"query":  map[string]any{"filters": []map[string]any{{"field": "country", "op": "eq", "value": map[string]any{"param": "country"}}, {"field": "_received_at", "op": "gte", "value": "2026-01-01T00:00:00Z"}}, "group_by": []string{"country"}, "aggregations": []map[string]any{{"fn": "count"}, {"fn": "avg", "field": "amount", "as": "avg_amount"}}, "order_by": []map[string]any{{"field": "count", "desc": true}}, "limit": 100, "time_range": map[string]any{"from": "-24h"}},
			"params": []map[string]any{{"name": "country", "type": "string", "required": true}}}},
		{name: "key is stable", method: "PUT", url: url + "/" + f.api, auth: all, body: map[string]any{"key": "renamed"}, status: 409},
		{name: "update", method: "PUT", url: url + "/" + f.api, auth: all, body: map[string]any{"description": "monthly revenue"}, status: 200, contains: []string{`"version":2`}},
		{name: "first binding is active", method: "GET", url: bind + "/" + f.binding, auth: all, status: 200, contains: []string{`"state":"active"`}},
		{name: "binding to a foreign warehouse", method: "POST", url: bind, auth: all, body: map[string]any{"project_id": p, "analytics_api_id": f.api, "warehouse_id": "wh_nope"}, status: 400, contains: []string{`"field":"warehouse_id"`}},
		{name: "binding without api", method: "POST", url: bind, auth: all, body: map[string]any{"project_id": p, "warehouse_id": f.warehouse}, status: 400, contains: []string{`"field":"analytics_api_id"`}},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	second := h.created(all, bind, map[string]any{"project_id": p, "analytics_api_id": f.api, "warehouse_id": f.warehouse})
	h.run(t, scenario{method: "GET", url: bind + "/" + second, auth: all, status: 200, contains: []string{`"state":"standby"`}})
	h.run(t, scenario{method: "POST", url: bind + "/" + second + "/promote", auth: all, status: 200, contains: []string{`"state":"active"`}})
	h.run(t, scenario{method: "GET", url: bind + "/" + f.binding, auth: all, status: 200, contains: []string{`"state":"standby"`}})
	h.run(t, scenario{method: "GET", url: bind + "?state=active&analytics_api_id=" + f.api + "&project_id=" + p, auth: all, status: 200, contains: []string{second}, notContains: []string{f.binding}})
	h.run(t, scenario{method: "DELETE", url: url + "/" + f.api, auth: all, status: 200, contains: []string{`"status":"archived"`}})
	h.run(t, scenario{method: "GET", url: bind + "/" + second, auth: all, status: 200, contains: []string{`"state":"retired"`}})
	h.run(t, scenario{method: "POST", url: bind + "/" + f.binding + "/promote", auth: all, status: 409})
	h.run(t, scenario{method: "PUT", url: url + "/" + f.api, auth: all, body: map[string]any{"name": "x"}, status: 409})
	h.run(t, scenario{method: "POST", url: bind, auth: all, body: map[string]any{"project_id": p, "analytics_api_id": f.api, "warehouse_id": f.warehouse}, status: 409})
}

// TestConcurrentPromotes: bindings of one API promoted from 8 goroutines at once leave
// exactly one active binding.
func TestConcurrentPromotes(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	p := w.p1.ID
	bind := "/management/v1/analytics-bindings"
	ids := []string{f.binding}
	for i := 0; i < 7; i++ {
		ids = append(ids, h.created(all, bind, map[string]any{"project_id": p, "analytics_api_id": f.api, "warehouse_id": f.warehouse}))
	}
	for round := 0; round < 5; round++ {
		// The goroutines only collect what went wrong: t.Fatal belongs to the test's own
		// goroutine, so the failures are reported after Wait.
		var wg sync.WaitGroup
		errs := make([]error, len(ids))
		for i, id := range ids {
			wg.Add(1)
			go func(i int, id string) {
				defer wg.Done()
				r, err := h.try("POST", bind+"/"+id+"/promote", all, nil)
				if err == nil && r.status != 200 {
					err = fmt.Errorf("promote %s: %d %s", id, r.status, r.body)
				}
				errs[i] = err
			}(i, id)
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		bs, _, err := h.st.ListBindings(p, f.api, "", store.Page{Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		active := 0
		for _, b := range bs {
			if b.State == store.BindingActive {
				active++
			}
		}
		if len(bs) != 8 || active != 1 {
			t.Fatalf("round %d: %d bindings, %d active", round, len(bs), active)
		}
	}
}

// TestEveryResourceAnswers404And412 checks, for every kind, that an unknown id is 404 and a
// stale If-Match is 412 that changes nothing.
func TestEveryResourceAnswers404And412(t *testing.T) {
	h, _, all, f := newResourceHarness(t)
	mg := "/management/v1"
	for _, c := range []struct {
		coll, id string
		update   any
	}{
		{"/models", f.model, map[string]any{"description": "x"}},
		{"/warehouses", f.warehouse, map[string]any{"name": "x"}},
		{"/warehouse-credentials", f.credential, map[string]any{"name": "x"}},
		{"/ingest-clients", f.ingest, map[string]any{"name": "x"}},
		{"/query-clients", f.query, map[string]any{"name": "x"}},
		{"/runtime-api-keys", f.key, map[string]any{"name": "x"}},
		{"/analytics-apis", f.api, map[string]any{"name": "x"}},
		{"/analytics-bindings", f.binding, nil},
		{"/client-cas", f.ca, nil},
	} {
		t.Run(c.coll, func(t *testing.T) {
			prefix := c.id[:strings.Index(c.id, "_")+1]
			h.run(t, scenario{method: "GET", url: mg + c.coll + "/" + prefix + "01M7Z4W2F0RJ1J0S0V8N3H4K2D", auth: all, status: 404, contains: []string{`"code":"not_found"`}})
			if c.update == nil {
				return
			}
			before := h.do("GET", mg+c.coll+"/"+c.id, all, nil)
			r := h.do("PUT", mg+c.coll+"/"+c.id, all, c.update, "If-Match", `"99"`)
			if r.status != 412 || r.env.Code != "precondition_failed" {
				t.Fatalf("stale If-Match: %d %s", r.status, r.body)
			}
			if after := h.do("GET", mg+c.coll+"/"+c.id, all, nil); after.body != before.body {
				t.Fatal("a 412 changed the resource")
			}
			r = h.do("PUT", mg+c.coll+"/"+c.id, all, c.update, "If-Match", before.header.Get("ETag"))
			if r.status != 200 {
				t.Fatalf("current If-Match: %d %s", r.status, r.body)
			}
		})
	}
	for _, path := range []string{"/ingest-clients/" + f.ingest + "/authentication", "/query-clients/" + f.query + "/authentication"} {
		if r := h.do("PUT", mg+path, all, map[string]any{"methods": []string{"api_key"}}, "If-Match", `"99"`); r.status != 412 {
			t.Fatalf("%s stale If-Match: %d", path, r.status)
		}
	}
}

func TestProjectIDFromQueryOnCreate(t *testing.T) {
	h, w, all, _ := newResourceHarness(t)
	mg := "/management/v1/models"
	h.run(t, scenario{method: "POST", url: mg + "?project_id=" + w.p1.ID, auth: all, body: map[string]any{"key": "from_query"}, status: 201, contains: []string{`"project_id":"` + w.p1.ID}})
	h.run(t, scenario{method: "POST", url: mg + "?project_id=" + w.p2.ID, auth: all, body: map[string]any{"key": "x", "project_id": w.p1.ID}, status: 400, contains: []string{`"field":"project_id"`}})
	h.run(t, scenario{method: "POST", url: mg + "?project_id=" + w.p1.ID, auth: all, body: map[string]any{"key": "x", "project_id": 7}, status: 400})
}

// TestHiddenIsNotFound: for every kind of resource, an id the caller may not see (another
// workspace's, outside the token's allowlist, a restricted project's for a member, any
// project's for a stranger) answers exactly what an id that does not exist answers: the
// same status and the same bytes, so ids cannot be probed across workspaces.
func TestHiddenIsNotFound(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	strangerAll, _, err := auth.CreateToken(h.st, w.stranger.ID, auth.TokenRequest{Name: "s", WorkspaceID: w.otherWS.ID, Scopes: auth.AllScopes()})
	if err != nil {
		t.Fatal(err)
	}
	foreign := h.fixtures(w, bearer(strangerAll), w.foreign.ID)
	secret := h.fixtures(w, all, w.restricted.ID)
	foreignSession := h.created(bearer(w.strangerSes), "/api/v1/discovery-sessions", map[string]any{"ingest_client_id": foreign.ingest, "model_key": "signups"})
	ownSession := h.created(bearer(w.ownerSes), "/api/v1/discovery-sessions", map[string]any{"ingest_client_id": f.ingest, "model_key": "signups"})
	secretSession := h.created(bearer(w.ownerSes), "/api/v1/discovery-sessions", map[string]any{"ingest_client_id": secret.ingest, "model_key": "signups"})

	type kind struct {
		coll                   string
		foreign, own, secretID string
		put                    any
		del                    bool
		actions                []string
		console                bool // console-only routes
	}
	kinds := []kind{
		{coll: "/projects", foreign: w.foreign.ID, own: w.p1.ID, secretID: w.restricted.ID, put: map[string]any{"description": "x"}},
		{coll: "/models", foreign: foreign.model, own: f.model, secretID: secret.model, put: map[string]any{"description": "x"}, del: true},
		{coll: "/warehouses", foreign: foreign.warehouse, own: f.warehouse, secretID: secret.warehouse},
		{coll: "/warehouse-credentials", foreign: foreign.credential, own: f.credential, secretID: secret.credential, put: map[string]any{"name": "x"}},
		{coll: "/ingest-clients", foreign: foreign.ingest, own: f.ingest, secretID: secret.ingest, put: map[string]any{"name": "x"}, del: true, actions: []string{"/authentication"}},
		{coll: "/query-clients", foreign: foreign.query, own: f.query, secretID: secret.query, put: map[string]any{"name": "x"}, del: true, actions: []string{"/authentication"}},
		{coll: "/runtime-api-keys", foreign: foreign.key, own: f.key, secretID: secret.key, put: map[string]any{"name": "x"}, del: true},
		{coll: "/analytics-apis", foreign: foreign.api, own: f.api, secretID: secret.api, put: map[string]any{"name": "x"}, del: true},
		{coll: "/analytics-bindings", foreign: foreign.binding, own: f.binding, secretID: secret.binding, actions: []string{"/promote"}},
		{coll: "/client-cas", foreign: foreign.ca, own: f.ca, secretID: secret.ca, del: true},
		{coll: "/discovery-sessions", foreign: foreignSession, own: ownSession, secretID: secretSession, actions: []string{"/accept", "/discard"}, console: true},
	}
	type caller struct {
		name, authz, root string
		hidden            func(k kind) string // the id this caller may not see
	}
	callers := []caller{
		{"other workspace token", all, "/management/v1", func(k kind) string { return k.foreign }},
		{"other workspace session", bearer(w.ownerSes), "/api/v1", func(k kind) string { return k.foreign }},
		{"outside the allowlist", h.token(w, auth.AllScopes(), w.p2.ID), "/management/v1", func(k kind) string { return k.own }},
		{"stranger session", bearer(w.strangerSes), "/api/v1", func(k kind) string { return k.own }},
		{"member on a restricted project", bearer(w.memberSes), "/api/v1", func(k kind) string { return k.secretID }},
	}
	unknown := func(id string) string { return id[:strings.Index(id, "_")+1] + "01M7Z4W2F0RJ1J0S0V8N3H4K2D" }
	for _, c := range callers {
		for _, k := range kinds {
			if k.console && c.root != "/api/v1" {
				continue
			}
			type req struct {
				method, suffix string
				body           any
			}
			reqs := []req{{"GET", "", nil}}
			if k.put != nil {
				reqs = append(reqs, req{"PUT", "", k.put})
			}
			if k.del {
				reqs = append(reqs, req{"DELETE", "", nil})
			}
			for _, a := range k.actions {
				if a == "/authentication" {
					reqs = append(reqs, req{"PUT", a, map[string]any{"methods": []string{"api_key"}}})
				} else {
					reqs = append(reqs, req{"POST", a, nil})
				}
			}
			if k.coll == "/ingest-clients" && c.root == "/api/v1" {
				reqs = append(reqs, req{"GET", "/openapi.json", nil})
			}
			hidden := c.hidden(k)
			for _, rq := range reqs {
				t.Run(fmt.Sprintf("%s/%s %s%s", c.name, rq.method, k.coll, rq.suffix), func(t *testing.T) {
					got := h.do(rq.method, c.root+k.coll+"/"+hidden+rq.suffix, c.authz, rq.body)
					want := h.do(rq.method, c.root+k.coll+"/"+unknown(hidden)+rq.suffix, c.authz, rq.body)
					if got.status != 404 || got.status != want.status || got.body != want.body {
						t.Fatalf("hidden id: %d %s\nunknown id: %d %s", got.status, got.body, want.status, want.body)
					}
				})
			}
		}
		// Collections name their project in the query or the body.
		hiddenProject := map[string]string{"other workspace token": w.foreign.ID, "other workspace session": w.foreign.ID,
			"outside the allowlist": w.p1.ID, "stranger session": w.p1.ID, "member on a restricted project": w.restricted.ID}[c.name]
		for _, rq := range []struct {
			method, path string
			body         func(pid string) any
		}{
			{"GET", "/models?project_id=", nil},
			{"POST", "/models", func(pid string) any { return map[string]any{"project_id": pid, "key": "probe"} }},
			{"GET", "/projects/{id}/members", nil},
		} {
			if rq.path == "/projects/{id}/members" && c.root != "/api/v1" {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s %s", c.name, rq.method, rq.path), func(t *testing.T) {
				send := func(pid string) *response {
					var body any
					if rq.body != nil {
						body = rq.body(pid)
					}
					path := strings.Replace(rq.path, "{id}", pid, 1)
					if strings.HasSuffix(path, "=") {
						path += pid
					}
					return h.do(rq.method, c.root+path, c.authz, body)
				}
				got, want := send(hiddenProject), send(unknown(hiddenProject))
				if got.status != 404 || got.status != want.status || got.body != want.body {
					t.Fatalf("hidden project: %d %s\nunknown project: %d %s", got.status, got.body, want.status, want.body)
				}
			})
		}
	}
	// Workspaces: another workspace's id and an unknown one answer alike.
	for _, path := range []string{"/api/v1/workspaces/{id}/members", "/api/v1/projects?workspace_id={id}"} {
		got := h.do("GET", strings.Replace(path, "{id}", w.otherWS.ID, 1), bearer(w.ownerSes), nil)
		want := h.do("GET", strings.Replace(path, "{id}", unknown(w.otherWS.ID), 1), bearer(w.ownerSes), nil)
		if got.status != 404 || got.body != want.body {
			t.Fatalf("%s: hidden %d %s, unknown %d %s", path, got.status, got.body, want.status, want.body)
		}
	}
	// Opening a discovery session for a client one may not see is the unknown-client 400.
	got := h.do("POST", "/api/v1/discovery-sessions", bearer(w.ownerSes), map[string]any{"ingest_client_id": foreign.ingest, "model_key": "x"})
	want := h.do("POST", "/api/v1/discovery-sessions", bearer(w.ownerSes), map[string]any{"ingest_client_id": unknown(foreign.ingest), "model_key": "x"})
	if got.status != want.status || got.body != want.body {
		t.Fatalf("discovery open: hidden %d %s, unknown %d %s", got.status, got.body, want.status, want.body)
	}
	// Scope and role failures on what the caller can see stay 403.
	h.run(t, scenario{method: "PUT", url: "/api/v1/models/" + f.model, auth: bearer(w.memberSes), body: map[string]any{"description": "x"}, status: 403})
	h.run(t, scenario{method: "GET", url: "/management/v1/models/" + foreign.model, auth: h.token(w, []string{"security:read"}), status: 403})
}

// TestNamesAndBodiesAreClean: a body that repeats a key (at any depth) and a name with a
// control character are 400s that name the field and change nothing; descriptions may
// hold line breaks and tabs but no other control character.
func TestNamesAndBodiesAreClean(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	p := w.p1.ID
	mg := "/management/v1"
	owner := bearer(w.ownerSes)
	type create struct {
		url, authz string
		body       func(name string) map[string]any
	}
	creates := []create{
		{mg + "/projects", all, func(n string) map[string]any { return map[string]any{"workspace_id": w.ws.ID, "name": n} }},
		{mg + "/models", all, func(n string) map[string]any { return map[string]any{"project_id": p, "key": "named", "name": n} }},
		{mg + "/warehouses", all, func(n string) map[string]any {
			return map[string]any{"project_id": p, "name": n, "type": "postgres", "config": map[string]any{"host": "h", "database": "d"}, "credential_id": f.credential}
		}},
		{mg + "/warehouse-credentials", all, func(n string) map[string]any {
			return map[string]any{"project_id": p, "name": n, "type": "token", "secret": "abcdefgh"}
		}},
		{mg + "/ingest-clients", all, func(n string) map[string]any { return map[string]any{"project_id": p, "name": n} }},
		{mg + "/query-clients", all, func(n string) map[string]any { return map[string]any{"project_id": p, "name": n} }},
		{mg + "/runtime-api-keys", all, func(n string) map[string]any {
			return map[string]any{"project_id": p, "name": n, "kind": "ingest", "client_id": f.ingest}
		}},
		{mg + "/analytics-apis", all, func(n string) map[string]any {
			return map[string]any{"project_id": p, "key": "named", "name": n, "model_key": "orders", "query": map[string]any{}}
		}},
		{mg + "/client-cas", all, func(n string) map[string]any {
			return map[string]any{"project_id": p, "name": n, "certificate_pem": f.caPEM}
		}},
		{"/api/v1/workspaces", owner, func(n string) map[string]any { return map[string]any{"name": n} }},
		{"/api/v1/workspaces/" + w.ws.ID + "/members", owner, func(n string) map[string]any {
			return map[string]any{"email": "named@example.com", "name": n, "password": "correct horse battery", "role": "member"}
		}},
		{"/api/v1/management-tokens", owner, func(n string) map[string]any {
			return map[string]any{"name": n, "workspace_id": w.ws.ID, "scopes": []string{"models:read"}}
		}},
	}
	models := func() string { return h.do("GET", mg+"/models?project_id="+p, all, nil).body }
	before := models()
	for _, c := range creates {
		for _, bad := range []string{"a\x00b", "tab\there", "line\nbreak", "esc\x1b[31m", "del\x7f", "c1\u0085inside"} {
			t.Run(c.url+" "+strings.TrimSpace(fmt.Sprintf("%q", bad)), func(t *testing.T) {
				h.run(t, scenario{method: "POST", url: c.url, auth: c.authz, body: c.body(bad), status: 400, contains: []string{`"field":"name"`, "control characters"}})
			})
		}
	}
	for _, sc := range []scenario{
		{name: "duplicate top-level key", method: "POST", url: mg + "/projects", auth: all, body: `{"workspace_id":"` + w.ws.ID + `","name":"a","name":"b"}`, status: 400, contains: []string{`"code":"invalid_json"`, `"field":"name"`, "appears twice"}},
		{name: "duplicate access key", method: "POST", url: mg + "/models", auth: all, body: `{"project_id":"` + p + `","key":"k","project_id":"` + w.p2.ID + `"}`, status: 400, contains: []string{`"field":"project_id"`}},
		{name: "duplicate nested key", method: "POST", url: mg + "/models", auth: all, body: `{"project_id":"` + p + `","key":"k","fields":[{"name":"a","type":"string"},{"name":"b","type":"string","type":"integer"}]}`, status: 400, contains: []string{`"field":"fields[1].type"`}},
		{name: "duplicate escaped key", method: "PUT", url: mg + "/models/" + f.model, auth: all, body: `{"description":"a","descr\u0069ption":"b"}`, status: 400, contains: []string{`"field":"description"`}},
		{name: "duplicate on the console", method: "POST", url: "/api/v1/workspaces", auth: owner, body: `{"name":"a","name":"b"}`, status: 400, contains: []string{`"field":"name"`}},
		{name: "description with a carriage return", method: "PUT", url: mg + "/models/" + f.model, auth: all, body: map[string]any{"description": "a\rb"}, status: 400, contains: []string{`"field":"description"`}},
		{name: "description with an escape", method: "PUT", url: mg + "/projects/" + p, auth: all, body: map[string]any{"description": "\x1b[2J"}, status: 400, contains: []string{`"field":"description"`}},
		{name: "field description with a bell", method: "PUT", url: mg + "/analytics-apis/" + f.api, auth: all, body: map[string]any{"description": "ding\a"}, status: 400, contains: []string{`"field":"description"`}},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	if after := models(); after != before {
		t.Fatalf("refused requests changed the models:\n%s\n%s", before, after)
	}
	// Surrounding white space is trimmed from names, a trailing newline included.
	h.run(t, scenario{method: "POST", url: mg + "/ingest-clients", auth: all, body: map[string]any{"project_id": p, "name": " web\n"}, status: 201, contains: []string{`"name":"web"`}})
	// Line breaks and tabs are fine in descriptions; any printable text is fine in names.
	h.run(t, scenario{method: "PUT", url: mg + "/models/" + f.model, auth: all, body: map[string]any{"name": "Orders — ünïcode ✓", "description": "line one\nline two\tindented"}, status: 200})
}
