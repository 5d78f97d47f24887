package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lookout/store"
	"lookout/warehouse"
)

// TestIngestSurvivesSIGKILL streams NDJSON at full speed while the server is killed with
// SIGKILL at random moments (after a random number of acknowledged batches, so the kill
// lands mid-stream whatever the machine's speed), 20 times. After every restart, each record that was
// acknowledged (202) is stored exactly once and byte for byte as sent.
func TestIngestSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the server 20 times")
	}
	dir := filepath.Join(t.TempDir(), "data")
	token, ws := bootstrap(t, dir)
	p := startServe(t, freeArgs(dir)...)
	c := client{t: t, base: p.base, auth: token}
	mk := c.create
	pid := mk("/projects", map[string]any{"workspace_id": ws, "name": "crash"})["id"].(string)
	model := mk("/models", map[string]any{"project_id": pid, "key": "events", "fields": benchFields})
	ic := mk("/ingest-clients", map[string]any{"project_id": pid, "name": "c", "models": []string{"events"}})["id"].(string)
	key := mk("/runtime-api-keys", map[string]any{"project_id": pid, "name": "k", "kind": "ingest", "client_id": ic})["key"].(string)

	acked := map[string][]byte{} // event_id -> the line as sent
	attempted := 0
	for round := 0; round < 20; round++ {
		if round > 0 {
			p = startServe(t, freeArgs(dir)...)
		}
		// 2-13 acknowledged batches of 200 this round, then the kill.
		attempted += streamUntilKilled(t, p, key, 200, 2+rand.IntN(12), func(g, n, i int) (string, string) {
			id := fmt.Sprintf("r%02d-g%d-b%05d-%03d", round, g, n, i)
			return id, fmt.Sprintf(`{"event_id":"%s","user_id":"u%d","kind":"view","amount":%d.5,"items":%d,"logged_in":true,"at":"2026-11-21T12:00:00Z"}`, id, i, i, i)
		}, func(lines map[string]string) {
			for id, l := range lines {
				acked[id] = []byte(l)
			}
		})
	}
	// Read the warehouse file directly: every acknowledged record, exactly once, in the
	// blocks or in the log; those still in the log byte for byte as sent.
	log := openWarehouse(t, dir, model["warehouse_id"].(string))
	seen, _ := storedIDs(t, log, model["id"].(string))
	stored := 0
	err := log.Scan(model["id"].(string), time.Time{}, time.Time{}, func(k, rec []byte) error {
		var r struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(rec, &r); err != nil {
			return fmt.Errorf("stored record is not JSON: %q", rec)
		}
		if sent, ok := acked[r.EventID]; ok && !bytes.HasPrefix(rec, sent[:len(sent)-1]) {
			return fmt.Errorf("record %s stored as %s, sent as %s", r.EventID, rec, sent)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Fatalf("acknowledged record %s stored %d times", id, seen[id])
		}
	}
	for id, n := range seen {
		stored += n
		if n != 1 {
			t.Fatalf("record %s stored %d times", id, n)
		}
	}
	t.Logf("20 SIGKILLs: %d records acknowledged, %d stored (%d sent); every acknowledged one exactly once", len(acked), stored, attempted)
}

// openWarehouse opens a warehouse file of a stopped server's data dir read-only, and runs
// bbolt's check on it at cleanup, as tests of lookout.db do.
func openWarehouse(t *testing.T, dataDir, id string) *warehouse.ReadOnlyLog {
	t.Helper()
	l, err := warehouse.OpenReadOnlyLog(dataDir, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p := l.Check(); len(p) > 0 {
			t.Errorf("warehouse file %s: %v", id, p)
		}
		l.Close()
	})
	return l
}

// streamUntilKilled sends NDJSON batches of perBatch records from 4 connections to p's
// ingest listener and kills p with SIGKILL once target batches were acknowledged, so the
// kill lands mid-stream whatever the machine's speed. line makes record i of batch n of
// connection g and its unique event_id; acked gets each fully acknowledged batch
// (event_id -> line), called from one goroutine at a time. It returns the records sent.
func streamUntilKilled(t *testing.T, p *proc, key string, perBatch, target int, line func(g, n, i int) (id, record string), acked func(map[string]string)) int {
	t.Helper()
	ingestURL := listenerURL(t, p, "ingest")
	var mu sync.Mutex
	sent, batches := 0, 0
	stop, reached := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var body bytes.Buffer
				lines := map[string]string{}
				for i := 0; i < perBatch; i++ {
					id, l := line(g, n, i)
					lines[id] = l
					body.WriteString(l + "\n")
				}
				req, _ := http.NewRequest("POST", ingestURL+"/ingest?schema=events", &body)
				req.Header.Set("Authorization", "ApiKey "+key)
				req.Header.Set("Content-Type", "application/x-ndjson")
				mu.Lock()
				sent += len(lines)
				mu.Unlock()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				var env struct {
					Data struct{ Accepted int } `json:"data"`
				}
				json.NewDecoder(resp.Body).Decode(&env)
				resp.Body.Close()
				if resp.StatusCode == 202 && env.Data.Accepted == len(lines) {
					mu.Lock()
					acked(lines)
					if batches++; batches == target {
						close(reached)
					}
					mu.Unlock()
				}
			}
		}(g)
	}
	select {
	case <-reached:
	case <-p.exited:
		t.Fatalf("serve exited: %v\n%s", p.waitErr, p.logs())
	}
	p.cmd.Process.Kill()
	<-p.exited
	close(stop)
	wg.Wait()
	return sent
}

// storedIDs reads every stored record of a model from both layers of a stopped server's
// warehouse file (column blocks, then the unsealed log) and counts each event_id, summing
// amount.
func storedIDs(t *testing.T, l *warehouse.ReadOnlyLog, modelID string) (map[string]int, float64) {
	t.Helper()
	m := &store.Model{Meta: store.Meta{ID: modelID}, TimestampField: "at"}
	for _, f := range benchFields {
		m.Fields = append(m.Fields, store.Field{Name: f["name"].(string), Type: f["type"].(string)})
	}
	seen := map[string]int{}
	sum := 0.0
	err := l.ReadParts(context.Background(), m, func(p *warehouse.Part) error {
		ids, err := p.Column("event_id", store.TypeString)
		if err != nil {
			return err
		}
		amounts, err := p.Column("amount", store.TypeNumber)
		if err != nil {
			return err
		}
		for i := 0; i < p.Meta.Rows; i++ {
			seen[strings.Clone(ids.Str(i))]++
			sum += amounts.Floats[i]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen, sum
}

// TestSealingSurvivesSIGKILL ingests at full speed while the sealer turns the log into
// column blocks, and kills the server with SIGKILL after a random number of acknowledged
// batches (tens of thousands of records: blocks are being sealed when the kill lands), 8
// times. Every acknowledged record is then stored exactly once across blocks and log, no
// record twice, and the query runtime's count and sum agree with what is stored.
func TestSealingSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the server 8 times")
	}
	dir := filepath.Join(t.TempDir(), "data")
	token, ws := bootstrap(t, dir)
	p := startServe(t, freeArgs(dir)...)
	c := client{t: t, base: p.base, auth: token}
	mk := c.create
	pid := mk("/projects", map[string]any{"workspace_id": ws, "name": "seal-crash"})["id"].(string)
	model := mk("/models", map[string]any{"project_id": pid, "key": "events", "fields": benchFields, "timestamp_field": "at"})
	ic := mk("/ingest-clients", map[string]any{"project_id": pid, "name": "c", "models": []string{"events"}})["id"].(string)
	key := mk("/runtime-api-keys", map[string]any{"project_id": pid, "name": "k", "kind": "ingest", "client_id": ic})["key"].(string)
	qc := mk("/query-clients", map[string]any{"project_id": pid, "name": "q", "adhoc_models": []string{"events"}})["id"].(string)
	qkey := mk("/runtime-api-keys", map[string]any{"project_id": pid, "name": "qk", "kind": "query", "client_id": qc})["key"].(string)

	acked := map[string]bool{}
	for round := 0; round < 8; round++ {
		if round > 0 {
			p = startServe(t, freeArgs(dir)...)
		}
		// 20-119 acknowledged batches of 1,000: blocks are being sealed when the kill lands.
		streamUntilKilled(t, p, key, 1000, 20+rand.IntN(100), func(g, n, i int) (string, string) {
			id := fmt.Sprintf("s%02d-g%d-b%05d-%03d", round, g, n, i)
			return id, fmt.Sprintf(`{"event_id":"%s","user_id":"u%d","kind":"view","country":"NL","amount":%g,"items":%d,"logged_in":true,"at":"2026-11-21T12:%02d:00Z"}`, id, i, float64(i%97)+0.25, i, i%60)
		}, func(lines map[string]string) {
			for id := range lines {
				acked[id] = true
			}
		})
	}
	// The query runtime answers count and sum over both layers once more after a restart.
	p = startServe(t, freeArgs(dir)...)
	qbody := `{"schema":"events","aggregations":[{"fn":"count","as":"n"},{"fn":"sum","field":"amount","as":"total"}]}`
	req, _ := http.NewRequest("POST", listenerURL(t, p, "query")+"/query", strings.NewReader(qbody))
	req.Header.Set("Authorization", "ApiKey "+qkey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var qenv struct {
		Data struct {
			Rows [][]float64 `json:"rows"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&qenv)
	resp.Body.Close()
	p.cmd.Process.Kill()
	<-p.exited

	l := openWarehouse(t, dir, model["warehouse_id"].(string))
	seen, sum := storedIDs(t, l, model["id"].(string))
	for id := range acked {
		if seen[id] != 1 {
			t.Fatalf("acknowledged record %s stored %d times", id, seen[id])
		}
	}
	stored := 0
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("record %s stored %d times", id, n)
		}
		stored++
	}
	if resp.StatusCode != 200 || len(qenv.Data.Rows) != 1 || int(qenv.Data.Rows[0][0]) != stored || qenv.Data.Rows[0][1] != sum {
		t.Fatalf("query answered %d %v; stored %d records summing to %v", resp.StatusCode, qenv.Data.Rows, stored, sum)
	}
	t.Logf("8 SIGKILLs while sealing: %d records acknowledged, %d stored, each once", len(acked), stored)
}
