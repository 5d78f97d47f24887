package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lookout/internal/testsrv"
)

// TestSinkSurvivesSIGKILL: a model whose warehouse is PostgreSQL or ClickHouse takes a
// stream of NDJSON while the sink ships it; the server is SIGKILLed at random moments
// (mid-ingest and mid-batch of the sink) four times. After the last restart the sink
// catches up, and a query through Lookout sees every acknowledged record exactly once.
func TestSinkSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the server 4 times per engine")
	}
	engines := []struct {
		name   string
		start  func(t *testing.T) *testsrv.Server
		config func(s *testsrv.Server) map[string]any
	}{
		{"postgres", func(t *testing.T) *testsrv.Server { return testsrv.Postgres(t) }, func(s *testsrv.Server) map[string]any {
			return map[string]any{"host": "127.0.0.1", "port": s.Port, "database": s.Database, "sslmode": "disable"}
		}},
		{"clickhouse", func(t *testing.T) *testsrv.Server { return testsrv.ClickHouse(t) }, func(s *testsrv.Server) map[string]any {
			return map[string]any{"url": s.URL(), "database": s.Database}
		}},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			srv := e.start(t)
			dir := filepath.Join(t.TempDir(), "data")
			token, ws := bootstrap(t, dir)
			p := startServe(t, freeArgs(dir)...)
			c := client{t: t, base: p.base, auth: token}
			mk := c.create
			pid := mk("/projects", map[string]any{"workspace_id": ws, "name": "sink"})["id"].(string)
			cred := mk("/warehouse-credentials", map[string]any{"project_id": pid, "name": "engine", "type": "password", "username": srv.User, "secret": srv.Password})["id"].(string)
			wh := mk("/warehouses", map[string]any{"project_id": pid, "name": e.name, "type": e.name, "config": e.config(srv), "credential_id": cred})["id"].(string)
			mk("/models", map[string]any{"project_id": pid, "key": "events", "fields": benchFields, "warehouse_id": wh})
			ic := mk("/ingest-clients", map[string]any{"project_id": pid, "name": "c", "models": []string{"events"}})["id"].(string)
			key := mk("/runtime-api-keys", map[string]any{"project_id": pid, "name": "k", "kind": "ingest", "client_id": ic})["key"].(string)
			qc := mk("/query-clients", map[string]any{"project_id": pid, "name": "q", "adhoc_models": []string{"events"}})["id"].(string)
			qkey := mk("/runtime-api-keys", map[string]any{"project_id": pid, "name": "qk", "kind": "query", "client_id": qc})["key"].(string)

			acked := map[string]bool{}
			for round := 0; round < 4; round++ {
				if round > 0 {
					p = startServe(t, freeArgs(dir)...)
				}
				streamUntilKilled(t, p, key, 50, 2+rand.IntN(8), func(g, n, i int) (string, string) {
					id := fmt.Sprintf("r%d-g%d-b%04d-%02d", round, g, n, i)
					return id, fmt.Sprintf(`{"event_id":"%s","user_id":"u%d","kind":"view","amount":%d.5,"items":%d,"logged_in":true,"at":"2026-11-21T12:00:00Z"}`, id, i, i, i)
				}, func(lines map[string]string) {
					for id := range lines {
						acked[id] = true
					}
				})
			}
			p = startServe(t, freeArgs(dir)...)
			defer p.stop(t)
			waitSinkCaughtUp(t, p.base)

			rows := queryRows(t, p, qkey, `{"schema":"events","aggregations":[{"fn":"count","as":"n"},{"fn":"count_distinct","field":"event_id","as":"ids"}]}`)
			total, distinct := rows[0]["n"].(float64), rows[0]["ids"].(float64)
			if total != distinct {
				t.Fatalf("%v records but %v distinct event ids: a record is there twice", total, distinct)
			}
			ids := queryRows(t, p, qkey, `{"schema":"events","select":["event_id"],"limit":10000}`)
			if float64(len(ids)) != total {
				t.Fatalf("select gave %d rows, count %v", len(ids), total)
			}
			seen := map[string]bool{}
			for _, r := range ids {
				seen[r["event_id"].(string)] = true
			}
			missing := 0
			for id := range acked {
				if !seen[id] {
					missing++
				}
			}
			if missing > 0 || len(acked) == 0 {
				t.Fatalf("%d of %d acknowledged records are missing from %s", missing, len(acked), e.name)
			}
			t.Logf("%s: %d acknowledged, %v stored once each", e.name, len(acked), total)
		})
	}
}

// waitSinkCaughtUp polls /metrics until every lookout_sink_lag_records series is 0 (and
// at least one exists).
func waitSinkCaughtUp(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		series, behind := 0, 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "lookout_sink_lag_records{") {
				series++
				if !strings.HasSuffix(l, " 0") {
					behind++
				}
			}
		}
		resp.Body.Close()
		if series > 0 && behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink did not catch up in 2 minutes (%d series, %d behind)", series, behind)
		}
		time.Sleep(50 * time.Millisecond) // polling the server's background sink
	}
}
