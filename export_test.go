package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestExportCommand: `lookout export` writes the same records online (through the admin
// socket while serve runs) and offline (from the files), as NDJSON and as Parquet that the
// library reads back, and refuses an unknown model.
func TestExportCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	token, ws := bootstrap(t, dir)
	p := startServe(t, freeArgs(dir)...)
	c := client{t: t, base: p.base, auth: token}
	pid := c.create("/projects", map[string]any{"workspace_id": ws, "name": "export"})["id"].(string)
	c.create("/models", map[string]any{"project_id": pid, "key": "orders", "fields": []map[string]any{
		{"name": "id", "type": "string"}, {"name": "amount", "type": "number"}, {"name": "paid", "type": "boolean"}}})
	ic := c.create("/ingest-clients", map[string]any{"project_id": pid, "name": "c", "models": []string{"orders"}})["id"].(string)
	key := c.create("/runtime-api-keys", map[string]any{"project_id": pid, "name": "k", "kind": "ingest", "client_id": ic})["key"].(string)
	var body bytes.Buffer
	for i := range 50 {
		fmt.Fprintf(&body, `{"id":"o-%d","amount":%d.5,"paid":%t}`+"\n", i, i, i%2 == 0)
	}
	postNDJSON(t, p, key, "orders", body.Bytes())

	args := []string{"export", "--data-dir", dir, "--project", pid, "--model", "orders"}
	online := run(t, "", false, args...)
	if n := strings.Count(online, "\n"); n != 50 || !strings.Contains(online, `{"id":"o-7","amount":7.5,"paid":false,"_received_at":"`) {
		t.Fatalf("online export: %d lines: %.300s", n, online)
	}
	pq := filepath.Join(t.TempDir(), "orders.parquet")
	run(t, "", false, append(args, "--format", "parquet", "--out", pq)...)
	checkParquet(t, pq, 50)
	out := run(t, "", true, "export", "--data-dir", dir, "--project", pid, "--model", "nope")
	if !strings.Contains(out, "not found") {
		t.Fatalf("unknown model: %s", out)
	}

	p.stop(t)
	if offline := run(t, "", false, args...); offline != online {
		t.Fatalf("offline export differs from online:\n%.300s\n%.300s", offline, online)
	}
	pq2 := filepath.Join(t.TempDir(), "orders2.parquet")
	run(t, "", false, append(args, "--format", "parquet", "--out", pq2, "--to", "2000-01-01T00:00:00Z")...)
	checkParquet(t, pq2, 0)
	if entries, _ := os.ReadDir(filepath.Dir(pq2)); len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

func checkParquet(t *testing.T, path string, rows int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil || pf.NumRows() != rows {
		t.Fatalf("%s: %v rows, %v", path, pf, err)
	}
	names := []string{}
	for _, c := range pf.Schema().Fields() {
		names = append(names, c.Name())
	}
	if strings.Join(names, ",") != "_client_id,_ingest_id,_received_at,amount,id,paid" {
		t.Fatalf("columns %v", names)
	}
}

// postNDJSON ingests NDJSON into a model of a running server and fails the test unless
// every record is acknowledged (202).
func postNDJSON(t *testing.T, p *proc, key, schema string, body []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", listenerURL(t, p, "ingest")+"/ingest?schema="+schema, bytes.NewReader(body))
	req.Header.Set("Authorization", "ApiKey "+key)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("ingest: %v %v", resp, err)
	}
	resp.Body.Close()
}
