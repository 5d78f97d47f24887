package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"lookout/warehouse"
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
	// Read back with the same library, the Parquet file holds what the query runtime
	// answers for every field: the same rows, in the same (receive) order, the same values.
	qc := c.create("/query-clients", map[string]any{"project_id": pid, "name": "q", "adhoc_models": []string{"orders"}})["id"].(string)
	qkey := c.create("/runtime-api-keys", map[string]any{"project_id": pid, "name": "qk", "kind": "query", "client_id": qc})["key"].(string)
	queried := queryRows(t, p, qkey, `{"schema":"orders","select":["id","amount","paid","_received_at","_client_id","_ingest_id"],"limit":1000}`)
	exported := parquetRows(t, pq)
	if len(exported) != len(queried) || len(queried) != 50 {
		t.Fatalf("the Parquet file has %d rows, the query answers %d", len(exported), len(queried))
	}
	for i := range queried {
		q, _ := json.Marshal(queried[i])
		e, _ := json.Marshal(exported[i])
		if !bytes.Equal(q, e) {
			t.Fatalf("row %d:\nparquet %s\n  query %s", i, e, q)
		}
	}
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

// queryRows runs a query through the query listener and returns its rows, each as a map
// from column name to the value as the query answers it.
func queryRows(t *testing.T, p *proc, key, body string) []map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", listenerURL(t, p, "query")+"/query", strings.NewReader(body))
	req.Header.Set("Authorization", "ApiKey "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			Columns []struct{ Name string }
			Rows    [][]any
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != 200 {
		t.Fatalf("query %s: %d %v", body, resp.StatusCode, err)
	}
	var rows []map[string]any
	for _, r := range env.Data.Rows {
		m := map[string]any{}
		for i, c := range env.Data.Columns {
			m[c.Name] = r[i]
		}
		rows = append(rows, m)
	}
	return rows
}

// parquetRows reads a Parquet file with parquet-go, each row as a map from column name to
// the value in the query runtime's form (timestamps as RFC 3339 in UTC, nulls as nil).
func parquetRows(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	fields := pf.Schema().Fields()
	r := parquet.NewReader(f)
	defer r.Close()
	var out []map[string]any
	buf := make([]parquet.Row, 16)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			m := map[string]any{}
			for _, v := range row {
				fl := fields[v.Column()]
				var x any
				isTime := false // µs, as exported
				if lt := fl.Type().LogicalType(); lt != nil {
					_, isTime = lt.Value.(*format.TimestampType)
				}
				switch {
				case v.IsNull():
				case isTime:
					x = warehouse.FormatTimestamp(v.Int64())
				case v.Kind() == parquet.ByteArray:
					x = v.String()
				case v.Kind() == parquet.Double:
					x = v.Double()
				case v.Kind() == parquet.Boolean:
					x = v.Boolean()
				default:
					x = v.Int64()
				}
				m[fl.Name()] = x
			}
			out = append(out, m)
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
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
