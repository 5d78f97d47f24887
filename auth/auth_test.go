package auth

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lookout/internal/testclock"
	"lookout/store"
)

func newTest(t testing.TB) (*Service, *store.Store, *testclock.Clock) {
	t.Helper()
	c := testclock.New()
	st, err := store.Open(filepath.Join(t.TempDir(), "lookout.db"), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p, err := st.Check(); err != nil || len(p) > 0 {
			t.Errorf("check: %v %v", p, err)
		}
		st.Close()
	})
	return New(st, []byte("0123456789abcdef0123456789abcdef"), c.Now, nil), st, c
}

func TestPasswordHash(t *testing.T) {
	h, err := HashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash format %q", h)
	}
	if !VerifyPassword(h, "correct horse") || VerifyPassword(h, "correct horsE") {
		t.Fatal("verify wrong")
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=1,t=1,p=1$AA$AA", "$argon2id$v=19$m=999999999,t=1,p=1$AA$AA", h + "$"} {
		if VerifyPassword(bad, "x") {
			t.Errorf("accepted hash %q", bad)
		}
	}
	if err := ValidatePassword("short"); !store.IsCode(err, store.CodeValidation) {
		t.Fatal("short password accepted")
	}
}

func TestParseManagementToken(t *testing.T) {
	tok, prefix, secret := NewManagementToken()
	p, s, ok := ParseManagementToken(tok)
	if !ok || p != prefix || s != secret {
		t.Fatalf("round trip of %q failed", tok)
	}
	for _, bad := range []string{
		"", "lk_mgmt_", "lk_ak_" + tok[8:], tok + "x", tok[:len(tok)-1],
		"lk_mgmt_ABCDEFGHIJKL." + secret, "lk_mgmt_abcdefghijkl_" + secret,
		"lk_mgmt_abcdefghijkl." + strings.Repeat("=", 43), "lk_mgmt_abcdefghijk." + secret + "A",
	} {
		if _, _, ok := ParseManagementToken(bad); ok {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParseManagementToken(f *testing.F) {
	tok, _, _ := NewManagementToken()
	for _, s := range []string{tok, "", "lk_mgmt_abc.def", "lk_mgmt_abcdefghijkl." + strings.Repeat("A", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		prefix, secret, ok := ParseManagementToken(s)
		if !ok {
			return
		}
		if TokenPrefix+prefix+"."+secret != s || len(prefix) != 12 || len(secret) != 43 {
			t.Fatalf("parsed %q into %q %q", s, prefix, secret)
		}
	})
}

func TestAuthenticateTokenCases(t *testing.T) {
	svc, st, c := newTest(t)
	o, ws, err := CreateOwner(st, "o@example.com", "password1", "O")
	if err != nil {
		t.Fatal(err)
	}
	mk := func(req TokenRequest) (string, store.ManagementToken) {
		req.WorkspaceID, req.Name = ws.ID, "t"
		tok, rec, err := CreateToken(st, o.ID, req)
		if err != nil {
			t.Fatal(err)
		}
		return tok, rec
	}
	good, goodRec := mk(TokenRequest{Scopes: []string{"projects:read"}})
	exp := c.Now().Add(time.Hour)
	expiring, _ := mk(TokenRequest{Scopes: []string{"projects:read"}, ExpiresAt: &exp})
	disabled, dRec := mk(TokenRequest{Scopes: []string{"projects:read"}})
	st.SetTokenEnabled(o.ID, dRec.ID, false)
	revoked, rRec := mk(TokenRequest{Scopes: []string{"projects:read"}})
	st.RevokeToken(o.ID, rRec.ID, store.ReasonRevoked)
	_, prefix, _ := NewManagementToken()
	wrongSecret := TokenPrefix + goodRec.Prefix + "." + strings.Repeat("A", 42) + "E"

	c.Advance(2 * time.Hour)
	for _, tc := range []struct {
		name, header, want string
	}{
		{"none", "", "missing"},
		{"basic", "Basic abc", "missing"},
		{"malformed", "Bearer lk_mgmt_nope", "malformed"},
		{"unknown prefix", "Bearer " + TokenPrefix + prefix + "." + strings.Repeat("A", 42) + "E", "invalid Management Token"},
		{"wrong secret", "Bearer " + wrongSecret, "invalid Management Token"},
		{"expired", "Bearer " + expiring, "expired"},
		{"disabled", "Bearer " + disabled, "disabled"},
		{"revoked", "Bearer " + revoked, "revoked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.AuthenticateToken(tc.header)
			if !store.IsCode(err, store.CodeUnauthenticated) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want unauthenticated containing %q", err, tc.want)
			}
		})
	}
	p, err := svc.AuthenticateToken("bearer " + good)
	if err != nil || p.UserID != o.ID || p.Role != store.RoleOwner {
		t.Fatalf("good token: %+v %v", p, err)
	}
	if err := svc.FlushUsage(); err != nil {
		t.Fatal(err)
	}
	got, _ := st.Token(o.ID, goodRec.ID)
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(c.Now()) {
		t.Fatalf("last_used_at = %v", got.LastUsedAt)
	}
}

func TestLoginSameAnswerForUnknownAndWrong(t *testing.T) {
	svc, st, _ := newTest(t)
	if _, _, err := CreateOwner(st, "o@example.com", "password1", "O"); err != nil {
		t.Fatal(err)
	}
	_, _, _, e1 := svc.Login("nobody@example.com", "password1")
	_, _, _, e2 := svc.Login("o@example.com", "wrong-password")
	if e1 == nil || e2 == nil || e1.Error() != e2.Error() {
		t.Fatalf("answers differ: %v / %v", e1, e2)
	}
	tok, _, _, err := svc.Login("O@Example.com", "password1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.AuthenticateSession("Bearer " + tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Logout(p); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AuthenticateSession("Bearer " + tok); !store.IsCode(err, store.CodeUnauthenticated) {
		t.Fatalf("session after logout: %v", err)
	}
}

func TestSessionExpiresAndForgedRejected(t *testing.T) {
	svc, st, c := newTest(t)
	if _, _, err := CreateOwner(st, "o@example.com", "password1", "O"); err != nil {
		t.Fatal(err)
	}
	tok, _, _, _ := svc.Login("o@example.com", "password1")
	forger := New(st, []byte("another key, another key, another"), c.Now, nil)
	sid, uid, _ := svc.signer.verify(tok)
	forged, _ := forger.signer.sign(sid, uid, c.Now().Add(time.Hour))
	if _, err := svc.AuthenticateSession("Bearer " + forged); err == nil {
		t.Fatal("accepted a JWT signed with another key")
	}
	c.Advance(SessionTTL + time.Second)
	if _, err := svc.AuthenticateSession("Bearer " + tok); err == nil {
		t.Fatal("accepted an expired session")
	}
}

func TestCreateTokenValidation(t *testing.T) {
	_, st, _ := newTest(t)
	o, ws, _ := CreateOwner(st, "o@example.com", "password1", "O")
	for _, tc := range []struct {
		name string
		req  TokenRequest
		code string
	}{
		{"no scopes", TokenRequest{Name: "x", WorkspaceID: ws.ID}, store.CodeValidation},
		{"unknown scope", TokenRequest{Name: "x", WorkspaceID: ws.ID, Scopes: []string{"root"}}, store.CodeValidation},
		{"no name", TokenRequest{WorkspaceID: ws.ID, Scopes: []string{"projects:read"}}, store.CodeValidation},
		{"foreign project", TokenRequest{Name: "x", WorkspaceID: ws.ID, Scopes: []string{"projects:read"}, ProjectIDs: []string{"prj_x"}}, store.CodeValidation},
		{"unknown workspace", TokenRequest{Name: "x", WorkspaceID: "ws_x", Scopes: []string{"projects:read"}}, store.CodeNotFound},
	} {
		if _, _, err := CreateToken(st, o.ID, tc.req); !store.IsCode(err, tc.code) {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.code)
		}
	}
	_, rec, err := CreateToken(st, o.ID, TokenRequest{Name: "x", WorkspaceID: ws.ID, Scopes: []string{"projects:write", "projects:read", "projects:read"}})
	if err != nil || strings.Join(rec.Scopes, ",") != "projects:read,projects:write" {
		t.Fatalf("scopes not deduplicated and sorted: %v %v", rec.Scopes, err)
	}
}
