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

// sessionPruneOnCreate is how many expired sessions a sign-in removes on its way: enough
// to keep up with sign-ins (each adds one), few enough that a sign-in's write transaction
// stays small however many sessions piled up. PruneSessions clears the rest.
const sessionPruneOnCreate = 16

// sessionPruneBatch is how many expired sessions one PruneSessions transaction removes, so
// a large backlog never holds the write lock for long.
const sessionPruneBatch = 512

// CreateSession starts a session for a user lasting ttl, and removes up to a few sessions
// that have expired, found through the expiry index (never by scanning the live ones).
// Returns not_found.
func (s *Store) CreateSession(userID string, ttl time.Duration) (Session, error) {
	var out Session
	err := s.db.Update(func(tx *bolt.Tx) error {
		if _, err := getUser(tx, userID); err != nil {
			return err
		}
		now := s.now()
		if _, err := pruneSessions(tx, now, sessionPruneOnCreate); err != nil {
			return err
		}
		out = Session{ID: s.newID("ses_"), UserID: userID, CreatedAt: now, ExpiresAt: now.Add(ttl)}
		if err := putJSON(tx.Bucket(bucketSessions), []byte(out.ID), out); err != nil {
			return err
		}
		return tx.Bucket(bucketSessionsByExpiry).Put(expiryKey(out.ExpiresAt, out.ID), nil)
	})
	return out, err
}

// PruneSessions removes every session that has expired (revoked ones included, once their
// expiry passes), in transactions of at most sessionPruneBatch sessions, touching only the
// expired entries of the expiry index. It returns how many it removed.
func (s *Store) PruneSessions() (int, error) {
	total := 0
	for {
		var n int
		err := s.db.Update(func(tx *bolt.Tx) (err error) {
			n, err = pruneSessions(tx, s.now(), sessionPruneBatch)
			return err
		})
		total += n
		if err != nil || n < sessionPruneBatch {
			return total, err
		}
	}
}

// pruneSessions deletes up to limit sessions whose expiry is at or before now, earliest
// first, with their index entries. A session is invalid from its expiry on, so nothing
// still usable is removed.
func pruneSessions(tx *bolt.Tx, now time.Time, limit int) (int, error) {
	idx, sessions := tx.Bucket(bucketSessionsByExpiry), tx.Bucket(bucketSessions)
	var stale [][]byte
	c := idx.Cursor()
	for k, _ := c.First(); k != nil && len(stale) < limit && !expiryKeyTime(k).After(now); k, _ = c.Next() {
		stale = append(stale, append([]byte(nil), k...))
	}
	for _, k := range stale {
		if err := sessions.Delete(k[8:]); err != nil {
			return 0, err
		}
		if err := idx.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(stale), nil
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
