package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"lookout/internal/testsrv"
)

// TestExternalWarehouseEndToEnd drives the real binary with a model on PostgreSQL: an
// Analytics API reads through whichever binding is promoted (embedded, then the engine),
// the console's stats show the shipping, and an engine that stays down makes ingest
// answer 503 with Retry-After once --sink-max-lag records wait, until it is back.
func TestExternalWarehouseEndToEnd(t *testing.T) {
	pg := testsrv.Postgres(t)
	dir := filepath.Join(t.TempDir(), "data")
	token, ws := bootstrap(t, dir)
	p := startServe(t, append(freeArgs(dir), "--sink-max-lag", "120")...)
	defer p.stop(t)
	c := client{t: t, base: p.base, auth: token}
	mk := c.create
	pid := mk("/projects", map[string]any{"workspace_id": ws, "name": "ext"})["id"].(string)
	cred := mk("/warehouse-credentials", map[string]any{"project_id": pid, "name": "pg", "type": "password", "username": pg.User, "secret": pg.Password})["id"].(string)
	wh := mk("/warehouses", map[string]any{"project_id": pid, "name": "pg", "type": "postgres", "credential_id": cred,
		"config": map[string]any{"host": "127.0.0.1", "port": pg.Port, "database": pg.Database, "sslmode": "disable"}})["id"].(string)
	st, env := c.do("GET", "/management/v1/warehouses?project_id="+pid, nil)
	embedded := ""
	for _, w := range env["data"].([]any) {
		if w := w.(map[string]any); w["type"] == "embedded" {
			embedded = w["id"].(string)
		}
	}
	if st != 200 || embedded == "" {
		t.Fatalf("no embedded warehouse: %d %v", st, env)
	}
	mk("/models", map[string]any{"project_id": pid, "key": "events", "fields": benchFields, "timestamp_field": "at", "warehouse_id": wh})
	ic := mk("/ingest-clients", map[string]any{"project_id": pid, "name": "c", "models": []string{"events"}})["id"].(string)
	key := mk("/runtime-api-keys", map[string]any{"project_id": pid, "name": "k", "kind": "ingest", "client_id": ic})["key"].(string)
	api := mk("/analytics-apis", map[string]any{"project_id": pid, "key": "by_country", "name": "by country", "model_key": "events",
		"query": map[string]any{"group_by": []string{"country"}, "aggregations": []any{map[string]any{"fn": "count", "as": "n"}}}})["id"].(string)
	local := mk("/analytics-bindings", map[string]any{"project_id": pid, "analytics_api_id": api, "warehouse_id": embedded})["id"].(string)
	remote := mk("/analytics-bindings", map[string]any{"project_id": pid, "analytics_api_id": api, "warehouse_id": wh})["id"].(string)
	qc := mk("/query-clients", map[string]any{"project_id": pid, "name": "q", "analytics_apis": []string{"by_country"}, "adhoc_models": []string{"events"}})["id"].(string)
	qkey := mk("/runtime-api-keys", map[string]any{"project_id": pid, "name": "qk", "kind": "query", "client_id": qc})["key"].(string)

	ingestURL := listenerURL(t, p, "ingest")
	send := func(from, n int) *http.Response {
		req, _ := http.NewRequest("POST", ingestURL+"/ingest?schema=events", bytes.NewReader(benchBodyFrom(from, n)))
		req.Header.Set("Authorization", "ApiKey "+key)
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := send(0, 60); r.StatusCode != 202 {
		t.Fatalf("ingest into a PostgreSQL model: %s", r.Status)
	}
	waitSinkCaughtUp(t, p.base)

	total := func() float64 {
		n := 0.0
		for _, r := range queryRows(t, p, qkey, `{"api":"by_country"}`) {
			n += r["n"].(float64)
		}
		return n
	}
	for _, step := range []struct {
		binding string
		want    float64
	}{{local, 0}, {remote, 60}, {local, 0}} {
		if st, env := c.do("POST", "/management/v1/analytics-bindings/"+step.binding+"/promote", nil); st != 200 {
			t.Fatalf("promote: %d %v", st, env)
		}
		if got := total(); got != step.want {
			t.Fatalf("through binding %s the API counts %v records, want %v", step.binding, got, step.want)
		}
	}
	if rows := queryRows(t, p, qkey, `{"schema":"events","aggregations":[{"fn":"count","as":"n"}]}`); rows[0]["n"].(float64) != 60 {
		t.Fatalf("an ad-hoc query on the model counts %v, want 60 (from PostgreSQL)", rows[0]["n"])
	}

	anon := client{t: t, base: p.base}
	st, env = anon.do("POST", "/api/v1/auth/login", map[string]any{"email": "ops@example.com", "password": "s3cret-password"})
	if st != 200 {
		t.Fatalf("login: %d %v", st, env)
	}
	console := client{t: t, base: p.base, auth: field(env, "data", "token")}
	st, env = console.do("GET", "/api/v1/projects/"+pid+"/stats", nil)
	models, _ := env["data"].(map[string]any)["models"].([]any)
	if st != 200 || len(models) != 1 {
		t.Fatalf("stats: %d %v", st, env)
	}
	sink, _ := models[0].(map[string]any)["sink"].(map[string]any)
	if sink == nil || sink["lag_records"] != 0.0 || sink["shipped_records"] != 60.0 || sink["warehouse_id"] != wh {
		t.Fatalf("stats' sink line: %v", models[0])
	}

	// The engine goes away: ingest keeps acknowledging until 120 records wait, then 503.
	pg.Stop(t)
	var refused *http.Response
	for i := 0; i < 10 && refused == nil; i++ {
		if r := send(1000+50*i, 50); r.StatusCode == 503 {
			refused = r
		} else if r.StatusCode != 202 {
			t.Fatalf("ingest while the engine is down: %s", r.Status)
		}
	}
	if refused == nil || refused.Header.Get("Retry-After") != "10" {
		t.Fatalf("no 503 with Retry-After past --sink-max-lag: %v", refused)
	}
	pg.Start(t)
	waitSinkCaughtUp(t, p.base)
	if r := send(5000, 10); r.StatusCode != 202 {
		t.Fatalf("ingest once the engine is back: %s", r.Status)
	}
	waitSinkCaughtUp(t, p.base)
	rows := queryRows(t, p, qkey, `{"schema":"events","aggregations":[{"fn":"count","as":"n"},{"fn":"count_distinct","field":"event_id","as":"ids"}]}`)
	if rows[0]["n"] != rows[0]["ids"] || rows[0]["n"].(float64) != 60+150+10 {
		t.Fatalf("after the outage: %v records, %v distinct; want 220 of each", rows[0]["n"], rows[0]["ids"])
	}
	// Going back: the model's data path moves to the embedded warehouse again; new records
	// land there and the embedded binding reads them.
	st, env = c.do("GET", "/management/v1/models?project_id="+pid, nil)
	modelID := env["data"].([]any)[0].(map[string]any)["id"].(string)
	if st, env := c.do("PUT", "/management/v1/models/"+modelID, map[string]any{"warehouse_id": embedded}); st != 200 {
		t.Fatalf("move the model back: %d %v", st, env)
	}
	if r := send(9000, 5); r.StatusCode != 202 {
		t.Fatalf("ingest after moving back: %s", r.Status)
	}
	if st, env := c.do("POST", "/management/v1/analytics-bindings/"+local+"/promote", nil); st != 200 {
		t.Fatalf("promote: %d %v", st, env)
	}
	if got := total(); got != 5 {
		t.Fatalf("the embedded binding counts %v after moving back, want the 5 new records", got)
	}
	if out := p.logs(); strings.Contains(out, pg.Password) {
		t.Fatalf("the server's log shows the engine's password")
	}
}
