package store

import (
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Reasons a Management Token was revoked.
const (
	ReasonRevoked      = "revoked"       // its owner revoked it
	ReasonOwnerDemoted = "owner_demoted" // write-scoped, and its owner lost owner/admin
	ReasonOwnerRemoved = "owner_removed" // its owner left the workspace
)

// ManagementToken is a scoped credential for /management/v1. Only the SHA-256 of its secret
// is stored (tokenRecord), never the secret.
type ManagementToken struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Prefix        string     `json:"prefix"`
	UserID        string     `json:"user_id"`
	WorkspaceID   string     `json:"workspace_id"`
	Scopes        []string   `json:"scopes"`
	ProjectIDs    []string   `json:"project_ids"`
	ExpiresAt     *time.Time `json:"expires_at"`
	Enabled       bool       `json:"enabled"`
	RevokedAt     *time.Time `json:"revoked_at"`
	RevokedReason string     `json:"revoked_reason,omitempty"`
	LastUsedAt    *time.Time `json:"last_used_at"`
	Version       int        `json:"version"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

type tokenRecord struct {
	ManagementToken
	SecretHash []byte `json:"secret_hash"`
}

// HasWriteScope reports whether the token holds any :write scope.
func (t ManagementToken) HasWriteScope() bool {
	for _, s := range t.Scopes {
		if strings.HasSuffix(s, ":write") {
			return true
		}
	}
	return false
}

// Restricted reports whether the token has a project allowlist.
func (t ManagementToken) Restricted() bool { return len(t.ProjectIDs) > 0 }

// NewToken describes a token to store; the caller made the secret and hashed it.
type NewToken struct {
	Name        string
	Prefix      string
	SecretHash  []byte
	UserID      string
	WorkspaceID string
	Scopes      []string
	ProjectIDs  []string
	ExpiresAt   *time.Time
}

// CreateToken stores a Management Token. It checks, in the same transaction, that the owner
// is a member of the workspace, that a write-scoped token's owner is an owner or admin, and
// that every allowlisted project belongs to the workspace.
// Returns validation_failed, not_found, forbidden, conflict (prefix collision).
func (s *Store) CreateToken(nt NewToken) (ManagementToken, error) {
	var t ManagementToken
	err := s.updateIdentity(func(tx *bolt.Tx) error {
		var f fieldErrors
		name := strings.TrimSpace(nt.Name)
		if name == "" || len(name) > 200 {
			f.add("name", "must be 1 to 200 characters")
		}
		f.name("name", name)
		if nt.WorkspaceID == "" {
			f.add("workspace_id", "is required")
		}
		now := s.now()
		if nt.ExpiresAt != nil && !nt.ExpiresAt.After(now) {
			f.add("expires_at", "must be in the future")
		}
		if err := f.err(); err != nil {
			return err
		}
		if tx.Bucket(bucketWorkspaces).Get([]byte(nt.WorkspaceID)) == nil {
			return NotFound("workspace")
		}
		m, err := getMembership(tx, nt.WorkspaceID, nt.UserID)
		if err != nil {
			return Errorf(CodeForbidden, "you are not a member of this workspace")
		}
		for i, pid := range nt.ProjectIDs {
			p, err := getProject(tx, pid)
			if err != nil || p.WorkspaceID != nt.WorkspaceID {
				f.add("project_ids["+itoa(i)+"]", "is not a project of this workspace")
			}
		}
		if err := f.err(); err != nil {
			return err
		}
		t = ManagementToken{
			ID: s.newID("tok_"), Name: name, Prefix: nt.Prefix, UserID: nt.UserID,
			WorkspaceID: nt.WorkspaceID, Scopes: nt.Scopes, ProjectIDs: nt.ProjectIDs,
			ExpiresAt: nt.ExpiresAt, Enabled: true, Version: 1, CreatedAt: now, UpdatedAt: now,
		}
		if t.ProjectIDs == nil {
			t.ProjectIDs = []string{}
		}
		if t.ExpiresAt != nil {
			e := t.ExpiresAt.UTC().Truncate(time.Second)
			t.ExpiresAt = &e
		}
		if t.HasWriteScope() && !CanWrite(m.Role) {
			return Errorf(CodeForbidden, "a member may only create tokens with :read scopes")
		}
		byPrefix := tx.Bucket(bucketTokensByPrefix)
		if byPrefix.Get([]byte(t.Prefix)) != nil {
			return Errorf(CodeConflict, "token prefix collision; try again")
		}
		if err := putJSON(tx.Bucket(bucketTokens), []byte(t.ID), tokenRecord{ManagementToken: t, SecretHash: nt.SecretHash}); err != nil {
			return err
		}
		if err := byPrefix.Put([]byte(t.Prefix), []byte(t.ID)); err != nil {
			return err
		}
		return tx.Bucket(bucketTokensByUser).Put(pairKey(t.UserID, t.ID), nil)
	})
	return t, err
}

func getToken(tx *bolt.Tx, id string) (tokenRecord, error) {
	var r tokenRecord
	err := getJSON(tx.Bucket(bucketTokens), []byte(id), "management token", &r)
	return r, err
}

// TokenAuth is what authenticating a Management Token needs, read in one transaction.
type TokenAuth struct {
	Token      ManagementToken
	SecretHash []byte
	// OwnerExists is false once the owner's account is gone.
	OwnerExists bool
	// Role is the owner's role in the token's workspace, "" when no longer a member.
	Role string
}

// TokenForAuth looks a token up by its prefix. Returns not_found.
func (s *Store) TokenForAuth(prefix string) (TokenAuth, error) {
	var a TokenAuth
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketTokensByPrefix).Get([]byte(prefix))
		if id == nil {
			return NotFound("management token")
		}
		r, err := getToken(tx, string(id))
		if err != nil {
			return err
		}
		a.Token, a.SecretHash = r.ManagementToken, r.SecretHash
		a.OwnerExists = tx.Bucket(bucketUsers).Get([]byte(r.UserID)) != nil
		if m, err := getMembership(tx, r.WorkspaceID, r.UserID); err == nil {
			a.Role = m.Role
		}
		return nil
	})
	return a, err
}

// Token returns one token of a user (another user's token is not_found).
func (s *Store) Token(userID, id string) (ManagementToken, error) {
	var r tokenRecord
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		r, err = getToken(tx, id)
		if err == nil && r.UserID != userID {
			err = NotFound("management token")
		}
		return err
	})
	return r.ManagementToken, err
}

// TokensOf lists a user's Management Tokens (revoked ones included) in creation order.
func (s *Store) TokensOf(userID string) ([]ManagementToken, error) {
	out := []ManagementToken{}
	err := s.db.View(func(tx *bolt.Tx) error {
		p := pairPrefix(userID)
		c := tx.Bucket(bucketTokensByUser).Cursor()
		for k, _ := c.Seek(p); k != nil && hasPrefix(k, p); k, _ = c.Next() {
			r, err := getToken(tx, pairSecond(k))
			if err != nil {
				return err
			}
			out = append(out, r.ManagementToken)
		}
		return nil
	})
	return out, err
}

// updateToken applies fn to a stored token and bumps its version.
func (s *Store) updateToken(tx *bolt.Tx, id string, fn func(t *ManagementToken) error) (ManagementToken, error) {
	r, err := getToken(tx, id)
	if err != nil {
		return ManagementToken{}, err
	}
	if err := fn(&r.ManagementToken); err != nil {
		return ManagementToken{}, err
	}
	r.Version++
	r.UpdatedAt = s.now()
	return r.ManagementToken, putJSON(tx.Bucket(bucketTokens), []byte(id), r)
}

// RevokeToken revokes a user's token for good. Revoking twice is harmless (the first
// revocation is kept). Returns not_found.
func (s *Store) RevokeToken(userID, id, reason string) (ManagementToken, error) {
	var t ManagementToken
	err := s.updateIdentity(func(tx *bolt.Tx) (err error) {
		t, err = s.updateToken(tx, id, func(t *ManagementToken) error {
			if userID != "" && t.UserID != userID {
				return NotFound("management token")
			}
			if t.RevokedAt == nil {
				now := s.now()
				t.RevokedAt, t.RevokedReason, t.Enabled = &now, reason, false
			}
			return nil
		})
		return err
	})
	return t, err
}

// SetTokenEnabled disables or re-enables a user's token. A revoked token stays revoked.
// Returns not_found, conflict.
func (s *Store) SetTokenEnabled(userID, id string, enabled bool) (ManagementToken, error) {
	var t ManagementToken
	err := s.updateIdentity(func(tx *bolt.Tx) (err error) {
		t, err = s.updateToken(tx, id, func(t *ManagementToken) error {
			if t.UserID != userID {
				return NotFound("management token")
			}
			if t.RevokedAt != nil {
				return Errorf(CodeConflict, "the token is revoked and cannot be enabled or disabled")
			}
			t.Enabled = enabled
			return nil
		})
		return err
	})
	return t, err
}

// revokeUserTokens revokes a user's tokens for one workspace (only write-scoped ones when
// writeOnly), inside the caller's transaction.
func revokeUserTokens(tx *bolt.Tx, userID, wsID string, writeOnly bool, reason string, now time.Time) error {
	p := pairPrefix(userID)
	c := tx.Bucket(bucketTokensByUser).Cursor()
	for k, _ := c.Seek(p); k != nil && hasPrefix(k, p); k, _ = c.Next() {
		r, err := getToken(tx, pairSecond(k))
		if err != nil {
			return err
		}
		if r.WorkspaceID != wsID || r.RevokedAt != nil || (writeOnly && !r.HasWriteScope()) {
			continue
		}
		r.RevokedAt, r.RevokedReason, r.Enabled = &now, reason, false
		r.Version++
		r.UpdatedAt = now
		if err := putJSON(tx.Bucket(bucketTokens), []byte(r.ID), r); err != nil {
			return err
		}
	}
	return nil
}

// TouchTokens records when tokens were last used, in one transaction for a whole batch: the
// authenticator gathers uses in memory so a request never costs a write. last_used_at is
// bookkeeping, so it changes neither version nor updated_at.
func (s *Store) TouchTokens(used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		for id, at := range used {
			r, err := getToken(tx, id)
			if IsCode(err, CodeNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			at = at.UTC().Truncate(time.Second)
			if r.LastUsedAt != nil && !at.After(*r.LastUsedAt) {
				continue
			}
			r.LastUsedAt = &at
			if err := putJSON(tx.Bucket(bucketTokens), []byte(id), r); err != nil {
				return err
			}
		}
		return nil
	})
}
