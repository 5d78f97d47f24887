package auth

import (
	"crypto/subtle"
	"log/slog"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"lookout/limits"
	"lookout/store"
)

// Principal is an authenticated caller: a console session or a Management Token.
type Principal struct {
	UserID string
	// SessionID is set for console sessions.
	SessionID string
	// Token is set for Management Tokens; Role is then the owner's role in the token's
	// workspace at authentication time.
	Token *store.ManagementToken
	Role  string
}

// Service authenticates callers and applies the access rules. It is safe for concurrent use.
type Service struct {
	store  *store.Store
	now    func() time.Time
	signer sessionSigner
	log    *slog.Logger

	mu   sync.Mutex
	used map[string]time.Time // token id -> last use, not yet written

	// tokens caches TokenForAuth by prefix (cachedToken), valid while the store's identity
	// generation is unchanged: any write to accounts, memberships or tokens drops it all.
	tokens sync.Map

	// rt is the runtime authentication cache of the current runtime generation.
	rt atomic.Pointer[runtimeCache]
	// hashes bounds the argon2id hashes running at once (sign-in, registration, new
	// members): each takes 19 MiB, so a flood of sign-ins must not take the memory with it.
	hashes atomic.Pointer[limits.Gate]
}

// ErrBusy is returned when too many password checks are already running; the caller should
// retry shortly (the transport answers 503 with Retry-After).
var ErrBusy = store.Errorf(store.CodeUnavailable, "too many sign-ins are being checked at once; retry in a moment")

// defaultHashGate allows one argon2id hash per CPU (at least two) at once, with up to 64
// more waiting at most five seconds each: ordinary bursts queue, floods are refused.
func defaultHashGate() *limits.Gate {
	return limits.NewGate(max(2, runtime.GOMAXPROCS(0)), 64, 5*time.Second)
}

// SetHashGate replaces the bound on concurrent password hashes (tests hold its slots).
func (s *Service) SetHashGate(g *limits.Gate) { s.hashes.Store(g) }

// withHashSlot runs fn, which hashes or verifies a password, inside the hash gate.
// Returns ErrBusy when no slot frees up in time.
func (s *Service) withHashSlot(fn func()) error {
	release, ok := s.hashes.Load().Enter()
	if !ok {
		return ErrBusy
	}
	defer release()
	fn()
	return nil
}

type cachedToken struct {
	gen uint64
	a   store.TokenAuth
}

// tokenForAuth is store.TokenForAuth behind the generation-checked cache. The generation is
// read before the record, so a record read during a concurrent write is cached under the
// older generation and discarded at once.
func (s *Service) tokenForAuth(prefix string) (store.TokenAuth, error) {
	gen := s.store.IdentityGeneration()
	if v, ok := s.tokens.Load(prefix); ok && v.(*cachedToken).gen == gen {
		return v.(*cachedToken).a, nil
	}
	a, err := s.store.TokenForAuth(prefix)
	if err != nil {
		return a, err // unknown prefixes are not cached: they must not fill memory
	}
	s.tokens.Store(prefix, &cachedToken{gen: gen, a: a})
	return a, nil
}

// New returns a Service. sessionKey signs console session JWTs; now is the clock shared
// with the store.
func New(st *store.Store, sessionKey []byte, now func() time.Time, log *slog.Logger) *Service {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Service{store: st, now: now, signer: sessionSigner{key: sessionKey, now: now}, log: log, used: map[string]time.Time{}}
	s.hashes.Store(defaultHashGate())
	return s
}

func unauthenticated(msg string) error { return store.Errorf(store.CodeUnauthenticated, "%s", msg) }
func forbidden(format string, args ...any) error {
	return store.Errorf(store.CodeForbidden, format, args...)
}

// bearer extracts the credential of an "Authorization: Bearer x" header value.
func bearer(header string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != ""
}

// AuthenticateToken checks a Management Token from an Authorization header value: the
// first stage of CONTRACTS §2. A write-scoped token whose owner is no longer owner/admin is
// revoked for good here. Returns unauthenticated.
func (s *Service) AuthenticateToken(header string) (*Principal, error) {
	tok, ok := bearer(header)
	if !ok {
		return nil, unauthenticated("missing Management Token: send Authorization: Bearer lk_mgmt_…")
	}
	prefix, secret, ok := ParseManagementToken(tok)
	if !ok {
		return nil, unauthenticated("malformed Management Token: expected lk_mgmt_<prefix>.<secret>")
	}
	a, err := s.tokenForAuth(prefix)
	if store.IsCode(err, store.CodeNotFound) {
		return nil, unauthenticated("invalid Management Token")
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(HashSecret(secret), a.SecretHash) != 1 {
		return nil, unauthenticated("invalid Management Token")
	}
	t := a.Token
	now := s.now()
	switch {
	case t.RevokedAt != nil:
		return nil, unauthenticated("Management Token is revoked")
	case !t.Enabled:
		return nil, unauthenticated("Management Token is disabled")
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return nil, unauthenticated("Management Token has expired")
	case !a.OwnerExists || a.Role == "":
		return nil, unauthenticated("the Management Token's owner is no longer a member of its workspace")
	case t.HasWriteScope() && !store.CanWrite(a.Role):
		// Fail closed, for good: promoting the owner again must not revive the token.
		if _, err := s.store.RevokeToken("", t.ID, store.ReasonOwnerDemoted); err != nil {
			s.log.Error("revoke token of demoted owner", "token_id", t.ID, "err", err)
		}
		return nil, unauthenticated("Management Token is revoked: its owner is no longer a workspace owner or admin")
	}
	s.mu.Lock()
	s.used[t.ID] = now
	s.mu.Unlock()
	return &Principal{UserID: t.UserID, Token: &t, Role: a.Role}, nil
}

// FlushUsage writes the batched last_used_at times in one transaction. The server calls it
// every few seconds and at shutdown, so authentication never costs a write.
func (s *Service) FlushUsage() error {
	s.mu.Lock()
	used := s.used
	s.used = map[string]time.Time{}
	s.mu.Unlock()
	if err := s.store.TouchTokens(used); err != nil {
		s.mu.Lock()
		for id, at := range used {
			if cur, ok := s.used[id]; !ok || at.After(cur) {
				s.used[id] = at
			}
		}
		s.mu.Unlock()
		return err
	}
	return nil
}

// AuthenticateSession checks a console session JWT from an Authorization header value.
// Returns unauthenticated.
func (s *Service) AuthenticateSession(header string) (*Principal, error) {
	tok, ok := bearer(header)
	if !ok {
		return nil, unauthenticated("sign in first: send Authorization: Bearer <session token>")
	}
	sid, uid, err := s.signer.verify(tok)
	if err != nil {
		return nil, unauthenticated("invalid or expired session; sign in again")
	}
	a, err := s.store.SessionForAuth(sid)
	if store.IsCode(err, store.CodeNotFound) {
		return nil, unauthenticated("invalid or expired session; sign in again")
	}
	if err != nil {
		return nil, err
	}
	if a.Session.RevokedAt != nil || a.User.ID != uid || !s.now().Before(a.Session.ExpiresAt) {
		return nil, unauthenticated("invalid or expired session; sign in again")
	}
	return &Principal{UserID: uid, SessionID: sid}, nil
}

// Login checks an e-mail address and password and starts a session. Unknown address and
// wrong password get the same answer after the same work. Returns unauthenticated,
// unavailable (ErrBusy).
func (s *Service) Login(email, password string) (token string, ses store.Session, u store.User, err error) {
	u, hash, err := s.store.UserCredentials(email)
	known := err == nil
	if err != nil && !store.IsCode(err, store.CodeNotFound) {
		return "", ses, u, err
	}
	if !known {
		hash = dummyHash()
	}
	var match bool
	if err := s.withHashSlot(func() { match = VerifyPassword(hash, password) }); err != nil {
		return "", ses, u, err
	}
	if !known || !match {
		return "", ses, u, unauthenticated("wrong e-mail address or password")
	}
	token, ses, err = s.startSession(u.ID)
	return token, ses, u, err
}

func (s *Service) startSession(userID string) (string, store.Session, error) {
	ses, err := s.store.CreateSession(userID, SessionTTL)
	if err != nil {
		return "", ses, err
	}
	tok, err := s.signer.sign(ses.ID, userID, ses.ExpiresAt)
	return tok, ses, err
}

// Logout revokes the caller's session.
func (s *Service) Logout(p *Principal) error {
	if p.SessionID == "" {
		return forbidden("only a console session can sign out")
	}
	return s.store.RevokeSession(p.SessionID)
}

// Register creates the first account, its workspace and a session. It is open only while no
// account exists: once one does, it is refused before any hashing or writing, so probing a
// closed registration costs no argon2id work. Returns validation_failed, forbidden,
// unavailable (ErrBusy).
func (s *Service) Register(email, password, name string) (store.User, store.Workspace, string, error) {
	if err := s.store.RegistrationOpen(); err != nil {
		return store.User{}, store.Workspace{}, "", err
	}
	if err := ValidatePassword(password); err != nil {
		return store.User{}, store.Workspace{}, "", err
	}
	var hash string
	var err error
	if berr := s.withHashSlot(func() { hash, err = HashPassword(password) }); berr != nil {
		return store.User{}, store.Workspace{}, "", berr
	}
	if err != nil {
		return store.User{}, store.Workspace{}, "", err
	}
	u, ws, err := s.store.RegisterOwner(store.NewUser{Email: email, Name: name, PasswordHash: hash}, "Default", true)
	if err != nil {
		return u, ws, "", err
	}
	tok, _, err := s.startSession(u.ID)
	return u, ws, tok, err
}

// CreateOwner creates an owner account with a new workspace named "Default" (the offline
// bootstrap of `lookout admin create-owner`). Returns validation_failed, conflict.
func CreateOwner(st *store.Store, email, password, name string) (store.User, store.Workspace, error) {
	if err := ValidatePassword(password); err != nil {
		return store.User{}, store.Workspace{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return store.User{}, store.Workspace{}, err
	}
	return st.RegisterOwner(store.NewUser{Email: email, Name: name, PasswordHash: hash}, "Default", false)
}

// TokenRequest is the body of a Management Token creation.
type TokenRequest struct {
	Name        string     `json:"name"`
	WorkspaceID string     `json:"workspace_id"`
	Scopes      []string   `json:"scopes"`
	ProjectIDs  []string   `json:"project_ids"`
	ExpiresAt   *time.Time `json:"expires_at"`
}

// CreateToken issues a Management Token for a user and returns the whole secret token (shown
// this once) with the stored record. A member may hold :read scopes only.
// Returns validation_failed, not_found, forbidden.
func CreateToken(st *store.Store, userID string, req TokenRequest) (string, store.ManagementToken, error) {
	var f []store.FieldError
	scopes := map[string]bool{}
	if len(req.Scopes) == 0 {
		f = append(f, store.FieldError{Field: "scopes", Message: "must name at least one scope"})
	}
	for _, sc := range req.Scopes {
		if !ValidScope(sc) {
			f = append(f, store.FieldError{Field: "scopes", Message: "unknown scope " + quote(sc) + "; valid scopes are " + strings.Join(AllScopes(), ", ")})
			continue
		}
		scopes[sc] = true
	}
	seen := map[string]bool{}
	projects := []string{}
	for _, p := range req.ProjectIDs {
		if !seen[p] {
			seen[p] = true
			projects = append(projects, p)
		}
	}
	if len(f) > 0 {
		return "", store.ManagementToken{}, store.Invalid(f...)
	}
	list := make([]string, 0, len(scopes))
	for sc := range scopes {
		list = append(list, sc)
	}
	sort.Strings(list)
	for {
		tok, prefix, secret := NewManagementToken()
		t, err := st.CreateToken(store.NewToken{
			Name: req.Name, Prefix: prefix, SecretHash: HashSecret(secret), UserID: userID,
			WorkspaceID: req.WorkspaceID, Scopes: list, ProjectIDs: projects, ExpiresAt: req.ExpiresAt,
		})
		if store.IsCode(err, store.CodeConflict) {
			continue // a 62-bit prefix collided; draw again
		}
		if err != nil {
			return "", t, err
		}
		return tok, t, nil
	}
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + s + `"`
}
