package http

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"lookout/auth"
)

// hangGuard bounds how long a test waits for an answer the server owes: reaching it means
// the server never ended the request, which is the failure being tested, not a timing claim.
const hangGuard = time.Minute

// rawResponse sends head (request line and headers) and partial, a start of the body, on
// conn, stalls, and returns the answer the server gives on its own.
func rawResponse(t *testing.T, conn net.Conn, head, partial string) (*http.Response, map[string]any) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(hangGuard))
	if _, err := io.WriteString(conn, head+"\r\n"+partial); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body (the connection hung or broke): %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%d answer is not the envelope: %q", resp.StatusCode, raw)
	}
	return resp, env
}

// TestConsoleBodyTrickle: a console or Management body that stops arriving ends with the
// deadline instead of holding the connection: 408 in the envelope where the route reads
// the body, the route's own answer where it does not (issue 7, items 13 and 21).
func TestConsoleBodyTrickle(t *testing.T) {
	h := newHarnessWith(t, func(c *Config) { c.BodyReadTimeout = 50 * time.Millisecond })
	host := strings.TrimPrefix(h.url, "http://")
	for _, tc := range []struct {
		name, method, path string
		status             int
		code               string
	}{
		{"route that reads a body", "POST", "/api/v1/auth/login", 408, "request_timeout"},
		{"Management route that reads a body", "POST", "/management/v1/projects", 401, "unauthenticated"},
		{"route without a body", "POST", "/api/v1/auth/logout", 401, "unauthenticated"},
		{"no route", "POST", "/nowhere", 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			resp, env := rawResponse(t, conn, tc.method+" "+tc.path+" HTTP/1.1\r\nHost: "+host+"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n", "{")
			if resp.StatusCode != tc.status || env["code"] != tc.code || env["error"] != true {
				t.Fatalf("%d %v", resp.StatusCode, env)
			}
		})
	}
	// A body sent in one go is unaffected.
	if r := h.do("POST", "/api/v1/auth/login", "", map[string]any{"email": "nobody@example.com", "password": "whatever-it-is"}); r.status != 401 {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

// ingestKey makes a project with the orders model and returns an ingest API key for it.
func ingestKey(t *testing.T, h *harness) string {
	t.Helper()
	w := h.world()
	all := h.token(w, auth.AllScopes())
	f := h.fixtures(w, all, w.p1.ID)
	r := h.do("POST", "/management/v1/runtime-api-keys", all, map[string]any{"project_id": w.p1.ID, "name": "k", "kind": "ingest", "client_id": f.ingest})
	var k struct{ Key string }
	r.data(t, &k)
	if k.Key == "" {
		t.Fatalf("key: %s", r.body)
	}
	return k.Key
}

// TestIngestBodyStall: an ingest body whose client stops sending ends after the read idle
// timeout (no fixed deadline for the whole upload), with the records before the stall
// committed (issue 7, item 13).
func TestIngestBodyStall(t *testing.T) {
	h := newHarnessWith(t, func(c *Config) { c.IngestReadIdle = 50 * time.Millisecond })
	key := ingestKey(t, h)
	u, _ := url.Parse(h.ingestURL)
	cfg := h.ingestTLS.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	conn, err := tls.Dial("tcp", u.Host, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	line := `{"id":"o-1","amount":3.5,"country":"NL","ts":"2026-11-21T12:00:00Z"}` + "\n"
	resp, env := rawResponse(t, conn, "POST /ingest?schema=orders HTTP/1.1\r\nHost: "+u.Host+"\r\nAuthorization: ApiKey "+key+
		"\r\nContent-Type: application/x-ndjson\r\nContent-Length: 100000\r\n", line+`{"id":`)
	if resp.StatusCode != 408 || env["code"] != "request_timeout" || !strings.Contains(env["message"].(string), "stalled") || env["accepted"] != 0.0 || env["resume_line"] != 1.0 {
		t.Fatalf("%d %v", resp.StatusCode, env)
	}
	if strings.Contains(env["message"].(string), "127.0.0.1") {
		t.Fatalf("the message shows connection details: %v", env["message"])
	}
}

// TestIngestMinRate: the minimum-rate rule refuses a body whose client has spent more time
// than the idle allowance plus one second per min-rate bytes received, before waiting on
// it again (the arithmetic of idleBody, without a clock).
func TestIngestMinRate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int64
		waited  time.Duration
		minRate int64
		stalled bool
	}{
		{"fresh body", 0, 0, 1024, false},
		{"slow but within the allowance", 1024, 30 * time.Second, 1024, false},
		{"a byte per idle period", 10, time.Hour, 1024, true},
		{"no rate rule", 10, time.Hour, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &idleBody{ReadCloser: io.NopCloser(strings.NewReader("x")), idle: 30 * time.Second, minRate: tc.minRate, n: tc.n, waited: tc.waited}
			_, err := b.Read(make([]byte, 1))
			if (err == error(errBodyStalled)) != tc.stalled {
				t.Fatalf("err %v, stalled want %v", err, tc.stalled)
			}
		})
	}
}

// TestWebSocketHandshakeRefusals: every refused WebSocket handshake answers the JSON
// envelope, keeping the headers the protocol asks for (issue 7, item 21).
func TestWebSocketHandshakeRefusals(t *testing.T) {
	h := newHarness(t)
	key := ingestKey(t, h)
	valid := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	with := func(changes map[string]string) map[string]string {
		m := map[string]string{"Authorization": "ApiKey " + key}
		for k, v := range valid {
			m[k] = v
		}
		for k, v := range changes {
			if v == "" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	for _, tc := range []struct {
		name       string
		header     map[string]string
		status     int
		code       string
		wantHeader [2]string
	}{
		{"plain GET", with(map[string]string{"Connection": "", "Upgrade": ""}), 426, "upgrade_required", [2]string{"Upgrade", "websocket"}},
		{"no Upgrade header", with(map[string]string{"Upgrade": ""}), 426, "upgrade_required", [2]string{"Connection", "Upgrade"}},
		{"old protocol version", with(map[string]string{"Sec-WebSocket-Version": "8"}), 400, "bad_handshake", [2]string{"Sec-WebSocket-Version", "13"}},
		{"no key", with(map[string]string{"Sec-WebSocket-Key": ""}), 400, "bad_handshake", [2]string{}},
		{"malformed key", with(map[string]string{"Sec-WebSocket-Key": "short"}), 400, "bad_handshake", [2]string{}},
		{"foreign origin", with(map[string]string{"Origin": "https://evil.example"}), 403, "forbidden", [2]string{}},
		{"no credential", map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, 401, "unauthenticated", [2]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.runtime(ingestReq{method: "GET", path: "/ws/ingest", header: tc.header})
			if r.status != tc.status || r.env.Code != tc.code {
				t.Fatalf("%d %s", r.status, r.body)
			}
			r.checkEnvelope(t)
			if tc.wantHeader[0] != "" && r.header.Get(tc.wantHeader[0]) != tc.wantHeader[1] {
				t.Fatalf("%s: %q, want %q", tc.wantHeader[0], r.header.Get(tc.wantHeader[0]), tc.wantHeader[1])
			}
		})
	}
}
