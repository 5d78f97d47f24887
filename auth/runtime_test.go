package auth

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lookout/internal/testclock"
	"lookout/store"
)

// runtimeFixture is a project with an ingest model, an ingest client and a key for it.
type runtimeFixture struct {
	project, client, keyID, key string
}

func newRuntimeFixture(t testing.TB, st *store.Store) runtimeFixture {
	t.Helper()
	_, ws, err := CreateOwner(st, "o@example.com", "password1", "O")
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.CreateProject(store.ProjectInput{WorkspaceID: &ws.ID, Name: ptr("p")})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"orders", "clicks"} {
		if _, err := st.CreateModel(p.ID, store.ModelInput{Key: ptr(k), Fields: &[]store.Field{{Name: "id", Type: "string"}}}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := st.CreateClient(store.ClientIngest, p.ID, store.ClientInput{Name: ptr("c"), Models: &[]string{"orders", "clicks"}})
	if err != nil {
		t.Fatal(err)
	}
	key, prefix, hash := NewRuntimeKey()
	k, err := st.CreateRuntimeKey(p.ID, store.RuntimeKeyInput{Name: ptr("k"), Kind: ptr(store.ClientIngest), ClientID: &c.ID}, hash, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return runtimeFixture{project: p.ID, client: c.ID, keyID: k.ID, key: key}
}

// newRuntimeTest is newTest with a sealer, which HS256 client secrets need.
func newRuntimeTest(t testing.TB) (*Service, *store.Store) {
	t.Helper()
	c := testclock.New()
	sealer, err := store.NewSealer([]byte("fedcba9876543210fedcba9876543210"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "lookout.db"), store.Options{Now: c.Now, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p, err := st.Check(); err != nil || len(p) > 0 {
			t.Errorf("check: %v %v", p, err)
		}
		st.Close()
	})
	return New(st, []byte("0123456789abcdef0123456789abcdef"), c.Now, nil), st
}

func ptr[T any](v T) *T { return &v }

// TestRuntimeCacheSeesEveryWrite: runtime authentication keeps keys and clients in memory
// by runtime generation; each write that changes the answer must be seen by the very next
// request, which is first made to fill the cache.
func TestRuntimeCacheSeesEveryWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(st *store.Store, f runtimeFixture) error
		code   string // the error code of the next request; "" for success
		want   string // in the error message, or the models of the identity
	}{
		{"revoke the key", func(st *store.Store, f runtimeFixture) error {
			_, err := st.RevokeRuntimeKey(f.project, f.keyID)
			return err
		}, store.CodeUnauthenticated, "revoked"},
		{"disable the client", func(st *store.Store, f runtimeFixture) error {
			_, err := st.UpdateClient(store.ClientIngest, f.project, f.client, store.ClientInput{Enabled: ptr(false)}, 0)
			return err
		}, store.CodeForbidden, "disabled"},
		{"change the authentication", func(st *store.Store, f runtimeFixture) error {
			_, err := st.SetClientAuthentication(store.ClientIngest, f.project, f.client, store.AuthenticationInput{
				Methods: []string{store.MethodJWT}, JWT: &store.JWTInput{Algorithms: []string{store.AlgorithmHS256}, HS256Secret: ptr(strings.Repeat("s", 32))}}, 0)
			return err
		}, store.CodeForbidden, "api_key is not an allowed method"},
		{"narrow the key", func(st *store.Store, f runtimeFixture) error {
			_, err := st.UpdateRuntimeKey(f.project, f.keyID, store.RuntimeKeyInput{Models: &[]string{"clicks"}}, 0)
			return err
		}, "", "clicks"},
		{"narrow the client", func(st *store.Store, f runtimeFixture) error {
			_, err := st.UpdateClient(store.ClientIngest, f.project, f.client, store.ClientInput{Models: &[]string{"orders"}}, 0)
			return err
		}, "", "orders"},
		{"delete the client", func(st *store.Store, f runtimeFixture) error {
			return st.DeleteClient(store.ClientIngest, f.project, f.client)
		}, store.CodeUnauthenticated, "revoked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, st := newRuntimeTest(t)
			f := newRuntimeFixture(t, st)
			req := RuntimeRequest{Authorization: "ApiKey " + f.key, Transport: store.TransportHTTP, Kind: store.ClientIngest}
			id, err := svc.AuthenticateRuntime(req)
			if err != nil || len(id.Models) != 2 {
				t.Fatalf("before the change: %v %v", id, err)
			}
			if err := tc.change(st, f); err != nil {
				t.Fatal(err)
			}
			id, err = svc.AuthenticateRuntime(req)
			if tc.code == "" {
				if err != nil || strings.Join(id.Models, ",") != tc.want {
					t.Fatalf("after the change: %+v %v; want models %s", id, err, tc.want)
				}
				return
			}
			if !store.IsCode(err, tc.code) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("after the change: %v; want %s containing %q", err, tc.code, tc.want)
			}
		})
	}
}

// TestRuntimeIdentityIsACopy: a caller changing its identity must not change the cached
// key the next request reads.
func TestRuntimeIdentityIsACopy(t *testing.T) {
	svc, st := newRuntimeTest(t)
	f := newRuntimeFixture(t, st)
	req := RuntimeRequest{Authorization: "ApiKey " + f.key, Transport: store.TransportHTTP, Kind: store.ClientIngest}
	id, err := svc.AuthenticateRuntime(req)
	if err != nil {
		t.Fatal(err)
	}
	id.Key.Kind, id.Client.Enabled = store.ClientQuery, false
	if id, err = svc.AuthenticateRuntime(req); err != nil || !slices.Equal(id.Models, []string{"orders", "clicks"}) {
		t.Fatalf("%+v %v", id, err)
	}
}
