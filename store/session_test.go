package store

import (
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"lookout/internal/testclock"
)

func countKeys(t *testing.T, s *Store, b []byte) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(b).ForEach(func(_, _ []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSessionPruningByExpiry: a sign-in removes only a bounded number of expired sessions,
// found through the expiry index, and PruneSessions removes the rest, leaving every live
// session (issue 7, item 5).
func TestSessionPruningByExpiry(t *testing.T) {
	s, c := openTest(t)
	u, _ := owner(t, s, "o@example.com")
	var short, long []Session
	for i := 0; i < 40; i++ {
		ses, err := s.CreateSession(u.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		short = append(short, ses)
		c.Advance(time.Second)
	}
	for i := 0; i < 5; i++ {
		ses, err := s.CreateSession(u.ID, 10*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		long = append(long, ses)
	}
	if err := s.RevokeSession(long[0].ID); err != nil { // revoked, not yet expired: kept
		t.Fatal(err)
	}
	c.Advance(2 * time.Hour) // every short session has expired

	fresh, err := s.CreateSession(u.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, bucketSessions); n != 45+1-sessionPruneOnCreate {
		t.Fatalf("after a sign-in %d sessions remain, want %d: a sign-in must prune a bounded number", n, 45+1-sessionPruneOnCreate)
	}
	// The earliest expiries went first.
	if _, err := s.SessionForAuth(short[0].ID); !IsCode(err, CodeNotFound) {
		t.Fatalf("earliest expired session still there: %v", err)
	}
	n, err := s.PruneSessions()
	if err != nil || n != 40-sessionPruneOnCreate {
		t.Fatalf("PruneSessions removed %d (%v), want %d", n, err, 40-sessionPruneOnCreate)
	}
	for _, ses := range append(long, fresh) {
		if _, err := s.SessionForAuth(ses.ID); err != nil {
			t.Fatalf("live session %s pruned: %v", ses.ID, err)
		}
	}
	if n := countKeys(t, s, bucketSessionsByExpiry); n != 6 {
		t.Fatalf("expiry index has %d entries, want 6", n)
	}
	if n, err := s.PruneSessions(); n != 0 || err != nil {
		t.Fatalf("second prune removed %d (%v)", n, err)
	}
	// A session is gone from its expiry on, exactly.
	c.Advance(8 * time.Hour) // now exactly the long sessions' expiry
	if n, err := s.PruneSessions(); n != 6 || err != nil {
		t.Fatalf("prune at the long sessions' expiry removed %d (%v), want 6", n, err)
	}
}

// TestSessionExpiryMigration: a data file from before the expiry index (schema 3) gets the
// index backfilled for its stored sessions when opened, so they are pruned like new ones.
func TestSessionExpiryMigration(t *testing.T) {
	c := testclock.New()
	path := filepath.Join(t.TempDir(), "lookout.db")
	s, err := Open(path, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := owner(t, s, "o@example.com")
	var ids []string
	for _, ttl := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour} {
		ses, err := s.CreateSession(u.ID, ttl)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ses.ID)
	}
	// Make it a schema-3 file: no expiry index.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketSessionsByExpiry); err != nil {
			return err
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], 3)
		return tx.Bucket(bucketMeta).Put(schemaVersionKey, v[:])
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(path, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if p, err := s.Check(); err != nil || len(p) > 0 {
		t.Fatalf("check after migration: %v %v", p, err)
	}
	if n := countKeys(t, s, bucketSessionsByExpiry); n != 3 {
		t.Fatalf("backfilled %d index entries, want 3", n)
	}
	c.Advance(150 * time.Minute)
	if n, err := s.PruneSessions(); n != 2 || err != nil {
		t.Fatalf("pruned %d (%v), want the 2 expired sessions", n, err)
	}
	if _, err := s.SessionForAuth(ids[2]); err != nil {
		t.Fatalf("live session lost: %v", err)
	}
}
