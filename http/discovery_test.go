package http

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestDiscovery(t *testing.T) {
	rw := newRuntimeWorld(t)
	owner := bearer(rw.w.ownerSes)
	key := map[string]string{"Authorization": "ApiKey " + rw.keys["keys"], "Content-Type": "application/json"}
	disc := func(body string) *response {
		return rw.runtime(ingestReq{path: "/discover", body: body, header: key})
	}
	base := "/api/v1/discovery-sessions"
	client := rw.clients["keys"]

	if r := disc(`{"a":1}`); r.status != 409 || r.env.Code != "conflict" {
		t.Fatalf("no session: %d %s", r.status, r.body)
	}
	if r := rw.do("POST", base, bearer(rw.w.memberSes), map[string]any{"ingest_client_id": client, "model_key": "signups"}); r.status != 403 {
		t.Fatalf("a member opened a session: %d", r.status)
	}
	if r := rw.do("POST", "/management/v1/discovery-sessions", rw.all, map[string]any{"ingest_client_id": client, "model_key": "signups"}); r.status != 404 {
		t.Fatalf("discovery is not a Management route: %d", r.status)
	}
	id := rw.created(owner, base, map[string]any{"ingest_client_id": client, "model_key": "signups"})
	if r := rw.do("POST", base, owner, map[string]any{"ingest_client_id": client, "model_key": "other"}); r.status != 409 {
		t.Fatalf("second waiting session: %d", r.status)
	}
	for _, body := range []string{
		`{"email":"a@example.com","age":31,"plan":"pro","at":"2026-11-21T10:00:00Z","score":1}`,
		`[{"email":"b@example.com","age":40,"at":"2026-11-21T11:00:00Z","score":2.5,"tags":["x"]},{"email":"c@example.com","age":null,"at":"2026-11-21T12:00:00Z","score":3,"meta":{"k":1}}]`,
	} {
		if r := disc(body); r.status != 202 || !strings.Contains(r.body, `"session_id":"`+id) {
			t.Fatalf("capture: %d %s", r.status, r.body)
		}
	}
	for _, bad := range []string{`42`, `[1,2]`, `{"a":`, `[]`, ``} {
		if r := disc(bad); r.status != 400 {
			t.Fatalf("capture %q: %d %s", bad, r.status, r.body)
		}
	}
	if r := disc(`{"pad":"` + strings.Repeat("x", 10_000_001) + `"}`); r.status != 413 {
		t.Fatalf("over 10 MB: %d", r.status)
	}
	r := rw.do("GET", base+"/"+id, owner, nil)
	var sess struct {
		Samples int
		Fields  []struct {
			Name, Type string
			SeenRatio  float64 `json:"seen_ratio"`
			Required   bool
		}
	}
	r.data(t, &sess)
	got := map[string]string{}
	for _, f := range sess.Fields {
		got[f.Name] = f.Type
		if f.Name == "email" && (!f.Required || f.SeenRatio != 1) {
			t.Errorf("email: %+v", f)
		}
		if f.Name == "plan" && (f.Required || f.SeenRatio < 0.33 || f.SeenRatio > 0.34) {
			t.Errorf("plan: %+v", f)
		}
		if f.Name == "age" && f.Required {
			t.Errorf("age was null once and is required: %+v", f)
		}
	}
	want := map[string]string{"email": "string", "age": "integer", "plan": "string", "at": "timestamp", "score": "number", "tags": "array", "meta": "object"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s inferred as %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if sess.Samples != 3 {
		t.Errorf("samples %d", sess.Samples)
	}
	r = rw.do("POST", base+"/"+id+"/accept", owner, nil)
	if r.status != 200 || !strings.Contains(r.body, `"key":"signups"`) || !strings.Contains(r.body, `"state":"accepted"`) {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	if r := rw.do("POST", base+"/"+id+"/discard", owner, nil); r.status != 409 {
		t.Fatalf("discard after accept: %d", r.status)
	}
	// A second session on the same model appends only what is new, as optional fields.
	id2 := rw.created(owner, base, map[string]any{"ingest_client_id": client, "model_key": "signups"})
	disc(`{"email":"d@example.com","referrer":"ad"}`)
	r = rw.do("POST", base+"/"+id2+"/accept", owner, nil)
	if r.status != 200 || !strings.Contains(r.body, `{"name":"referrer","type":"string","required":false`) || !strings.Contains(r.body, `"version":2`) {
		t.Fatalf("additive accept: %d %s", r.status, r.body)
	}
	id3 := rw.created(owner, base, map[string]any{"ingest_client_id": client, "model_key": "trash"})
	if r := rw.do("POST", base+"/"+id3+"/accept", owner, nil); r.status != 409 {
		t.Fatalf("accept with no samples: %d", r.status)
	}
	if r := rw.do("POST", base+"/"+id3+"/discard", owner, nil); r.status != 200 || !strings.Contains(r.body, `"state":"discarded"`) {
		t.Fatalf("discard: %d %s", r.status, r.body)
	}
	if r := rw.do("GET", "/management/v1/models?project_id="+rw.project, rw.all, nil); strings.Contains(r.body, `"key":"trash"`) {
		t.Fatal("a discarded session made a model")
	}
	if r := rw.do("GET", base+"?state=accepted&project_id="+rw.project, owner, nil); !strings.Contains(r.body, id) || strings.Contains(r.body, id3) {
		t.Fatalf("list: %s", r.body)
	}
	if r := disc(`{"a":1}`); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("CORS headers on /discover")
	}

	// Over WebSocket.
	rw.created(owner, base, map[string]any{"ingest_client_id": client, "model_key": "ws_model"})
	conn, _, err := rw.wsDial("/ws/discover", rw.keys["keys"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn.Write(ctx, websocket.MessageText, []byte(`[{"x":1},{"x":2}]`))
	_, b, err := conn.Read(ctx)
	var ack map[string]any
	json.Unmarshal(b, &ack)
	if err != nil || ack["type"] != "ack" || ack["captured"] != 2.0 {
		t.Fatalf("ws discover: %v %s", err, b)
	}
}

// /discover spends the client's quota like /ingest, from the same budgets: over it, 429
// with Retry-After, and the session is unchanged.
func TestDiscoverQuota(t *testing.T) {
	rw := newRuntimeWorld(t)
	owner := bearer(rw.w.ownerSes)
	client := rw.clients["keys"]
	id := rw.created(owner, "/api/v1/discovery-sessions", map[string]any{"ingest_client_id": client, "model_key": "signups"})
	key := map[string]string{"Authorization": "ApiKey " + rw.keys["keys"], "Content-Type": "application/json"}
	discover := ingestReq{path: "/discover", body: `[{"a":1},{"a":2}]`, header: key}
	ingestOne := ingestReq{body: oneRecord, header: map[string]string{"Authorization": "ApiKey " + rw.keys["keys"]}}
	samples := func() int {
		var s struct{ Samples int }
		rw.do("GET", "/api/v1/discovery-sessions/"+id, owner, nil).data(t, &s)
		return s.Samples
	}
	for _, tc := range []struct {
		name         string
		rpm, recpm   int
		before       []ingestReq // each answered 202
		req          ingestReq
		status       int
		contains     string
		retryAfter   bool
		samplesAdded int
	}{
		{name: "within the quotas", rpm: 2, recpm: 10, req: discover, status: 202, contains: `"captured":2,"dropped":0`, samplesAdded: 2},
		{name: "requests per minute", rpm: 2, before: []ingestReq{discover, discover}, req: discover, status: 429, contains: "requests_per_minute", retryAfter: true, samplesAdded: 4},
		{name: "ingest spends the budget discover uses", rpm: 2, before: []ingestReq{ingestOne, ingestOne}, req: discover, status: 429, contains: "requests_per_minute", retryAfter: true},
		{name: "discover spends the budget ingest uses", rpm: 1, before: []ingestReq{discover}, req: ingestOne, status: 429, contains: "requests_per_minute", retryAfter: true, samplesAdded: 2},
		{name: "records per minute", recpm: 3, before: []ingestReq{discover}, req: discover, status: 429, contains: "records_per_minute", retryAfter: true, samplesAdded: 2},
		{name: "more samples than the quota ever allows", recpm: 1, req: discover, status: 413, contains: "records_per_minute quota is 1"},
	} {
		rw.clock.Advance(time.Minute) // every budget full again
		rw.do("PUT", "/management/v1/ingest-clients/"+client, rw.all, map[string]any{"quota": map[string]any{"requests_per_minute": tc.rpm, "records_per_minute": tc.recpm}})
		start := samples()
		for i, rq := range tc.before {
			if r := rw.runtime(rq); r.status != 202 {
				t.Fatalf("%s: request %d before: %d %s", tc.name, i, r.status, r.body)
			}
		}
		r := rw.runtime(tc.req)
		if r.status != tc.status || !strings.Contains(r.body, tc.contains) || (r.header.Get("Retry-After") != "") != tc.retryAfter {
			t.Fatalf("%s: %d %v %s", tc.name, r.status, r.header, r.body)
		}
		if got := samples() - start; got != tc.samplesAdded {
			t.Fatalf("%s: the session gained %d samples, want %d", tc.name, got, tc.samplesAdded)
		}
	}

	// Over WebSocket the same refusal is an error message naming the quota.
	rw.clock.Advance(time.Minute)
	rw.do("PUT", "/management/v1/ingest-clients/"+client, rw.all, map[string]any{"quota": map[string]any{"requests_per_minute": 1, "records_per_minute": 0}})
	conn, _, err := rw.wsDial("/ws/discover", rw.keys["keys"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var replies []string
	for i := 0; i < 2; i++ {
		conn.Write(ctx, websocket.MessageText, []byte(`{"x":1}`))
		_, b, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, string(b))
	}
	if !strings.Contains(replies[0], `"type":"ack"`) || !strings.Contains(replies[1], `"type":"error"`) || !strings.Contains(replies[1], "requests_per_minute") {
		t.Fatalf("ws replies: %v", replies)
	}
}
