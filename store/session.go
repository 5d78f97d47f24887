package store

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Session is a console sign-in. The session JWT names it by id, so signing out (revoking the
// session) invalidates the JWT before it expires.
type Session struct {
	ID        string     `json:"id"`
	UserID    string     `json:"user_id"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// CreateSession starts a session for a user lasting ttl, and drops every session that has
// expired or was revoked, so the bucket holds only live sessions. Returns not_found.
func (s *Store) CreateSession(userID string, ttl time.Duration) (Session, error) {
	var out Session
	err := s.db.Update(func(tx *bolt.Tx) error {
		if _, err := getUser(tx, userID); err != nil {
			return err
		}
		now := s.now()
		b := tx.Bucket(bucketSessions)
		var stale [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var old Session
			if err := getJSONBytes(v, &old); err != nil {
				return err
			}
			if old.RevokedAt != nil || !old.ExpiresAt.After(now) {
				stale = append(stale, append([]byte(nil), k...))
			}
		}
		for _, k := range stale {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		out = Session{ID: s.newID("ses_"), UserID: userID, CreatedAt: now, ExpiresAt: now.Add(ttl)}
		return putJSON(b, []byte(out.ID), out)
	})
	return out, err
}

// SessionAuth is a session with its account, read in one transaction.
type SessionAuth struct {
	Session Session
	User    User
}

// SessionForAuth returns a session and its user. Returns not_found (session or user gone).
func (s *Store) SessionForAuth(id string) (SessionAuth, error) {
	var a SessionAuth
	err := s.db.View(func(tx *bolt.Tx) error {
		if err := getJSON(tx.Bucket(bucketSessions), []byte(id), "session", &a.Session); err != nil {
			return err
		}
		r, err := getUser(tx, a.Session.UserID)
		a.User = r.User
		return err
	})
	return a, err
}

// RevokeSession ends a session (sign-out). Returns not_found.
func (s *Store) RevokeSession(id string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		var ses Session
		b := tx.Bucket(bucketSessions)
		if err := getJSON(b, []byte(id), "session", &ses); err != nil {
			return err
		}
		if ses.RevokedAt != nil {
			return nil
		}
		now := s.now()
		ses.RevokedAt = &now
		return putJSON(b, []byte(id), ses)
	})
}
