package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// hookReceiver is a webhook receiver that checks every Standard Webhooks signature (written
// here from the scheme, not with the alerts package) and counts each webhook-id. While
// hold is set it keeps requests open, so deliveries stay in flight until the server dies.
type hookReceiver struct {
	mu      sync.Mutex
	secrets map[string]string // channel path -> signing secret
	seen    map[string]int    // webhook-id -> requests
	bad     []string
	hold    bool
	arrived chan struct{} // gets a value per request that arrives
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id, ts, sig := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
	h.mu.Lock()
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(h.secrets[r.URL.Path], "whsec_"))
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.%s", id, ts, body)
	if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); !hmac.Equal([]byte(sig), []byte(want)) {
		h.bad = append(h.bad, id)
	}
	h.seen[id]++
	hold := h.hold
	h.mu.Unlock()
	select {
	case h.arrived <- struct{}{}:
	default:
	}
	if hold {
		<-r.Context().Done() // until the server that sent it dies
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// TestDeliveriesSurviveSIGKILL kills the server while deliveries are in flight (the
// receiver holds them) and others wait for rate-limit tokens, twice, and checks that after
// the last restart every delivery ends delivered and the receiver saw each webhook-id at
// least once: none lost.
func TestDeliveriesSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the server twice and waits for rate-limited deliveries")
	}
	dir := filepath.Join(t.TempDir(), "data")
	token, ws := bootstrap(t, dir)
	rcv := &hookReceiver{secrets: map[string]string{}, seen: map[string]int{}, hold: true, arrived: make(chan struct{}, 64)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	p := startServe(t, freeArgs(dir)...)
	c := client{t: t, base: p.base, auth: token}
	mk := c.create
	pid := mk("/projects", map[string]any{"workspace_id": ws, "name": "alerts"})["id"].(string)
	mk("/models", map[string]any{"project_id": pid, "key": "orders", "fields": []map[string]any{
		{"name": "id", "type": "string"}, {"name": "country", "type": "string"}, {"name": "status", "type": "string"}}})
	ic := mk("/ingest-clients", map[string]any{"project_id": pid, "name": "c", "models": []string{"orders"}})["id"].(string)
	key := mk("/runtime-api-keys", map[string]any{"project_id": pid, "name": "k", "kind": "ingest", "client_id": ic})["key"].(string)
	var channels []string
	for i := range 4 {
		path := fmt.Sprintf("/hook%d", i)
		ch := mk("/notification-channels", map[string]any{"project_id": pid, "name": path, "type": "webhook", "config": map[string]any{"url": srv.URL + path}})
		rcv.mu.Lock()
		rcv.secrets[path] = ch["signing_secret"].(string)
		rcv.mu.Unlock()
		channels = append(channels, ch["id"].(string))
	}
	mk("/alerts", map[string]any{"project_id": pid, "name": "failed", "model_key": "orders", "group_by": []string{"country"},
		"conditions": []map[string]any{{"field": "status", "operator": "eq", "value": "failed"}}, "channel_ids": channels})

	var body bytes.Buffer
	for _, country := range []string{"DE", "FR", "NL"} {
		fmt.Fprintf(&body, `{"id":"o-%s","country":%q,"status":"failed"}`+"\n", country, country)
	}
	postNDJSON(t, p, key, "orders", body.Bytes())
	const want = 3 * 4 // three incidents, four channels each

	waitArrivals := func(n int) {
		for range n {
			select {
			case <-rcv.arrived:
			case <-p.exited:
				t.Fatalf("serve exited: %v\n%s", p.waitErr, p.logs())
			case <-time.After(60 * time.Second):
				t.Fatal("no delivery arrived")
			}
		}
	}
	// Round 1: two deliveries in flight, held; ten waiting for tokens. Kill.
	waitArrivals(2)
	p.cmd.Process.Kill()
	<-p.exited
	// Round 2: the restart sends again (the held ones with the same ids); kill after one more
	// arrival, still holding.
	p = startServe(t, freeArgs(dir)...)
	waitArrivals(1)
	p.cmd.Process.Kill()
	<-p.exited
	// Round 3: let everything through and wait until the queue says all are delivered.
	rcv.mu.Lock()
	rcv.hold = false
	rcv.mu.Unlock()
	p = startServe(t, freeArgs(dir)...)
	c = client{t: t, base: p.base, auth: token}
	deadline := time.Now().Add(2 * time.Minute)
	var ids []string
	for {
		_, env := c.do("GET", "/management/v1/alert-deliveries?limit=100&project_id="+pid, nil)
		items, _ := env["data"].([]any)
		ids = ids[:0]
		delivered := 0
		for _, it := range items {
			d := it.(map[string]any)
			ids = append(ids, d["id"].(string))
			if d["status"] == "delivered" {
				delivered++
			}
		}
		if len(items) != want {
			t.Fatalf("%d deliveries in the queue, want %d (3 incidents × 4 channels): %v", len(items), want, items)
		}
		if delivered == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d delivered: %v\n%s", delivered, want, items, p.logs())
		}
		select {
		case <-rcv.arrived:
		case <-time.After(time.Second):
		}
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.bad) > 0 {
		t.Fatalf("bad signatures on %v", rcv.bad)
	}
	again := 0
	for _, id := range ids {
		if rcv.seen[id] == 0 {
			t.Fatalf("delivery %s delivered but the receiver never saw it", id)
		}
		if rcv.seen[id] > 1 {
			again++
		}
	}
	if again == 0 {
		t.Fatal("no delivery was sent again after a kill: the test did not catch one in flight")
	}
	t.Logf("%d deliveries, all delivered; %d sent more than once with the same webhook-id", len(ids), again)
}
