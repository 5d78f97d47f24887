package store

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestReadOnlyOpenOfOlderFileChangesNothing: a file at schema version 1 (before the
// Management resources) opens read-only, checks clean and backs up, and its bytes and
// modification time stay as they were: no migration, no bucket, no key check.
func TestReadOnlyOpenOfOlderFileChangesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lookout.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := migrations[0](nil, tx); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], 1)
		return meta.Put(schemaVersionKey, v[:])
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	info, _ := os.Stat(path)

	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a version 1 file: %v", err)
	}
	if problems, err := ro.Check(); err != nil || len(problems) > 0 {
		t.Fatalf("check: %v %v", problems, err)
	}
	if p, err := ro.CheckWarehouseFiles(nil); err != nil || len(p) > 0 {
		t.Fatalf("warehouse files: %v %v", p, err)
	}
	if p, err := ro.CheckMasterKey(nil); err != nil || len(p) > 0 {
		t.Fatalf("master key: %v %v", p, err)
	}
	var buf bytes.Buffer
	if _, err := ro.Backup(&buf, nil); err != nil {
		t.Fatal(err)
	}
	ro.Close()
	after, _ := os.ReadFile(path)
	info2, _ := os.Stat(path)
	if !bytes.Equal(before, after) || !info.ModTime().Equal(info2.ModTime()) {
		t.Fatal("a read-only open changed the file")
	}
}

// TestKeyCheck: the first read-write open with a sealer stores the key check; another key
// is refused (ErrWrongMasterKey) unless NewMasterKey; CheckMasterKey tells them apart.
func TestKeyCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lookout.db")
	k1, _ := NewSealer(bytes.Repeat([]byte{1}, 32))
	k2, _ := NewSealer(bytes.Repeat([]byte{2}, 32))
	open := func(opts Options) error {
		s, err := Open(path, opts)
		if err == nil {
			s.Close()
		}
		return err
	}
	if err := open(Options{}); err != nil { // no sealer: no key check yet
		t.Fatal(err)
	}
	if err := open(Options{Sealer: k1}); err != nil {
		t.Fatal(err)
	}
	if err := open(Options{Sealer: k1}); err != nil {
		t.Fatalf("same key refused: %v", err)
	}
	if err := open(Options{Sealer: k2}); err != ErrWrongMasterKey {
		t.Fatalf("other key: %v", err)
	}
	s, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  *Sealer
		bad  bool
	}{{"right key", k1, false}, {"other key", k2, true}, {"no key", nil, true}} {
		if p, err := s.CheckMasterKey(tc.key); err != nil || (len(p) > 0) != tc.bad {
			t.Errorf("%s: %v %v", tc.name, p, err)
		}
	}
	s.Close()
	if err := open(Options{Sealer: k2, NewMasterKey: true}); err != nil {
		t.Fatal(err)
	}
	if err := open(Options{Sealer: k1}); err != ErrWrongMasterKey {
		t.Fatalf("old key after replacement: %v", err)
	}
}

// TestWarehouseFileRecords: a recorded warehouse file must be on disk; an unrecorded one
// (never written) may be absent.
func TestWarehouseFileRecords(t *testing.T) {
	s, _ := openTest(t)
	if p, _ := s.CheckWarehouseFiles(nil); len(p) > 0 {
		t.Fatalf("nothing recorded: %v", p)
	}
	if err := s.NoteWarehouseFiles("wh_a", "wh_b"); err != nil {
		t.Fatal(err)
	}
	if err := s.NoteWarehouseFiles("wh_a"); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.CheckWarehouseFiles([]string{"wh_a", "wh_b", "wh_c"}); len(p) > 0 {
		t.Fatalf("all present: %v", p)
	}
	if p, _ := s.CheckWarehouseFiles([]string{"wh_a"}); len(p) != 1 || !bytes.Contains([]byte(p[0]), []byte("wh_b.db is missing")) {
		t.Fatalf("one lost: %v", p)
	}
}

// TestKeyCheckOfAnOlderFileIsNotTakenFromAWrongKey: a data file from before key checks
// that holds sealed secrets gets its key check only from a key that opens them; a restore
// without its lookout.key (a fresh key) is refused instead of being sealed into the check.
func TestKeyCheckOfAnOlderFileIsNotTakenFromAWrongKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lookout.db")
	k1, _ := NewSealer(bytes.Repeat([]byte{1}, 32))
	k2, _ := NewSealer(bytes.Repeat([]byte{2}, 32))
	s, err := Open(path, Options{Sealer: k1})
	if err != nil {
		t.Fatal(err)
	}
	_, ws := owner(t, s, "o@example.com")
	p, err := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("x")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateCredential(p.ID, CredentialInput{Name: ptr("pg"), Type: ptr("password"), Username: ptr("u"), Secret: ptr("s3cret-password-1234")}); err != nil {
		t.Fatal(err)
	}
	// As a file made before key checks: no check stored.
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyCheckKey) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(path, Options{Sealer: k2}); err != ErrWrongMasterKey {
		if s != nil {
			s.Close()
		}
		t.Fatalf("a key that opens no secret was accepted: %v", err)
	}
	s, err = Open(path, Options{Sealer: k1})
	if err != nil {
		t.Fatalf("the right key: %v", err)
	}
	s.Close()
	if _, err := Open(path, Options{Sealer: k2}); err != ErrWrongMasterKey {
		t.Fatalf("after the check was written: %v", err)
	}
}
