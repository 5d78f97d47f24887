package main

import (
	"io"
	"lookout/internal/testsrv"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResourcesReadBackAfterRestart creates one of every Management resource through the
// real binary, reads them all, kills the process with SIGKILL, starts it again and checks
// every read answers byte for byte as before.
func TestResourcesReadBackAfterRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	token, ws := bootstrap(t, dir)
	certFile, _, _, _ := writeCert(t, t.TempDir(), "ca")
	caPEM, _ := os.ReadFile(certFile)
	p := startServe(t, freeArgs(dir)...)
	c := client{t: t, base: p.base, auth: token}
	mk := func(path string, body map[string]any) string {
		st, env := c.do("POST", "/management/v1"+path, body)
		if st != 201 {
			t.Fatalf("POST %s: %d %v", path, st, env)
		}
		return field(env, "data", "id")
	}
	pid := mk("/projects", map[string]any{"workspace_id": ws, "name": "Restart"})
	model := mk("/models", map[string]any{"project_id": pid, "key": "events", "fields": []map[string]any{{"name": "kind", "type": "string", "required": true}, {"name": "n", "type": "integer"}}})
	// An external warehouse is connected to when created: a real PostgreSQL on loopback.
	pg := testsrv.Postgres(t)
	cred := mk("/warehouse-credentials", map[string]any{"project_id": pid, "name": "pg", "type": "password", "username": pg.User, "secret": pg.Password})
	wh := mk("/warehouses", map[string]any{"project_id": pid, "name": "pg", "type": "postgres", "config": map[string]any{"host": "127.0.0.1", "port": pg.Port, "database": pg.Database, "sslmode": "disable"}, "credential_id": cred})
	ca := mk("/client-cas", map[string]any{"project_id": pid, "name": "ca", "certificate_pem": string(caPEM)})
	ic := mk("/ingest-clients", map[string]any{"project_id": pid, "name": "in", "models": []string{"events"}})
	if st, env := c.do("PUT", "/management/v1/ingest-clients/"+ic+"/authentication", map[string]any{"methods": []string{"api_key", "mtls", "jwt"},
		"mtls": map[string]any{"client_ca_ids": []string{ca}}, "jwt": map[string]any{"algorithms": []string{"HS256"}, "hs256_secret": "0123456789abcdef0123456789abcdef"}}); st != 200 {
		t.Fatalf("authentication: %d %v", st, env)
	}
	api := mk("/analytics-apis", map[string]any{"project_id": pid, "key": "by_kind", "model_key": "events", "query": map[string]any{"group_by": []string{"kind"}, "aggregations": []map[string]any{{"fn": "count"}}}})
	qc := mk("/query-clients", map[string]any{"project_id": pid, "name": "q", "models": []string{"events"}, "analytics_apis": []string{"by_kind"}})
	key := mk("/runtime-api-keys", map[string]any{"project_id": pid, "name": "k", "kind": "query", "client_id": qc, "models": []string{"events"}})
	bind := mk("/analytics-bindings", map[string]any{"project_id": pid, "analytics_api_id": api, "warehouse_id": wh})
	reads := []string{"/projects/" + pid, "/projects?workspace_id=" + ws}
	for _, r := range []struct{ coll, id string }{
		{"/models", model}, {"/warehouse-credentials", cred}, {"/warehouses", wh}, {"/client-cas", ca},
		{"/ingest-clients", ic}, {"/query-clients", qc}, {"/analytics-apis", api}, {"/runtime-api-keys", key},
		{"/analytics-bindings", bind},
	} {
		reads = append(reads, r.coll+"/"+r.id, r.coll+"?project_id="+pid)
	}
	get := func(base string) map[string]string {
		out := map[string]string{}
		for _, path := range reads {
			req, _ := http.NewRequest("GET", base+"/management/v1"+path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
			}
			out[path] = resp.Header.Get("ETag") + " " + string(b)
		}
		return out
	}
	before := get(p.base)
	p.cmd.Process.Kill()
	<-p.exited
	p2 := startServe(t, freeArgs(dir)...)
	after := get(p2.base)
	for path, b := range before {
		if after[path] != b {
			t.Errorf("%s changed across the restart:\nbefore %s\nafter  %s", path, b, after[path])
		}
	}
	if !strings.Contains(before["/models?project_id="+pid], model) || len(before) != len(reads) {
		t.Fatalf("reads before the restart are incomplete: %v", before)
	}
	if out := run(t, "", false, "check", "--data-dir", dir); out != "ok\n" {
		t.Fatalf("check: %q", out)
	}
}
