package http

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// scenario is one request and what must come back (pocketbase's ApiScenario).
type scenario struct {
	name        string
	method, url string
	auth        string
	body        any
	status      int
	contains    []string
	notContains []string
}

func (h *harness) run(t *testing.T, sc scenario) *response {
	t.Helper()
	r := h.do(sc.method, sc.url, sc.auth, sc.body)
	if r.status != sc.status {
		t.Fatalf("%s %s: status %d, want %d; body %s", sc.method, sc.url, r.status, sc.status, r.body)
	}
	r.checkEnvelope(t)
	for _, c := range sc.contains {
		if !strings.Contains(r.body, c) {
			t.Errorf("body lacks %q: %s", c, r.body)
		}
	}
	for _, c := range sc.notContains {
		if strings.Contains(r.body, c) {
			t.Errorf("body has %q: %s", c, r.body)
		}
	}
	return r
}

// TestManagementCredentialMatrix drives every project route of /management/v1 through each
// credential case of CONTRACTS §2 and checks the status, the envelope and the error code.
func TestManagementCredentialMatrix(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	type routeCase struct {
		name, method, url string
		body              any
		okStatus          int
		write             bool
	}
	routes := []routeCase{
		{"list", "GET", "/management/v1/projects?workspace_id=" + w.ws.ID, nil, 200, false},
		{"create", "POST", "/management/v1/projects", map[string]any{"workspace_id": w.ws.ID, "name": "New"}, 201, true},
		{"read", "GET", "/management/v1/projects/" + w.p1.ID, nil, 200, false},
		{"update", "PUT", "/management/v1/projects/" + w.p1.ID, map[string]any{"name": "Shop 2", "description": "renamed"}, 200, true},
	}
	unauth := []string{"none", "malformed", "unknown prefix", "wrong secret", "expired", "disabled", "revoked", "owner removed", "owner demoted with a write scope"}
	var cases []scenario
	for _, rt := range routes {
		for _, cred := range unauth {
			cases = append(cases, scenario{name: rt.name + "/" + cred, status: 401, contains: []string{`"code":"unauthenticated"`}})
		}
		ok := func(write bool) (int, []string) {
			if rt.write == write || !rt.write {
				return rt.okStatus, []string{`"error":false`}
			}
			return 403, []string{`"code":"forbidden"`}
		}
		st, c := ok(false)
		// read for write: a :read token on a write route is 403; on a read route it works.
		cases = append(cases,
			scenario{name: rt.name + "/missing scope", status: 403, contains: []string{`"code":"forbidden"`, "lacks the projects:"}},
			scenario{name: rt.name + "/read for write", status: st, contains: c},
			scenario{name: rt.name + "/other workspace", status: 404, contains: []string{`"code":"not_found"`}},
			scenario{name: rt.name + "/allowed", status: rt.okStatus, contains: []string{`"error":false`}},
		)
		// write only: :write does not imply :read.
		if rt.write {
			cases = append(cases, scenario{name: rt.name + "/write only", status: rt.okStatus})
		} else {
			cases = append(cases, scenario{name: rt.name + "/write only", status: 403, contains: []string{"lacks the projects:read"}})
		}
		switch rt.name {
		case "list": // the allowlist narrows the list instead
			cases = append(cases, scenario{name: rt.name + "/outside the allowlist", status: 200, contains: []string{w.p2.ID}, notContains: []string{w.p1.ID, w.restricted.ID}})
		case "create": // the workspace is visible; a project-restricted token may not create
			cases = append(cases, scenario{name: rt.name + "/outside the allowlist", status: 403, contains: []string{`"code":"forbidden"`}})
		default:
			cases = append(cases, scenario{name: rt.name + "/outside the allowlist", status: 404, contains: []string{`"code":"not_found"`}})
		}
	}
	for i, sc := range cases {
		rt := routes[i/(len(cases)/len(routes))]
		cred := sc.name[strings.Index(sc.name, "/")+1:]
		tok, ok := w.tokens[cred]
		if !ok {
			t.Fatalf("no token %q", cred)
		}
		sc.method, sc.url, sc.body = rt.method, rt.url, rt.body
		if tok != "" {
			sc.auth = bearer(tok)
		}
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
}

// TestManagementAccessRules covers the rest of the 403/404/400 surface of the project routes.
func TestManagementAccessRules(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	all := bearer(w.tokens["allowed"])
	member := bearer(w.tokens["member read"])
	for _, sc := range []scenario{
		{name: "member reads an inherited project", method: "GET", url: "/management/v1/projects/" + w.p1.ID, auth: member, status: 200},
		{name: "member cannot see a restricted project", method: "GET", url: "/management/v1/projects/" + w.restricted.ID, auth: member, status: 404, contains: []string{`"message":"project not found"`}},
		{name: "member list hides restricted projects", method: "GET", url: "/management/v1/projects?workspace_id=" + w.ws.ID, auth: member, status: 200, contains: []string{w.p1.ID}, notContains: []string{w.restricted.ID}},
		{name: "owner list shows restricted projects", method: "GET", url: "/management/v1/projects?workspace_id=" + w.ws.ID, auth: all, status: 200, contains: []string{w.restricted.ID}, notContains: []string{w.foreign.ID}},
		{name: "list without workspace_id", method: "GET", url: "/management/v1/projects", auth: all, status: 400, contains: []string{"workspace_id", `"code":"validation_failed"`}},
		{name: "list of another workspace", method: "GET", url: "/management/v1/projects?workspace_id=" + w.otherWS.ID, auth: all, status: 404, contains: []string{`"message":"workspace not found"`}},
		{name: "list bad limit", method: "GET", url: "/management/v1/projects?limit=500&workspace_id=" + w.ws.ID, auth: all, status: 400, contains: []string{`"field":"limit"`}},
		{name: "list bad cursor", method: "GET", url: "/management/v1/projects?cursor=%21%21&workspace_id=" + w.ws.ID, auth: all, status: 400, contains: []string{`"field":"cursor"`}},
		{name: "read unknown project", method: "GET", url: "/management/v1/projects/prj_01M7Z3K4RZF6A5ZVKG1EEG6WZZ", auth: all, status: 404, contains: []string{`"code":"not_found"`}},
		{name: "restricted token learns nothing of unknown ids", method: "GET", url: "/management/v1/projects/prj_nope", auth: bearer(w.tokens["outside the allowlist"]), status: 404, contains: []string{`"message":"project not found"`}},
		{name: "create without workspace", method: "POST", url: "/management/v1/projects", auth: all, body: map[string]any{"name": "x"}, status: 400, contains: []string{`"field":"workspace_id"`}},
		{name: "create in another workspace", method: "POST", url: "/management/v1/projects", auth: all, body: map[string]any{"name": "x", "workspace_id": w.otherWS.ID}, status: 404},
		{name: "create without name", method: "POST", url: "/management/v1/projects", auth: all, body: map[string]any{"workspace_id": w.ws.ID}, status: 400, contains: []string{`"field":"name"`}},
		{name: "create bad access mode", method: "POST", url: "/management/v1/projects", auth: all, body: map[string]any{"workspace_id": w.ws.ID, "name": "x", "access_mode": "public"}, status: 400, contains: []string{`"field":"access_mode"`}},
		{name: "create unknown field", method: "POST", url: "/management/v1/projects", auth: all, body: map[string]any{"workspace_id": w.ws.ID, "name": "x", "owner": "me"}, status: 400, contains: []string{`"field":"owner"`}},
		{name: "create wrong type", method: "POST", url: "/management/v1/projects", auth: all, body: map[string]any{"workspace_id": w.ws.ID, "name": 7}, status: 400, contains: []string{`"field":"name"`, "a string"}},
		{name: "create invalid JSON", method: "POST", url: "/management/v1/projects", auth: all, body: `{"workspace_id":`, status: 400, contains: []string{`"code":"invalid_json"`}},
		{name: "create array body", method: "POST", url: "/management/v1/projects", auth: all, body: `[]`, status: 400, contains: []string{`"code":"invalid_json"`}},
		{name: "create trailing data", method: "POST", url: "/management/v1/projects", auth: all, body: `{"workspace_id":"` + w.ws.ID + `","name":"x"} {}`, status: 400, contains: []string{`"code":"invalid_json"`}},
		{name: "update moves workspace", method: "PUT", url: "/management/v1/projects/" + w.p1.ID, auth: all, body: map[string]any{"workspace_id": w.otherWS.ID}, status: 400, contains: []string{`"field":"workspace_id"`}},
		{name: "update restricted project by owner", method: "PUT", url: "/management/v1/projects/" + w.restricted.ID, auth: all, body: map[string]any{"access_mode": "inherited"}, status: 200, contains: []string{`"access_mode":"inherited"`, `"version":2`}},
		{name: "delete is not a route", method: "DELETE", url: "/management/v1/projects/" + w.p1.ID, auth: all, status: 405, contains: []string{`"code":"method_not_allowed"`}},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	// Nothing in this table created a project.
	ps := h.do("GET", "/management/v1/projects?workspace_id="+w.ws.ID, all, nil)
	var list []map[string]any
	ps.data(t, &list)
	if len(list) != 3 {
		t.Fatalf("bad inputs changed state: %d projects", len(list))
	}
}

func TestCreateProjectWithRestrictedTokenIsForbiddenEvenWithGoodBody(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	for _, body := range []any{map[string]any{"workspace_id": w.ws.ID, "name": "x"}, `{"workspace_id":`, map[string]any{"name": "x"}} {
		r := h.do("POST", "/management/v1/projects", bearer(w.tokens["outside the allowlist"]), body)
		if r.status != 403 || !strings.Contains(r.env.Message, "workspace-wide") {
			t.Fatalf("%v: %d %s", body, r.status, r.body)
		}
	}
}

func TestIfMatchAndETag(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	all := bearer(w.tokens["allowed"])
	url := "/management/v1/projects/" + w.p1.ID
	r := h.do("GET", url, all, nil)
	if r.header.Get("ETag") != `"1"` {
		t.Fatalf("ETag %q", r.header.Get("ETag"))
	}
	for _, tc := range []struct {
		ifMatch string
		status  int
	}{{`"1"`, 200}, {`"1"`, 412}, {`"2"`, 200}, {"garbage", 412}, {"*", 200}} {
		r := h.do("PUT", url, all, map[string]any{"description": "v"}, "If-Match", tc.ifMatch)
		if r.status != tc.status {
			t.Fatalf("If-Match %s: %d %s", tc.ifMatch, r.status, r.body)
		}
		r.checkEnvelope(t)
	}
	r = h.do("GET", url, all, nil)
	if r.header.Get("ETag") != `"4"` {
		t.Fatalf("after three writes ETag %q", r.header.Get("ETag"))
	}
}

func TestProjectListPagination(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	all := bearer(w.tokens["allowed"])
	for i := 0; i < 5; i++ {
		if r := h.do("POST", "/management/v1/projects", all, map[string]any{"workspace_id": w.ws.ID, "name": fmt.Sprint("p", i)}); r.status != 201 {
			t.Fatal(r.body)
		}
	}
	seen := map[string]bool{}
	url := "/management/v1/projects?limit=3&workspace_id=" + w.ws.ID
	var pages int
	for {
		r := h.do("GET", url, all, nil)
		if r.status != 200 {
			t.Fatal(r.body)
		}
		var list []struct{ ID string }
		r.data(t, &list)
		for _, p := range list {
			if seen[p.ID] {
				t.Fatalf("%s listed twice", p.ID)
			}
			seen[p.ID] = true
		}
		pages++
		if r.env.NextCursor == "" {
			break
		}
		url = "/management/v1/projects?limit=3&workspace_id=" + w.ws.ID + "&cursor=" + r.env.NextCursor
	}
	if len(seen) != 8 || pages != 3 {
		t.Fatalf("saw %d projects in %d pages, want 8 in 3", len(seen), pages)
	}
}

func TestLastUsedIsBatched(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	for i := 0; i < 3; i++ {
		h.do("GET", "/management/v1/projects/"+w.p1.ID, bearer(w.tokens["allowed"]), nil)
	}
	r := h.do("GET", "/api/v1/management-tokens", bearer(w.ownerSes), nil)
	if strings.Contains(r.body, `"last_used_at":"`) {
		t.Fatal("last_used_at written per request")
	}
	if err := h.auth.FlushUsage(); err != nil {
		t.Fatal(err)
	}
	r = h.do("GET", "/api/v1/management-tokens", bearer(w.ownerSes), nil)
	if !strings.Contains(r.body, `"last_used_at":"2026-11-21T14:00:00Z"`) {
		t.Fatalf("last_used_at missing after flush: %s", r.body)
	}
}

// TestListCursorsAreBoundToTheirList: a cursor works only on the list that issued it (the
// same path below the API root and the same query parameters but limit); anything else,
// including an empty limit or cursor, is a 400 naming the parameter.
func TestListCursorsAreBoundToTheirList(t *testing.T) {
	h, w, all, _ := newResourceHarness(t)
	for _, p := range []string{w.p1.ID, w.p2.ID} {
		for _, key := range []string{"m1", "m2"} {
			h.created(all, "/management/v1/models", map[string]any{"project_id": p, "key": key})
		}
	}
	mg := "/management/v1"
	cursorOf := func(url string) string {
		t.Helper()
		r := h.do("GET", url, all, nil)
		if r.status != 200 || r.env.NextCursor == "" {
			t.Fatalf("%s: %d %s", url, r.status, r.body)
		}
		return r.env.NextCursor
	}
	projects := cursorOf(mg + "/projects?limit=1&workspace_id=" + w.ws.ID)
	models1 := cursorOf(mg + "/models?limit=1&project_id=" + w.p1.ID)
	active1 := cursorOf(mg + "/models?limit=1&status=active&project_id=" + w.p1.ID)
	// Flip one bit in the MAC, and separately in the last character (whose low bits a lax
	// base64 decoder would ignore).
	tampered := []byte(models1)
	tampered[5] ^= 1
	lastChar := []byte(models1)
	lastChar[len(lastChar)-1] ^= 1
	// The old format (base64 of a bare id) must no longer be accepted.
	bare := base64.RawURLEncoding.EncodeToString([]byte(w.p1.ID))
	bad := []string{`"field":"cursor"`, `"code":"validation_failed"`}
	for _, sc := range []scenario{
		{name: "same list", url: mg + "/models?limit=1&project_id=" + w.p1.ID + "&cursor=" + models1, status: 200},
		{name: "same list, other limit", url: mg + "/models?limit=5&project_id=" + w.p1.ID + "&cursor=" + models1, status: 200},
		{name: "same list, other root", url: "/api/v1/models?project_id=" + w.p1.ID + "&cursor=" + models1, auth: bearer(w.ownerSes), status: 200},
		{name: "same list, parameters reordered", url: mg + "/models?project_id=" + w.p1.ID + "&status=active&limit=1&cursor=" + active1, status: 200},
		{name: "another project", url: mg + "/models?limit=1&project_id=" + w.p2.ID + "&cursor=" + models1, status: 400, contains: bad},
		{name: "another filter", url: mg + "/models?limit=1&project_id=" + w.p1.ID + "&cursor=" + active1, status: 400, contains: bad},
		{name: "another route", url: mg + "/warehouses?project_id=" + w.p1.ID + "&cursor=" + models1, status: 400, contains: bad},
		{name: "another kind of list", url: mg + "/models?project_id=" + w.p1.ID + "&cursor=" + projects, status: 400, contains: bad},
		{name: "tampered", url: mg + "/models?limit=1&project_id=" + w.p1.ID + "&cursor=" + string(tampered), status: 400, contains: bad},
		{name: "tampered last character", url: mg + "/models?limit=1&project_id=" + w.p1.ID + "&cursor=" + string(lastChar), status: 400, contains: bad},
		{name: "made up", url: mg + "/projects?workspace_id=" + w.ws.ID + "&cursor=" + bare, status: 400, contains: bad},
		{name: "garbage", url: mg + "/projects?workspace_id=" + w.ws.ID + "&cursor=%21%21", status: 400, contains: bad},
		{name: "empty cursor", url: mg + "/projects?workspace_id=" + w.ws.ID + "&cursor=", status: 400, contains: bad},
		{name: "empty limit", url: mg + "/projects?workspace_id=" + w.ws.ID + "&limit=", status: 400, contains: []string{`"field":"limit"`}},
		{name: "zero limit", url: mg + "/models?project_id=" + w.p1.ID + "&limit=0", status: 400, contains: []string{`"field":"limit"`}},
	} {
		sc.method = "GET"
		if sc.auth == "" {
			sc.auth = all
		}
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
}

// TestIfMatchIsStrong: If-Match uses RFC 9110's strong comparison, so a weak tag never
// matches, even one naming the current version; the 412 names the current version, and
// a refused write changes nothing.
func TestIfMatchIsStrong(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	for _, target := range []struct{ url, body string }{
		{"/management/v1/projects/" + w.p1.ID, `{"description":"x"}`},
		{"/management/v1/models/" + f.model, `{"description":"x"}`},
	} {
		for _, tc := range []struct {
			ifMatch  string
			status   int
			contains string
		}{
			{`W/"1"`, 412, `such as \"1\"`},
			{`w/"1"`, 412, `such as \"1\"`},
			{`"01"`, 412, `such as \"1\"`},
			{`"1", "2"`, 412, `such as \"1\"`},
			{`1`, 412, `such as \"1\"`},
			{`"garbage"`, 412, `such as \"1\"`},
			{`"2"`, 412, `it is at version 1 (ETag \"1\"), not 2`},
		} {
			t.Run(target.url+" "+tc.ifMatch, func(t *testing.T) {
				before := h.do("GET", target.url, all, nil)
				r := h.do("PUT", target.url, all, target.body, "If-Match", tc.ifMatch)
				if r.status != tc.status || r.env.Code != "precondition_failed" || !strings.Contains(r.body, tc.contains) {
					t.Fatalf("If-Match %s: %d %s", tc.ifMatch, r.status, r.body)
				}
				if after := h.do("GET", target.url, all, nil); after.body != before.body {
					t.Fatalf("a 412 changed the resource:\n%s\n%s", before.body, after.body)
				}
			})
		}
	}
	// The strong form of the same version matches.
	h.run(t, scenario{method: "GET", url: "/management/v1/projects/" + w.p1.ID, auth: all, status: 200, contains: []string{`"version":1`}})
	if r := h.do("PUT", "/management/v1/projects/"+w.p1.ID, all, `{"description":"y"}`, "If-Match", `"1"`); r.status != 200 {
		t.Fatalf("strong match: %d %s", r.status, r.body)
	}
}
