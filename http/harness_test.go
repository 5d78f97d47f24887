package http

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lookout/auth"
	"lookout/ingest"
	"lookout/internal/testclock"
	"lookout/query"
	"lookout/store"
	"lookout/warehouse"
)

// harness is a real Server over a real bbolt file behind httptest, with a fake clock.
type harness struct {
	t     testing.TB
	st    *store.Store
	auth  *auth.Service
	srv   *Server
	clock *testclock.Clock
	url   string
	logs  *bytes.Buffer
	dir   string // holds lookout.db

	ingestURL string // the ingest listener, over TLS that requests client certificates
	ingestTLS *httptest.Server
	records   *warehouse.RecordStore
	ingest    *ingest.Service

	queryURL string // the query listener, over TLS like the ingest one
	queryTLS *httptest.Server
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessWith(t, nil)
}

// newHarnessWith is newHarness with a change to the Server's Config (a metrics token, short
// read deadlines) before the Server is built.
func newHarnessWith(t testing.TB, configure func(*Config)) *harness {
	t.Helper()
	c := testclock.New()
	sealer, err := store.NewSealer([]byte("fedcba9876543210fedcba9876543210"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "lookout.db"), store.Options{Now: c.Now, Sealer: sealer, QueryRules: query.Rules{}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := auth.New(st, []byte("0123456789abcdef0123456789abcdef"), c.Now, log)
	records, err := warehouse.OpenRecordStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ing := ingest.New(st, records, c.Now, log)
	cfg := Config{Store: st, Auth: a, Log: log, Now: c.Now, Version: "test", Ingest: ing, Records: records, WSDiscover: true,
		Query: &query.Service{Store: st, Records: records, Now: c.Now, Caps: query.DefaultCaps}}
	if configure != nil {
		configure(&cfg)
	}
	s := NewServer(cfg)
	ts := httptest.NewServer(s.ConsoleHandler())
	its := httptest.NewUnstartedServer(s.IngestHandler())
	its.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	its.StartTLS()
	s.SetIngestURL(its.URL)
	qts := httptest.NewUnstartedServer(s.QueryHandler())
	qts.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	qts.StartTLS()
	t.Cleanup(func() {
		ts.Close()
		its.Close()
		qts.Close()
		ing.Close(nil)
		if p, err := records.Check(); err != nil || len(p) > 0 {
			t.Errorf("warehouse check: %v %v", p, err)
		}
		records.Close()
		if p, err := st.Check(); err != nil || len(p) > 0 {
			t.Errorf("check: %v %v", p, err)
		}
		st.Close()
	})
	return &harness{t: t, st: st, auth: a, srv: s, clock: c, url: ts.URL, logs: logs, dir: dir, ingestURL: its.URL, ingestTLS: its, records: records, ingest: ing,
		queryURL: qts.URL, queryTLS: qts}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// response is one answered request.
type response struct {
	status int
	header http.Header
	body   string
	env    struct {
		Error      *bool              `json:"error"`
		Message    string             `json:"message"`
		Code       string             `json:"code"`
		Fields     []store.FieldError `json:"fields"`
		Data       json.RawMessage    `json:"data"`
		NextCursor string             `json:"next_cursor"`
	}
}

// do sends a request; body may be nil, a string (sent as is) or a value (JSON-encoded).
// authz is the whole Authorization header value ("" for none). It fails the test on a
// transport error, so call it only from the test's goroutine; other goroutines use try.
func (h *harness) do(method, path, authz string, body any, hdr ...string) *response {
	h.t.Helper()
	r, err := h.try(method, path, authz, body, hdr...)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// try is do that returns its failure instead of failing the test: safe from any goroutine
// (t.Fatal must only be called from the test's own goroutine).
func (h *harness) try(method, path, authz string, body any, hdr ...string) (*response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := &response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.env); err != nil {
			return nil, fmt.Errorf("%s %s: body is not JSON: %q", method, path, raw)
		}
	}
	return r, nil
}

// data decodes the envelope's data into v.
func (r *response) data(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.env.Data, v); err != nil {
		t.Fatalf("data %s: %v", r.env.Data, err)
	}
}

// checkEnvelope asserts the response carries the right envelope for its status.
func (r *response) checkEnvelope(t *testing.T) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q, body %q", ct, r.body)
	}
	if r.env.Error == nil {
		t.Fatalf("no error field: %s", r.body)
	}
	if r.status >= 400 {
		if !*r.env.Error || r.env.Message == "" || r.env.Code == "" {
			t.Fatalf("bad error envelope: %s", r.body)
		}
	} else if *r.env.Error || r.env.Data == nil {
		t.Fatalf("bad success envelope: %s", r.body)
	}
}

func bearer(tok string) string { return "Bearer " + tok }

// world is a populated workspace: people in every role, projects and tokens of every kind.
type world struct {
	ws, otherWS                    store.Workspace
	owner, admin, member, stranger store.User
	ownerSes, adminSes, memberSes  string
	strangerSes                    string
	p1, p2, restricted, foreign    store.Project
	tokens                         map[string]string
	password                       string
}

func (h *harness) world() *world {
	t := h.t
	t.Helper()
	w := &world{tokens: map[string]string{}, password: "correct horse battery"}
	var err error
	w.owner, w.ws, err = auth.CreateOwner(h.st, "owner@example.com", w.password, "Owner")
	if err != nil {
		t.Fatal(err)
	}
	var strangerWS store.Workspace
	w.stranger, strangerWS, err = auth.CreateOwner(h.st, "stranger@example.com", w.password, "Stranger")
	if err != nil {
		t.Fatal(err)
	}
	w.otherWS = strangerWS
	ownerP := &auth.Principal{UserID: w.owner.ID}
	for _, m := range []struct {
		email, role string
		u           *store.User
	}{{"admin@example.com", store.RoleAdmin, &w.admin}, {"member@example.com", store.RoleMember, &w.member}} {
		mem, err := h.auth.AddMember(ownerP, w.ws.ID, auth.MemberRequest{Email: m.email, Password: w.password, Role: m.role})
		if err != nil {
			t.Fatal(err)
		}
		*m.u, _ = h.st.User(mem.UserID)
	}
	mkp := func(ws, name, mode string) store.Project {
		p, err := h.st.CreateProject(store.ProjectInput{WorkspaceID: &ws, Name: &name, AccessMode: &mode})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	w.p1 = mkp(w.ws.ID, "Shop", store.AccessInherited)
	w.p2 = mkp(w.ws.ID, "Blog", store.AccessInherited)
	w.restricted = mkp(w.ws.ID, "Payroll", store.AccessRestricted)
	w.foreign = mkp(w.otherWS.ID, "Elsewhere", store.AccessInherited)

	login := func(email string) string {
		tok, _, _, err := h.auth.Login(email, w.password)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	w.ownerSes, w.adminSes, w.memberSes, w.strangerSes = login("owner@example.com"), login("admin@example.com"), login("member@example.com"), login("stranger@example.com")

	mk := func(name string, user store.User, ws string, req auth.TokenRequest) store.ManagementToken {
		req.Name, req.WorkspaceID = name, ws
		tok, rec, err := auth.CreateToken(h.st, user.ID, req)
		if err != nil {
			t.Fatalf("token %s: %v", name, err)
		}
		w.tokens[name] = tok
		return rec
	}
	rw := []string{"projects:read", "projects:write"}
	mk("allowed", w.owner, w.ws.ID, auth.TokenRequest{Scopes: rw})
	exp := h.clock.Now().Add(time.Hour)
	mk("expired", w.owner, w.ws.ID, auth.TokenRequest{Scopes: rw, ExpiresAt: &exp})
	d := mk("disabled", w.owner, w.ws.ID, auth.TokenRequest{Scopes: rw})
	if _, err := h.st.SetTokenEnabled(w.owner.ID, d.ID, false); err != nil {
		t.Fatal(err)
	}
	r := mk("revoked", w.owner, w.ws.ID, auth.TokenRequest{Scopes: rw})
	if _, err := h.st.RevokeToken(w.owner.ID, r.ID, store.ReasonRevoked); err != nil {
		t.Fatal(err)
	}
	mk("missing scope", w.owner, w.ws.ID, auth.TokenRequest{Scopes: []string{"models:read", "models:write"}})
	mk("read for write", w.owner, w.ws.ID, auth.TokenRequest{Scopes: []string{"projects:read"}})
	mk("write only", w.owner, w.ws.ID, auth.TokenRequest{Scopes: []string{"projects:write"}})
	mk("other workspace", w.stranger, w.otherWS.ID, auth.TokenRequest{Scopes: rw})
	mk("outside the allowlist", w.owner, w.ws.ID, auth.TokenRequest{Scopes: rw, ProjectIDs: []string{w.p2.ID}})
	mk("member read", w.member, w.ws.ID, auth.TokenRequest{Scopes: []string{"projects:read"}})

	// Owner demoted: a second admin whose write-scoped token dies with the demotion.
	demoted, err := h.auth.AddMember(ownerP, w.ws.ID, auth.MemberRequest{Email: "demoted@example.com", Password: w.password, Role: store.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	du, _ := h.st.User(demoted.UserID)
	mk("owner demoted with a write scope", du, w.ws.ID, auth.TokenRequest{Scopes: rw})
	if _, err := h.auth.SetRole(ownerP, w.ws.ID, du.ID, store.RoleMember); err != nil {
		t.Fatal(err)
	}
	// A second admin is removed (the first stays for console tests).
	rem, err := h.auth.AddMember(ownerP, w.ws.ID, auth.MemberRequest{Email: "removed@example.com", Password: w.password, Role: store.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	ru, _ := h.st.User(rem.UserID)
	mk("owner removed", ru, w.ws.ID, auth.TokenRequest{Scopes: []string{"projects:read"}})
	if err := h.auth.RemoveMember(ownerP, w.ws.ID, ru.ID); err != nil {
		t.Fatal(err)
	}

	_, prefix, _ := auth.NewManagementToken()
	w.tokens["none"] = ""
	w.tokens["malformed"] = "lk_mgmt_not-a-token"
	w.tokens["unknown prefix"] = auth.TokenPrefix + prefix + "." + strings.Repeat("A", 42) + "E"
	allowed := w.tokens["allowed"]
	w.tokens["wrong secret"] = allowed[:len(allowed)-43] + strings.Repeat("B", 42) + "E"

	h.clock.Advance(2 * time.Hour) // "expired" is now past its expiry
	return w
}
