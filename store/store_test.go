package store

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"lookout/internal/testclock"
)

// openTest opens a store on a real file under t.TempDir and checks it on cleanup.
func openTest(t *testing.T) (*Store, *testclock.Clock) {
	t.Helper()
	c := testclock.New()
	s, err := Open(filepath.Join(t.TempDir(), "lookout.db"), Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		problems, err := s.Check()
		if err != nil || len(problems) > 0 {
			t.Errorf("check: %v %v", err, problems)
		}
		s.Close()
	})
	return s, c
}

func owner(t *testing.T, s *Store, email string) (User, Workspace) {
	t.Helper()
	u, ws, err := s.RegisterOwner(NewUser{Email: email, Name: "O", PasswordHash: "x"}, "W", false)
	if err != nil {
		t.Fatal(err)
	}
	return u, ws
}

func ptr[T any](v T) *T { return &v }

func TestOpenRefusesNewerFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lookout.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(schemaVersionKey, []byte{0, 0, 0, 0, 0, 0, 0, 99})
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(path, Options{})
	if _, ok := err.(ErrNewerFile); !ok {
		t.Fatalf("Open of a newer file: got %v, want ErrNewerFile", err)
	}
}

func TestOpenLockedFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lookout.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = Open(path, Options{LockTimeout: 100 * time.Millisecond})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("in use by another process")) {
		t.Fatalf("second open: got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("second open hung")
	}
}

func TestIDsAreSortableAndUnique(t *testing.T) {
	var g ids
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []string
	seen := map[string]bool{}
	for i := 0; i < 10000; i++ {
		if i%1000 == 0 {
			now = now.Add(time.Millisecond)
		}
		id := g.next("prj_", now)
		if len(id) != 4+26 || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		seen[id] = true
		out = append(out, id)
	}
	if !sort.StringsAreSorted(out) {
		t.Fatal("ids are not in creation order")
	}
}

// decodeULID reverses encodeULID.
func decodeULID(t *testing.T, s string) (hi, lo uint64) {
	t.Helper()
	for _, c := range []byte(s) {
		v := strings.IndexByte(crockford, c)
		if v < 0 {
			t.Fatalf("%q is not base32", s)
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(v)
	}
	return hi, lo
}

// TestIDsAreNotGuessableFromNeighbours: ids made in the same millisecond (a frozen clock,
// the worst case), across a sequence overflow and with a clock that steps back, stay
// sorted and unique, and each carries 64 fresh random bits: the next id is not the
// previous one plus one.
func TestIDsAreNotGuessableFromNeighbours(t *testing.T) {
	var g ids
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var prev []byte
	var prevLo uint64
	sameRandom := 0
	for i := 0; i < 70000; i++ { // more than the 16-bit sequence holds
		at := now
		if i == 50000 {
			at = now.Add(-time.Second) // the clock steps back: order must hold
		}
		id := g.next("inc_", at)
		_, lo := decodeULID(t, id[4:])
		if prev != nil && string(prev) >= id {
			t.Fatalf("id %d %q does not sort after %q", i, id, prev)
		}
		if prev != nil && (lo == prevLo+1 || lo == prevLo) {
			sameRandom++
		}
		prev, prevLo = []byte(id), lo
	}
	if sameRandom > 0 {
		t.Fatalf("%d ids had a random part derived from their neighbour's", sameRandom)
	}
}

func TestSealer(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	s, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal([]byte("hunter2"), []byte("whc_1"))
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("plaintext visible in sealed value")
	}
	if pt, err := s.Unseal(sealed, []byte("whc_1")); err != nil || string(pt) != "hunter2" {
		t.Fatalf("Unseal = %q, %v", pt, err)
	}
	if _, err := s.Unseal(sealed, []byte("whc_2")); err == nil {
		t.Fatal("a value sealed for one record opened for another")
	}
	if bytes.Equal(s.Seal([]byte("a"), nil), s.Seal([]byte("a"), nil)) {
		t.Fatal("nonce reused")
	}
	other, _ := NewSealer(bytes.Repeat([]byte{8}, 32))
	if _, err := other.Unseal(sealed, []byte("whc_1")); err == nil {
		t.Fatal("opened with the wrong key")
	}
}

func TestLoadMasterKey(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadMasterKey(filepath.Join(dir, "k"), "", KeyOptions{})
	if err != nil || len(k1) != 32 {
		t.Fatalf("create: %v", err)
	}
	k2, err := LoadMasterKey(filepath.Join(dir, "k"), "", KeyOptions{})
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("reload gave another key: %v", err)
	}
	if _, err := LoadMasterKey("", "c2hvcnQ=", KeyOptions{}); err == nil {
		t.Fatal("accepted a short key")
	}
	hexKey := "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	if k, err := LoadMasterKey("", hexKey, KeyOptions{}); err != nil || k[31] != 0x1f {
		t.Fatalf("hex key: %v", err)
	}
}

func TestProjectsCRUDAndPagination(t *testing.T) {
	s, _ := openTest(t)
	_, ws := owner(t, s, "o@example.com")
	var ids []string
	for i := 0; i < 7; i++ {
		p, err := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("p" + itoa(i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	var got []string
	page := Page{Limit: 3}
	for pages := 0; ; pages++ {
		ps, next, err := s.ListProjects(ProjectFilter{WorkspaceID: ws.ID, SeeRestricted: true}, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			got = append(got, p.ID)
		}
		if next == "" {
			if pages != 2 {
				t.Fatalf("pages = %d, want 3", pages+1)
			}
			break
		}
		page.After = next
	}
	if len(got) != 7 || got[0] != ids[0] || got[6] != ids[6] {
		t.Fatalf("listed %v, want %v", got, ids)
	}
	// Exactly-full last page: no cursor pointing at an empty page.
	ps, next, _ := s.ListProjects(ProjectFilter{WorkspaceID: ws.ID, SeeRestricted: true}, Page{Limit: 7})
	if len(ps) != 7 || next != "" {
		t.Fatalf("full page: %d items, next %q", len(ps), next)
	}

	p, err := s.UpdateProject(ids[0], ProjectInput{Name: ptr("renamed")}, 1)
	if err != nil || p.Version != 2 || p.Name != "renamed" {
		t.Fatalf("update: %+v %v", p, err)
	}
	if _, err := s.UpdateProject(ids[0], ProjectInput{Name: ptr("again")}, 1); !IsCode(err, CodePreconditionFailed) {
		t.Fatalf("stale If-Match: %v", err)
	}
	other := "ws_other"
	if _, err := s.UpdateProject(ids[0], ProjectInput{WorkspaceID: &other}, 0); !IsCode(err, CodeValidation) {
		t.Fatalf("moving a project: %v", err)
	}
	for _, in := range []ProjectInput{
		{WorkspaceID: &ws.ID},
		{WorkspaceID: &ws.ID, Name: ptr("  ")},
		{WorkspaceID: &ws.ID, Name: ptr("x"), AccessMode: ptr("public")},
		{Name: ptr("x")},
	} {
		if _, err := s.CreateProject(in); !IsCode(err, CodeValidation) {
			t.Errorf("CreateProject(%+v) = %v, want validation_failed", in, err)
		}
	}
	if _, err := s.CreateProject(ProjectInput{WorkspaceID: ptr("ws_nope"), Name: ptr("x")}); !IsCode(err, CodeNotFound) {
		t.Errorf("unknown workspace: %v", err)
	}
}

func TestRestrictedProjectsAreFiltered(t *testing.T) {
	s, _ := openTest(t)
	_, ws := owner(t, s, "o@example.com")
	m, err := s.AddMember(ws.ID, NewUser{Email: "m@example.com", PasswordHash: "x"}, RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	open, _ := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("open")})
	closed, _ := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("closed"), AccessMode: ptr(AccessRestricted)})
	list := func() []string {
		ps, _, err := s.ListProjects(ProjectFilter{WorkspaceID: ws.ID, UserID: m.UserID}, Page{Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	if got := list(); len(got) != 1 || got[0] != "open" {
		t.Fatalf("member sees %v", got)
	}
	if err := s.SetProjectMembers(closed.ID, []string{m.UserID}); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 2 {
		t.Fatalf("listed member sees %v", got)
	}
	a, _ := s.ProjectAccessFor(closed.ID, m.UserID)
	if !a.Listed || a.Role != RoleMember {
		t.Fatalf("access %+v", a)
	}
	if err := s.SetProjectMembers(open.ID, []string{"usr_stranger"}); !IsCode(err, CodeValidation) {
		t.Fatalf("listing a stranger: %v", err)
	}
	if err := s.RemoveMember(ws.ID, m.UserID); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.ProjectAccessFor(closed.ID, m.UserID); a.Listed || a.Role != "" {
		t.Fatalf("removed member keeps access: %+v", a)
	}
}

func TestWorkspaceKeepsAnOwner(t *testing.T) {
	s, _ := openTest(t)
	o, ws := owner(t, s, "o@example.com")
	if _, err := s.SetRole(ws.ID, o.ID, RoleAdmin); !IsCode(err, CodeConflict) {
		t.Fatalf("demoting the last owner: %v", err)
	}
	if err := s.RemoveMember(ws.ID, o.ID); !IsCode(err, CodeConflict) {
		t.Fatalf("removing the last owner: %v", err)
	}
	if _, err := s.AddMember(ws.ID, NewUser{Email: "o@example.com"}, RoleAdmin); !IsCode(err, CodeConflict) {
		t.Fatalf("adding a member twice: %v", err)
	}
	if _, err := s.AddMember(ws.ID, NewUser{Email: "n@example.com", PasswordHash: "x"}, "king"); !IsCode(err, CodeValidation) {
		t.Fatalf("bad role: %v", err)
	}
}

func TestDemotionRevokesWriteTokensForGood(t *testing.T) {
	s, c := openTest(t)
	_, ws := owner(t, s, "o@example.com")
	a, _ := s.AddMember(ws.ID, NewUser{Email: "a@example.com", PasswordHash: "x"}, RoleAdmin)
	mk := func(prefix string, scopes ...string) ManagementToken {
		tok, err := s.CreateToken(NewToken{Name: prefix, Prefix: prefix, SecretHash: make([]byte, 32), UserID: a.UserID, WorkspaceID: ws.ID, Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	w := mk("aaaaaaaaaaaa", "projects:read", "projects:write")
	r := mk("bbbbbbbbbbbb", "projects:read")
	if _, err := s.SetRole(ws.ID, a.UserID, RoleMember); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetRole(ws.ID, a.UserID, RoleAdmin); err != nil {
		t.Fatal(err)
	}
	wa, _ := s.TokenForAuth(w.Prefix)
	ra, _ := s.TokenForAuth(r.Prefix)
	if wa.Token.RevokedAt == nil || wa.Token.RevokedReason != ReasonOwnerDemoted {
		t.Fatalf("write token after demotion and promotion: %+v", wa.Token)
	}
	if ra.Token.RevokedAt != nil {
		t.Fatal("read-only token revoked by demotion")
	}
	// A member may not hold write scopes at all.
	s.SetRole(ws.ID, a.UserID, RoleMember)
	if _, err := s.CreateToken(NewToken{Name: "x", Prefix: "cccccccccccc", SecretHash: make([]byte, 32), UserID: a.UserID, WorkspaceID: ws.ID, Scopes: []string{"models:write"}}); !IsCode(err, CodeForbidden) {
		t.Fatalf("member write token: %v", err)
	}
	// Usage is recorded without a version bump, and never goes backwards.
	c.Advance(time.Minute)
	at := c.Now()
	if err := s.TouchTokens(map[string]time.Time{r.ID: at, "tok_gone": at}); err != nil {
		t.Fatal(err)
	}
	s.TouchTokens(map[string]time.Time{r.ID: at.Add(-time.Hour)})
	ra, _ = s.TokenForAuth(r.Prefix)
	if ra.Token.LastUsedAt == nil || !ra.Token.LastUsedAt.Equal(at) || ra.Token.Version != r.Version {
		t.Fatalf("last_used_at %v version %d", ra.Token.LastUsedAt, ra.Token.Version)
	}
}

func TestSessions(t *testing.T) {
	s, c := openTest(t)
	u, _ := owner(t, s, "o@example.com")
	ses, err := s.CreateSession(u.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeSession(ses.ID); err != nil {
		t.Fatal(err)
	}
	a, _ := s.SessionForAuth(ses.ID)
	if a.Session.RevokedAt == nil {
		t.Fatal("session not revoked")
	}
	c.Advance(2 * time.Hour)
	if _, err := s.CreateSession(u.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionForAuth(ses.ID); !IsCode(err, CodeNotFound) {
		t.Fatalf("stale session kept: %v", err)
	}
}

func TestBackupIsAnOpenableCopy(t *testing.T) {
	s, _ := openTest(t)
	_, ws := owner(t, s, "o@example.com")
	p, _ := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("kept")})
	var buf bytes.Buffer
	var size int64
	n, err := s.Backup(&buf, func(n int64) { size = n })
	if err != nil || n != size || int64(buf.Len()) != n {
		t.Fatalf("backup n=%d size=%d len=%d err=%v", n, size, buf.Len(), err)
	}
	path := filepath.Join(t.TempDir(), "copy.db")
	if err := writeFile(path, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := c.Project(p.ID); err != nil || got.Name != "kept" {
		t.Fatalf("project in backup: %+v %v", got, err)
	}
}

func TestCheckFindsBrokenIndexes(t *testing.T) {
	s, _ := openTest(t)
	_, ws := owner(t, s, "o@example.com")
	p, _ := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("x")})
	s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketProjectsByWorkspace).Delete(pairKey(ws.ID, p.ID))
	})
	problems, err := s.Check()
	if err != nil || len(problems) == 0 {
		t.Fatalf("check missed a broken index: %v %v", problems, err)
	}
	// Repair so the cleanup check passes.
	s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketProjectsByWorkspace).Put(pairKey(ws.ID, p.ID), nil)
	})
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }

func TestWithArticle(t *testing.T) {
	for in, want := range map[string]string{"ingest client": "an ingest client", "query client": "a query client", "Analytics API": "an Analytics API"} {
		if got := WithArticle(in); got != want {
			t.Errorf("WithArticle(%q) = %q, want %q", in, got, want)
		}
	}
}
