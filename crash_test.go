package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

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

	var mu sync.Mutex
	acked := map[string][]byte{} // event_id -> the line as sent
	attempted := 0
	for round := 0; round < 20; round++ {
		if round > 0 {
			p = startServe(t, freeArgs(dir)...)
		}
		ingestURL := listenerURL(t, p, "ingest")
		stop := make(chan struct{})
		target, batches := 2+rand.IntN(12), 0 // acknowledged batches of 200 this round
		reached := make(chan struct{})
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
					lines := map[string][]byte{}
					for i := 0; i < 200; i++ {
						id := fmt.Sprintf("r%02d-g%d-b%05d-%03d", round, g, n, i)
						line := fmt.Sprintf(`{"event_id":"%s","user_id":"u%d","kind":"view","amount":%d.5,"items":%d,"logged_in":true,"at":"2026-11-21T12:00:00Z"}`, id, i, i, i)
						lines[id] = []byte(line)
						body.WriteString(line + "\n")
					}
					req, _ := http.NewRequest("POST", ingestURL+"/ingest?schema=events", &body)
					req.Header.Set("Authorization", "ApiKey "+key)
					req.Header.Set("Content-Type", "application/x-ndjson")
					mu.Lock()
					attempted += len(lines)
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
						for id, l := range lines {
							acked[id] = l
						}
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
	}
	// Read the warehouse file directly: every acknowledged record, exactly once, as sent.
	log := openWarehouse(t, dir, model["warehouse_id"].(string))
	seen := map[string]int{}
	stored := 0
	err := log.Scan(model["id"].(string), time.Time{}, time.Time{}, func(k, rec []byte) error {
		stored++
		var r struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(rec, &r); err != nil {
			return fmt.Errorf("stored record is not JSON: %q", rec)
		}
		seen[r.EventID]++
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
