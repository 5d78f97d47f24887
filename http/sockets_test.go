package http

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWebSocketCaps: open runtime WebSockets are capped per client (429) and overall
// (503), both answered in the envelope with Retry-After.
func TestWebSocketCaps(t *testing.T) {
	rw := newRuntimeWorld(t)
	rw.srv.sockets = newSockets(2, 1)
	u := "wss" + strings.TrimPrefix(rw.ingestURL, "https") + "/ws/ingest"
	dial := func(key string) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPClient: rw.ingestTLS.Client(),
			HTTPHeader: http.Header{"Authorization": {"ApiKey " + key}, "User-Agent": {"edge-agent/1.0"}}})
	}
	first, _, err := dial(rw.keys["keys"])
	if err != nil {
		t.Fatal(err)
	}
	defer first.CloseNow()
	// "orders only" is another key of the same client.
	if _, resp, err := dial(rw.keys["orders only"]); err == nil || resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("second socket of one client: %v %v", err, resp)
	}
	other, _, err := dial(rw.keys["wsonly"])
	if err != nil {
		t.Fatal(err)
	}
	defer other.CloseNow()
	if _, resp, err := dial(rw.keys["ua"]); err == nil || resp == nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third socket overall: %v %v", err, resp)
	}
}

// TestSocketSlots: a released slot can be taken again, per client and overall.
func TestSocketSlots(t *testing.T) {
	ss := newSockets(2, 1)
	a, err := ss.reserve("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.reserve("a"); err == nil {
		t.Fatal("second slot for one client")
	}
	b, err := ss.reserve("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.reserve("c"); err == nil {
		t.Fatal("third slot overall")
	}
	ss.release(a)
	ss.release(b)
	if _, err := ss.reserve("a"); err != nil || ss.count() != 1 || len(ss.byClient) != 1 {
		t.Fatalf("after release: %v, %d open", err, ss.count())
	}
}

// TestGoAwayClosesSocketsWith1001: at shutdown every runtime WebSocket gets a close
// frame with 1001 (going away), and new handshakes are refused with 503.
func TestGoAwayClosesSocketsWith1001(t *testing.T) {
	rw := newRuntimeWorld(t)
	dial := func() (*websocket.Conn, *http.Response, error) { return rw.wsDial("/ws/ingest", rw.keys["keys"]) }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var conns []*websocket.Conn
	for i := 0; i < 3; i++ {
		c, _, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		// One exchange, so the socket is past its handshake on the server too.
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"schema":"orders","data":[{"id":"a"}]}`)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Read(ctx); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	gone := make(chan struct{})
	go func() { rw.srv.GoAway(ctx); close(gone) }()
	for i, c := range conns {
		_, _, err := c.Read(ctx) // the client reads, so it answers the close handshake
		if websocket.CloseStatus(err) != websocket.StatusGoingAway {
			t.Fatalf("socket %d: %v", i, err)
		}
	}
	<-gone
	if rw.srv.sockets.count() != 0 {
		t.Fatal("handlers still running after GoAway")
	}
	if _, resp, err := dial(); err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("handshake during shutdown: %v %v", err, resp)
	}
}

// TestGoAwayKeepsItsDeadline: a socket whose handler is stuck in a message (it holds the
// socket, as while a client does not read its ack) does not hold shutdown past its
// deadline: GoAway returns and the connection is dropped.
func TestGoAwayKeepsItsDeadline(t *testing.T) {
	rw := newRuntimeWorld(t)
	c, _, err := rw.wsDial("/ws/ingest", rw.keys["keys"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"schema":"orders","data":[{"id":"a"}]}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); err != nil { // the server side is attached now
		t.Fatal(err)
	}
	rw.srv.sockets.mu.Lock()
	var stuck *socket
	for sk := range rw.srv.sockets.open {
		stuck = sk
	}
	rw.srv.sockets.mu.Unlock()
	stuck.mu.Lock() // as a handler in the middle of a message holds it
	defer stuck.mu.Unlock()
	expired, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	rw.srv.GoAway(expired) // must return although the socket is busy
	if _, _, err := c.Read(ctx); err == nil {
		t.Fatal("the connection of a stuck socket stayed open after the deadline")
	}
}

// TestWebSocketPartialSaysWhatWasStored: a message stored in part (here: the quota runs
// out after its first chunk) is answered with how many records are stored and where to
// resume, as over HTTP, so a client never resends what is stored.
func TestWebSocketPartialSaysWhatWasStored(t *testing.T) {
	rw := newRuntimeWorld(t)
	rw.do("PUT", "/management/v1/ingest-clients/"+rw.clients["keys"], rw.all, map[string]any{"quota": map[string]any{"records_per_minute": 2}})
	c, _, err := rw.wsDial("/ws/ingest", rw.keys["keys"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"id":"m1","schema":"orders","data":[{"id":"a"},{"id":"b"},{"id":"c"}]}`)); err != nil {
		t.Fatal(err)
	}
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Type        string
		IngestID    string `json:"ingest_id"`
		Accepted    *int
		ResumeIndex *int `json:"resume_index"`
	}
	if json.Unmarshal(b, &r) != nil || r.Type != "error" || r.IngestID == "" || r.Accepted == nil || *r.Accepted != 2 || r.ResumeIndex == nil || *r.ResumeIndex != 2 {
		t.Fatalf("reply %s", b)
	}
}

// wsDial opens a runtime WebSocket at path on the ingest listener with an API key.
func (rw *runtimeWorld) wsDial(path, key string) (*websocket.Conn, *http.Response, error) {
	u := "wss" + strings.TrimPrefix(rw.ingestURL, "https") + path
	return websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPClient: rw.ingestTLS.Client(), HTTPHeader: http.Header{"Authorization": {"ApiKey " + key}}})
}
