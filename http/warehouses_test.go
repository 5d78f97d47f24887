package http

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"lookout/auth"
	"lookout/internal/testsrv"
	"lookout/store"
	"lookout/warehouse/engines"
	"lookout/warehouse/external"
)

// fakeEngines is a TestWarehouse that answers like an engine without one: an address
// containing "unreachable" is refused, with a message that (unlike a real engine's)
// repeats the secret, so the transport's own redaction is what keeps it out.
type fakeEngines struct {
	mu    sync.Mutex
	calls []string // the warehouse names tested
	down  bool     // every test fails
}

func (f *fakeEngines) test(ctx context.Context, w store.Warehouse, username, secret string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, w.Name)
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("no deadline")
	}
	if f.down || strings.Contains(w.Config.URL+w.Config.Host, "unreachable") {
		return &external.Error{Engine: w.Type, Msg: "dial tcp 10.0.0.9:8123: connect: connection refused (signed in as " + username + " with " + secret + ")"}
	}
	return nil
}

func (f *fakeEngines) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func TestWarehouseConnectionCheck(t *testing.T) {
	fake := &fakeEngines{}
	h := newHarnessWith(t, func(c *Config) { c.TestWarehouse = fake.test })
	w := h.world()
	all := h.token(w, auth.AllScopes())
	p := w.p1.ID
	const secret = "pw-Zq8!xK2#vN5"
	mg, con := "/management/v1/warehouses", "/api/v1/warehouses"
	cred := h.created(all, "/management/v1/warehouse-credentials", map[string]any{"project_id": p, "name": "ch", "type": "password", "username": "lookout", "secret": secret})
	token := h.created(all, "/management/v1/warehouse-credentials", map[string]any{"project_id": p, "name": "tok", "type": "token", "secret": "a-token"})
	ch := func(name, url string) map[string]any {
		return map[string]any{"project_id": p, "name": name, "type": "clickhouse", "config": map[string]any{"url": url}, "credential_id": cred}
	}
	chID := h.created(all, mg, ch("events", "http://clickhouse.internal:8123"))
	def := func() string {
		var l []store.Warehouse
		h.do("GET", mg+"?type=embedded&project_id="+p, all, nil).data(t, &l)
		return l[0].ID
	}()
	calls := fake.count()
	if calls != 1 {
		t.Fatalf("create tested %d times", calls)
	}

	for _, sc := range []scenario{
		{name: "clickhouse without url", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "clickhouse", "config": map[string]any{"database": "d"}}, status: 400, contains: []string{`"field":"config.url"`}},
		{name: "clickhouse url with credentials", method: "POST", url: mg, auth: all, body: ch("x", "http://u:p@ch:8123"), status: 400, contains: []string{`"field":"config.url"`, "warehouse credential"}},
		{name: "clickhouse with a postgres host", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "clickhouse", "config": map[string]any{"url": "http://ch:8123", "host": "ch"}}, status: 400, contains: []string{`"field":"config.host"`}},
		{name: "postgres without host", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "postgres", "config": map[string]any{"database": "d"}}, status: 400, contains: []string{`"field":"config.host"`}},
		{name: "postgres with a url", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "postgres", "config": map[string]any{"host": "db", "database": "d", "url": "http://db"}}, status: 400, contains: []string{`"field":"config.url"`}},
		{name: "retention out of range", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "postgres", "config": map[string]any{"host": "db", "database": "d", "local_retention_hours": 9000}}, status: 400, contains: []string{`"field":"config.local_retention_hours"`}},
		{name: "token credential", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "clickhouse", "config": map[string]any{"url": "http://ch:8123"}, "credential_id": token}, status: 400, contains: []string{`"field":"credential_id"`, "type password"}},
		{name: "type message", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "name": "x", "type": "oracle"}, status: 400, contains: []string{"must be embedded, postgres or clickhouse"}},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	if fake.count() != calls {
		t.Fatal("an invalid configuration was tested")
	}

	t.Run("unreachable engine: 400 with its message, nothing stored", func(t *testing.T) {
		for _, body := range []map[string]any{ch("unreachable-ch", "http://unreachable:8123"),
			{"project_id": p, "name": "unreachable-pg", "type": "postgres", "config": map[string]any{"host": "unreachable", "database": "d"}, "credential_id": cred}} {
			r := h.run(t, scenario{method: "POST", url: mg, auth: all, body: body, status: 400,
				contains:    []string{`"code":"validation_failed"`, `"message":"cannot connect to the warehouse: ` + body["type"].(string) + `: dial tcp`, `"field":"config"`, "connection refused", "****"},
				notContains: []string{secret}})
			if len(r.env.Fields) != 1 || r.env.Fields[0].Field != "config" || !strings.Contains(r.env.Fields[0].Message, "connection refused") {
				t.Fatalf("fields %+v", r.env.Fields)
			}
		}
		h.run(t, scenario{method: "GET", url: mg + "?project_id=" + p, auth: all, status: 200, contains: []string{chID}, notContains: []string{"unreachable"}})
	})
	t.Run("created with defaults", func(t *testing.T) {
		h.run(t, scenario{method: "GET", url: mg + "/" + chID, auth: all, status: 200,
			contains: []string{`"type":"clickhouse"`, `"url":"http://clickhouse.internal:8123"`, `"database":"default"`, `"local_retention_hours":24`}})
	})

	// Updates.
	for _, sc := range []scenario{
		{name: "type cannot change", method: "PUT", url: mg + "/" + chID, auth: all, body: map[string]any{"type": "postgres"}, status: 409, contains: []string{`"code":"conflict"`, `"field":"type"`}},
		{name: "project cannot change", method: "PUT", url: mg + "/" + chID, auth: all, body: map[string]any{"project_id": w.p2.ID}, status: 400, contains: []string{`"field":"project_id"`}},
		{name: "bad config", method: "PUT", url: mg + "/" + chID, auth: all, body: map[string]any{"config": map[string]any{"url": "clickhouse:8123"}}, status: 400, contains: []string{`"field":"config.url"`}},
		{name: "unreachable", method: "PUT", url: mg + "/" + chID, auth: all, body: map[string]any{"config": map[string]any{"url": "http://unreachable:8123"}}, status: 400, contains: []string{"cannot connect to the warehouse: clickhouse: ", `"field":"config"`}, notContains: []string{secret}},
		{name: "unchanged after refusals", method: "GET", url: mg + "/" + chID, auth: all, status: 200, contains: []string{`"version":1`, `"url":"http://clickhouse.internal:8123"`}},
		{name: "new address and retention", method: "PUT", url: mg + "/" + chID, auth: all, body: map[string]any{"name": "events2", "config": map[string]any{"url": "https://clickhouse.internal:8443", "database": "events", "local_retention_hours": 72}}, status: 200,
			contains: []string{`"version":2`, `"name":"events2"`, `"url":"https://clickhouse.internal:8443"`, `"database":"events"`, `"local_retention_hours":72`, `"credential_id":"` + cred}},
		{name: "the default warehouse may be renamed", method: "PUT", url: mg + "/" + def, auth: all, body: map[string]any{"name": "local"}, status: 200, contains: []string{`"name":"local"`, `"config":{}`}},
		{name: "the default warehouse keeps an empty config", method: "PUT", url: mg + "/" + def, auth: all, body: map[string]any{"config": map[string]any{"local_retention_hours": 5}}, status: 400, contains: []string{`"field":"config"`}},
		{name: "console update", method: "PUT", url: con + "/" + chID, auth: bearer(w.ownerSes), body: map[string]any{"name": "events3"}, status: 200, contains: []string{`"version":3`}},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	t.Run("stale If-Match", func(t *testing.T) {
		before := fake.count()
		r := h.do("PUT", mg+"/"+chID, all, map[string]any{"name": "x"}, "If-Match", `"1"`)
		if r.status != 412 || r.env.Code != "precondition_failed" {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if fake.count() != before {
			t.Fatal("a stale update was tested")
		}
		r = h.do("PUT", mg+"/"+chID, all, map[string]any{"name": "events4"}, "If-Match", `"3"`)
		if r.status != 200 || r.header.Get("ETag") != `"4"` {
			t.Fatalf("current If-Match: %d %s %s", r.status, r.header.Get("ETag"), r.body)
		}
	})

	// On-demand tests.
	readTok, writeTok := h.token(w, []string{"warehouses:read"}), h.token(w, []string{"warehouses:write"})
	for _, sc := range []scenario{
		{name: "management", method: "POST", url: mg + "/" + chID + "/test", auth: writeTok, status: 200, contains: []string{`"id":"` + chID, `"ok":true`, `"elapsed_ms":`}},
		{name: "console", method: "POST", url: con + "/" + chID + "/test", auth: bearer(w.adminSes), status: 200, contains: []string{`"ok":true`}},
		{name: "embedded passes without a connection", method: "POST", url: mg + "/" + def + "/test", auth: all, status: 200, contains: []string{`"id":"` + def, `"ok":true`, `"elapsed_ms":0`}},
		{name: "read scope", method: "POST", url: mg + "/" + chID + "/test", auth: readTok, status: 403, contains: []string{`"code":"forbidden"`}},
		{name: "console member", method: "POST", url: con + "/" + chID + "/test", auth: bearer(w.memberSes), status: 403},
		{name: "no token", method: "POST", url: mg + "/" + chID + "/test", status: 401},
		{name: "another workspace", method: "POST", url: con + "/" + chID + "/test", auth: bearer(w.strangerSes), status: 404},
		{name: "unknown id", method: "POST", url: mg + "/wh_01M7Z4W2F0RJ1J0S0V8N3H4K2D/test", auth: all, status: 404},
		{name: "GET is not a test", method: "GET", url: mg + "/" + chID + "/test", auth: all, status: 405},
	} {
		t.Run("test/"+sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	t.Run("test/engine down", func(t *testing.T) {
		fake.mu.Lock()
		fake.down = true
		fake.mu.Unlock()
		defer func() { fake.mu.Lock(); fake.down = false; fake.mu.Unlock() }()
		for _, root := range []string{mg, con} {
			h.run(t, scenario{method: "POST", url: root + "/" + chID + "/test", auth: map[string]string{mg: all, con: bearer(w.ownerSes)}[root], status: 400,
				contains: []string{`"code":"validation_failed"`, "cannot connect to the warehouse: clickhouse: dial tcp", `"field":"config"`}, notContains: []string{secret}})
		}
	})
	if strings.Contains(h.logs.String(), secret) {
		t.Fatal("a log line holds the secret")
	}
	if !strings.Contains(h.logs.String(), "warehouse connection test failed") {
		t.Fatal("failed tests are not logged")
	}
}

// TestWarehouseWithoutTester: a server without TestWarehouse stores external warehouses
// unchecked and says it cannot test them on demand.
func TestWarehouseWithoutTester(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	all := h.token(w, auth.AllScopes())
	id := h.created(all, "/management/v1/warehouses", map[string]any{"project_id": w.p1.ID, "name": "ch", "type": "clickhouse", "config": map[string]any{"url": "http://unreachable:8123"}})
	h.run(t, scenario{method: "POST", url: "/management/v1/warehouses/" + id + "/test", auth: all, status: 503, contains: []string{`"code":"unavailable"`}})
	h.run(t, scenario{method: "PUT", url: "/management/v1/warehouses/" + id, auth: all, body: map[string]any{"name": "ch2"}, status: 200})
}

// TestWarehouseRealEngines creates warehouses on real PostgreSQL and ClickHouse servers:
// the right password is accepted, a wrong one is a 400 carrying the engine's complaint
// but never the password.
func TestWarehouseRealEngines(t *testing.T) {
	pg, ch := testsrv.Postgres(t), testsrv.ClickHouse(t)
	h := newHarnessWith(t, func(c *Config) { c.TestWarehouse = engines.Test })
	w := h.world()
	all := h.token(w, auth.AllScopes())
	p := w.p1.ID
	const wrong = "nope-7f3a9c21-wrong"
	for _, c := range []struct {
		srv       *testsrv.Server
		config    map[string]any
		complaint []string // one of them is in the engine's message
	}{
		{pg, map[string]any{"host": "127.0.0.1", "port": pg.Port, "database": pg.Database, "sslmode": "disable"}, []string{"password authentication failed"}},
		{ch, map[string]any{"url": ch.URL(), "database": ch.Database}, []string{"Wrong password", "Authentication failed"}},
	} {
		t.Run(c.srv.Kind, func(t *testing.T) {
			cred := func(name, secret string) string {
				return h.created(all, "/management/v1/warehouse-credentials", map[string]any{"project_id": p, "name": name, "type": "password", "username": c.srv.User, "secret": secret})
			}
			good, bad := cred(c.srv.Kind+"-good", c.srv.Password), cred(c.srv.Kind+"-bad", wrong)
			body := func(name, credID string) map[string]any {
				return map[string]any{"project_id": p, "name": name, "type": c.srv.Kind, "config": c.config, "credential_id": credID}
			}
			id := h.created(all, "/management/v1/warehouses", body(c.srv.Kind, good))
			h.run(t, scenario{method: "POST", url: "/management/v1/warehouses/" + id + "/test", auth: all, status: 200, contains: []string{`"ok":true`}})

			for _, r := range []*response{
				h.do("POST", "/management/v1/warehouses", all, body(c.srv.Kind+"-wrong", bad)),
				h.do("PUT", "/management/v1/warehouses/"+id, all, map[string]any{"credential_id": bad}),
			} {
				if r.status != 400 || r.env.Code != "validation_failed" || !strings.HasPrefix(r.env.Message, "cannot connect to the warehouse: "+c.srv.Kind+": ") {
					t.Fatalf("wrong password: %d %s", r.status, r.body)
				}
				found := false
				for _, s := range c.complaint {
					found = found || strings.Contains(r.env.Message, s)
				}
				if !found || strings.Contains(r.body, wrong) {
					t.Fatalf("message %q: want the engine's complaint %q and not the password", r.env.Message, c.complaint)
				}
			}
			h.run(t, scenario{method: "GET", url: "/management/v1/warehouses/" + id, auth: all, status: 200, contains: []string{`"version":1`, `"credential_id":"` + good}})
			h.run(t, scenario{method: "GET", url: "/management/v1/warehouses?project_id=" + p, auth: all, status: 200, notContains: []string{c.srv.Kind + "-wrong"}})

			// Rotating the credential to a wrong password is caught by the on-demand test.
			h.run(t, scenario{method: "PUT", url: "/management/v1/warehouse-credentials/" + good, auth: all, body: map[string]any{"secret": wrong}, status: 200})
			h.run(t, scenario{method: "POST", url: "/api/v1/warehouses/" + id + "/test", auth: bearer(w.ownerSes), status: 400, contains: []string{"cannot connect to the warehouse"}, notContains: []string{wrong}})
			if strings.Contains(h.logs.String(), wrong) || strings.Contains(h.logs.String(), c.srv.Password) {
				t.Fatal("a log line holds a password")
			}
		})
	}
}
