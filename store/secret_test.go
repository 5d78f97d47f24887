package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestMasterKeyPermissions: a key file its group or other accounts may access is refused
// unless the operator says the file system cannot do better (issue 7, item 15).
func TestMasterKeyPermissions(t *testing.T) {
	key := bytes.Repeat([]byte{7}, MasterKeySize)
	for _, tc := range []struct {
		name     string
		mode     os.FileMode
		insecure bool
		refused  bool
	}{
		{"owner only", 0o600, false, false},
		{"owner read only", 0o400, false, false},
		{"group readable", 0o640, false, true},
		{"world readable", 0o644, false, true},
		{"group writable", 0o620, false, true},
		{"world readable, insecure allowed", 0o644, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lookout.key")
			if err := os.WriteFile(path, key, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			got, err := LoadMasterKey(path, "", KeyOptions{InsecurePermissions: tc.insecure})
			// check reads the key with the same rule (it used to read any file).
			if _, rerr := ReadMasterKey(path, "", KeyOptions{InsecurePermissions: tc.insecure}); errors.Is(rerr, ErrKeyPermissions) != tc.refused {
				t.Fatalf("ReadMasterKey: %v", rerr)
			}
			if tc.refused {
				if !errors.Is(err, ErrKeyPermissions) {
					t.Fatalf("err = %v, want ErrKeyPermissions", err)
				}
				if got != nil {
					t.Fatal("a refused key was returned")
				}
				return
			}
			if err != nil || !bytes.Equal(got, key) {
				t.Fatalf("got %x, %v", got, err)
			}
		})
	}
	// The environment variable involves no file, so nothing to check.
	if _, err := LoadMasterKey("/nonexistent/never-read", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", KeyOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestKeyFileIsCreatedWhole: a new key file appears complete or not at all (written under
// a temporary name, then linked), and nothing else is left in its directory.
func TestKeyFileIsCreatedWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lookout.key")
	key, err := LoadMasterKey(path, "", KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(raw, key) {
		t.Fatalf("file %x, key %x, %v", raw, key, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d entries left in the key's directory", len(entries))
	}
	again, err := LoadMasterKey(path, "", KeyOptions{})
	if err != nil || !bytes.Equal(again, key) {
		t.Fatal("a second load made another key")
	}
}
