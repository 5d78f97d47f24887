package http

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"lookout/auth"
)

func TestRegisterOnlyFirstUser(t *testing.T) {
	h := newHarness(t)
	body := map[string]any{"email": "ann@example.com", "password": "correct horse", "name": "Ann"}
	for _, sc := range []scenario{
		{name: "short password", method: "POST", url: "/api/v1/auth/register", body: map[string]any{"email": "ann@example.com", "password": "x"}, status: 400, contains: []string{`"field":"password"`}},
		{name: "bad email", method: "POST", url: "/api/v1/auth/register", body: map[string]any{"email": "ann", "password": "correct horse"}, status: 400, contains: []string{`"field":"email"`}},
		{name: "first", method: "POST", url: "/api/v1/auth/register", body: body, status: 201, contains: []string{`"token":"ey`, `"role":"owner"`}, notContains: []string{"password", "correct horse"}},
		{name: "second", method: "POST", url: "/api/v1/auth/register", body: map[string]any{"email": "bob@example.com", "password": "correct horse"}, status: 403, contains: []string{"registration is closed"}},
		{name: "login", method: "POST", url: "/api/v1/auth/login", body: map[string]any{"email": "ann@example.com", "password": "correct horse"}, status: 200, contains: []string{`"expires_at":"2026-11-22T00:00:00Z"`}},
		{name: "login wrong", method: "POST", url: "/api/v1/auth/login", body: map[string]any{"email": "ann@example.com", "password": "wrong horse"}, status: 401},
		{name: "login unknown", method: "POST", url: "/api/v1/auth/login", body: map[string]any{"email": "zed@example.com", "password": "wrong horse"}, status: 401},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
}

func TestLoginIsRateLimited(t *testing.T) {
	h := newHarness(t)
	var last *response
	for i := 0; i < 11; i++ {
		last = h.do("POST", "/api/v1/auth/login", "", map[string]any{"email": "x@example.com", "password": "wrong horse"})
	}
	if last.status != 429 || last.header.Get("Retry-After") == "" || last.env.Code != "rate_limited" {
		t.Fatalf("11th attempt: %d %s %v", last.status, last.body, last.header)
	}
	// A refused address is refused before its body is read: an oversized body gets the
	// 429, not the 413 that reading it would give.
	if r := h.do("POST", "/api/v1/auth/login", "", `{"email":"`+strings.Repeat("x", 3<<20)+`"}`); r.status != 429 {
		t.Fatalf("refused address with a large body: %d %.200s", r.status, r.body)
	}
	h.clock.Advance(time.Minute)
	if r := h.do("POST", "/api/v1/auth/login", "", map[string]any{"email": "x@example.com", "password": "wrong horse"}); r.status != 401 {
		t.Fatalf("after a minute: %d", r.status)
	}
}

// TestConsoleSessionMatrix drives the console routes of this issue through the session cases.
func TestConsoleSessionMatrix(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	loggedOut, _, _, _ := h.auth.Login("admin@example.com", w.password)
	if r := h.do("POST", "/api/v1/auth/logout", bearer(loggedOut), nil); r.status != 200 {
		t.Fatal(r.body)
	}
	forged := w.ownerSes[:len(w.ownerSes)-4] + "AAAA"
	cases := []struct {
		name, auth string
		want       map[string]int // route name -> status
	}{
		{"none", "", nil},
		{"malformed", "Bearer not.a.jwt", nil},
		{"forged signature", bearer(forged), nil},
		{"signed out", bearer(loggedOut), nil},
		{"management token on console", bearer(w.tokens["allowed"]), nil},
		{"owner", bearer(w.ownerSes), map[string]int{"me": 200, "workspaces": 200, "members": 200, "add member": 201, "list projects": 200, "create project": 201, "read project": 200, "update project": 200, "read restricted": 200, "tokens": 200}},
		{"member", bearer(w.memberSes), map[string]int{"me": 200, "workspaces": 200, "members": 200, "add member": 403, "list projects": 200, "create project": 403, "read project": 200, "update project": 403, "read restricted": 404, "tokens": 200}},
		// What a caller may not see answers 404, as if it did not exist.
		{"stranger", bearer(w.strangerSes), map[string]int{"me": 200, "workspaces": 200, "members": 404, "add member": 404, "list projects": 404, "create project": 404, "read project": 404, "update project": 404, "read restricted": 404, "tokens": 200}},
	}
	routes := []struct {
		name, method, url string
		body              any
	}{
		{"me", "GET", "/api/v1/me", nil},
		{"workspaces", "GET", "/api/v1/workspaces", nil},
		{"members", "GET", "/api/v1/workspaces/" + w.ws.ID + "/members", nil},
		{"add member", "POST", "/api/v1/workspaces/" + w.ws.ID + "/members", map[string]any{"email": "new" + "@example.com", "password": "correct horse", "role": "member"}},
		{"list projects", "GET", "/api/v1/projects?workspace_id=" + w.ws.ID, nil},
		{"create project", "POST", "/api/v1/projects", map[string]any{"workspace_id": w.ws.ID, "name": "Console"}},
		{"read project", "GET", "/api/v1/projects/" + w.p1.ID, nil},
		{"update project", "PUT", "/api/v1/projects/" + w.p1.ID, map[string]any{"description": "x"}},
		{"read restricted", "GET", "/api/v1/projects/" + w.restricted.ID, nil},
		{"tokens", "GET", "/api/v1/management-tokens", nil},
	}
	for _, c := range cases {
		for _, rt := range routes {
			want := 401
			if c.want != nil {
				want = c.want[rt.name]
			}
			t.Run(c.name+"/"+rt.name, func(t *testing.T) {
				h.run(t, scenario{method: rt.method, url: rt.url, auth: c.auth, body: rt.body, status: want})
			})
		}
	}
}

func TestMembersAndRoles(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	owner, admin := bearer(w.ownerSes), bearer(w.adminSes)
	base := "/api/v1/workspaces/" + w.ws.ID + "/members"
	for _, sc := range []scenario{
		{name: "admin cannot add an owner", method: "POST", url: base, auth: admin, body: map[string]any{"email": "o2@example.com", "password": "correct horse", "role": "owner"}, status: 403},
		{name: "new account needs a password", method: "POST", url: base, auth: admin, body: map[string]any{"email": "np@example.com", "role": "member"}, status: 400, contains: []string{`"field":"password"`}},
		{name: "existing account keeps its password", method: "POST", url: base, auth: owner, body: map[string]any{"email": "stranger@example.com", "password": "another one", "role": "member"}, status: 400},
		{name: "existing account joins", method: "POST", url: base, auth: owner, body: map[string]any{"email": "stranger@example.com", "role": "member"}, status: 201, contains: []string{w.stranger.ID}},
		{name: "twice is a conflict", method: "POST", url: base, auth: owner, body: map[string]any{"email": "stranger@example.com", "role": "member"}, status: 409},
		{name: "admin cannot change roles", method: "PUT", url: base + "/" + w.member.ID, auth: admin, body: map[string]any{"role": "admin"}, status: 403},
		{name: "owner promotes", method: "PUT", url: base + "/" + w.member.ID, auth: owner, body: map[string]any{"role": "admin"}, status: 200, contains: []string{`"role":"admin"`}},
		{name: "bad role", method: "PUT", url: base + "/" + w.member.ID, auth: owner, body: map[string]any{"role": "god"}, status: 400},
		{name: "last owner stays", method: "PUT", url: base + "/" + w.owner.ID, auth: owner, body: map[string]any{"role": "member"}, status: 409},
		{name: "admin cannot remove owner", method: "DELETE", url: base + "/" + w.owner.ID, auth: admin, status: 403},
		{name: "remove unknown", method: "DELETE", url: base + "/usr_nope", auth: owner, status: 404},
		{name: "admin removes member", method: "DELETE", url: base + "/" + w.stranger.ID, auth: admin, status: 200, contains: []string{`"deleted":true`}},
		{name: "create workspace", method: "POST", url: "/api/v1/workspaces", auth: admin, body: map[string]any{"name": "Side"}, status: 201, contains: []string{`"role":"owner"`}},
		{name: "create workspace without name", method: "POST", url: "/api/v1/workspaces", auth: admin, body: map[string]any{}, status: 400},
		{name: "list project members", method: "GET", url: "/api/v1/projects/" + w.restricted.ID + "/members", auth: owner, status: 200},
		{name: "list a member on a restricted project", method: "PUT", url: "/api/v1/projects/" + w.restricted.ID + "/members", auth: owner, body: map[string]any{"user_ids": []string{w.member.ID}}, status: 200, contains: []string{w.member.ID}},
		{name: "listed member reads restricted", method: "GET", url: "/api/v1/projects/" + w.restricted.ID, auth: bearer(w.memberSes), status: 200},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
}

func TestManagementTokenLifecycle(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	owner, member := bearer(w.ownerSes), bearer(w.memberSes)
	r := h.run(t, scenario{method: "POST", url: "/api/v1/management-tokens", auth: owner, status: 201,
		body:     map[string]any{"name": "deploy", "workspace_id": w.ws.ID, "scopes": []string{"projects:read"}, "expires_at": "2027-01-01T00:00:00Z"},
		contains: []string{`"token":"lk_mgmt_`, `"prefix":"`, `"expires_at":"2027-01-01T00:00:00Z"`, `"enabled":true`}})
	var created struct {
		ID, Token string
	}
	r.data(t, &created)
	if r.header.Get("Cache-Control") != "no-store" {
		t.Error("token response may be cached")
	}
	tok := bearer(created.Token)
	project := "/management/v1/projects/" + w.p1.ID
	for _, sc := range []scenario{
		{name: "works", method: "GET", url: project, auth: tok, status: 200},
		{name: "list never shows secrets", method: "GET", url: "/api/v1/management-tokens", auth: owner, status: 200, contains: []string{created.ID}, notContains: []string{created.Token[20:], "secret_hash"}},
		{name: "read", method: "GET", url: "/api/v1/management-tokens/" + created.ID, auth: owner, status: 200, notContains: []string{created.Token[20:]}},
		{name: "another user cannot see it", method: "GET", url: "/api/v1/management-tokens/" + created.ID, auth: member, status: 404},
		{name: "another user cannot disable it", method: "POST", url: "/api/v1/management-tokens/" + created.ID + "/disable", auth: member, status: 404},
		{name: "disable", method: "POST", url: "/api/v1/management-tokens/" + created.ID + "/disable", auth: owner, status: 200, contains: []string{`"enabled":false`}},
		{name: "disabled fails", method: "GET", url: project, auth: tok, status: 401, contains: []string{"disabled"}},
		{name: "enable", method: "POST", url: "/api/v1/management-tokens/" + created.ID + "/enable", auth: owner, status: 200, contains: []string{`"enabled":true`}},
		{name: "works again", method: "GET", url: project, auth: tok, status: 200},
		{name: "revoke", method: "DELETE", url: "/api/v1/management-tokens/" + created.ID, auth: owner, status: 200, contains: []string{`"revoked_reason":"revoked"`}},
		{name: "revoked fails", method: "GET", url: project, auth: tok, status: 401, contains: []string{"revoked"}},
		{name: "revoked cannot be enabled", method: "POST", url: "/api/v1/management-tokens/" + created.ID + "/enable", auth: owner, status: 409},
		{name: "member write token", method: "POST", url: "/api/v1/management-tokens", auth: member, body: map[string]any{"name": "x", "workspace_id": w.ws.ID, "scopes": []string{"projects:write"}}, status: 403},
		{name: "member read token", method: "POST", url: "/api/v1/management-tokens", auth: member, body: map[string]any{"name": "x", "workspace_id": w.ws.ID, "scopes": []string{"projects:read"}}, status: 201},
		{name: "unknown scope", method: "POST", url: "/api/v1/management-tokens", auth: owner, body: map[string]any{"name": "x", "workspace_id": w.ws.ID, "scopes": []string{"everything"}}, status: 400, contains: []string{`"field":"scopes"`}},
		{name: "past expiry", method: "POST", url: "/api/v1/management-tokens", auth: owner, body: map[string]any{"name": "x", "workspace_id": w.ws.ID, "scopes": []string{"projects:read"}, "expires_at": "2020-01-01T00:00:00Z"}, status: 400, contains: []string{`"field":"expires_at"`}},
		{name: "bad expiry", method: "POST", url: "/api/v1/management-tokens", auth: owner, body: map[string]any{"name": "x", "workspace_id": w.ws.ID, "scopes": []string{"projects:read"}, "expires_at": "tomorrow"}, status: 400},
		{name: "stranger's workspace", method: "POST", url: "/api/v1/management-tokens", auth: owner, body: map[string]any{"name": "x", "workspace_id": w.otherWS.ID, "scopes": []string{"projects:read"}}, status: 403},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
}

func TestDemotedOwnerTokenStaysRevokedAfterPromotion(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	admin := bearer(w.adminSes)
	r := h.do("POST", "/api/v1/management-tokens", admin, map[string]any{"name": "w", "workspace_id": w.ws.ID, "scopes": []string{"projects:read", "projects:write"}})
	var created struct{ Token string }
	r.data(t, &created)
	ownerP := &auth.Principal{UserID: w.owner.ID}
	if _, err := h.auth.SetRole(ownerP, w.ws.ID, w.admin.ID, "member"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.SetRole(ownerP, w.ws.ID, w.admin.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	r = h.do("GET", "/management/v1/projects/"+w.p1.ID, bearer(created.Token), nil)
	if r.status != 401 || !strings.Contains(r.env.Message, "revoked") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestEnvelopeEverywhere(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	all := bearer(w.tokens["allowed"])
	big := `{"workspace_id":"` + w.ws.ID + `","name":"x","description":"` + strings.Repeat("a", 2<<20) + `"}`
	for _, sc := range []scenario{
		{name: "unknown route", method: "GET", url: "/api/v1/nothing", status: 404, contains: []string{`"code":"not_found"`}},
		{name: "root is the console; other methods keep the envelope", method: "DELETE", url: "/", status: 404, contains: []string{`"code":"not_found"`}},
		{name: "trailing slash is not redirected", method: "GET", url: "/management/v1/projects/", auth: all, status: 404},
		{name: "wrong method", method: "PATCH", url: "/management/v1/projects", auth: all, status: 405, contains: []string{`"code":"method_not_allowed"`}},
		{name: "too large", method: "POST", url: "/management/v1/projects", auth: all, body: big, status: 413, contains: []string{`"code":"too_large"`}},
		{name: "healthz", method: "GET", url: "/healthz", status: 200, contains: []string{`"status":"ok"`}},
		{name: "readyz", method: "GET", url: "/readyz", status: 200},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	r := h.do("PATCH", "/management/v1/projects", all, nil)
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
		t.Fatalf("Allow %q", allow)
	}
	// 415: a JSON route with another media type.
	req, _ := http.NewRequest("POST", h.url+"/management/v1/projects", strings.NewReader(`{"name":"x"}`))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Authorization", all)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 415 {
		t.Fatalf("text/plain body: %d", resp.StatusCode)
	}
	// 413 by Content-Length alone, before reading anything.
	req, _ = http.NewRequest("POST", h.url+"/management/v1/projects", strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", all)
	resp, _ = http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("big body: %d", resp.StatusCode)
	}
}

func TestPanicsAnswerWithTheEnvelope(t *testing.T) {
	h := newHarness(t)
	m := h.srv.newMux("test")
	m.handle("GET", "/boom", route{}, func(w http.ResponseWriter, r *http.Request, c *call) error { panic("secret internals") })
	rec := httptest.NewRecorder()
	req, _ := http.NewRequest("GET", "/boom", nil)
	m.r.ServeHTTP(rec, req)
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"code":"internal"`) || strings.Contains(rec.Body.String(), "secret internals") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestMetrics(t *testing.T) {
	h := newHarness(t)
	h.do("GET", "/healthz", "", nil)
	h.do("GET", "/api/v1/nope", "", nil)
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := new(strings.Builder)
	_, _ = io.Copy(buf, resp.Body)
	for _, want := range []string{
		`lookout_http_requests_total{listener="console",method="GET",route="/healthz",status="200"} 1`,
		`lookout_http_requests_total{listener="console",method="GET",route="unmatched",status="404"} 1`,
		`lookout_http_request_duration_seconds_bucket{listener="console",method="GET",route="/healthz",status="200",le="+Inf"} 1`,
		"lookout_store_size_bytes ",
		"go_goroutines ",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestSecretsNeverLogged(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	h.do("POST", "/api/v1/auth/login", "", map[string]any{"email": "owner@example.com", "password": w.password})
	r := h.do("POST", "/api/v1/management-tokens", bearer(w.ownerSes), map[string]any{"name": "x", "workspace_id": w.ws.ID, "scopes": []string{"projects:read"}})
	var created struct{ Token string }
	r.data(t, &created)
	h.do("GET", "/management/v1/projects/"+w.p1.ID, bearer(created.Token), nil)
	h.do("GET", "/management/v1/projects/"+w.p1.ID, bearer(created.Token[:len(created.Token)-1]+"x"), nil)
	logs := h.logs.String()
	if !strings.Contains(logs, "request") {
		t.Fatal("debug request logs missing; the test would prove nothing")
	}
	for _, secret := range []string{w.password, created.Token[20:], w.ownerSes} {
		if strings.Contains(logs, secret) {
			t.Fatalf("a secret reached the log")
		}
	}
}
