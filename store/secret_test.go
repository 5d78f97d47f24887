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
	if _, err := LoadMasterKey("/nonexistent/never-read", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"); err != nil {
		t.Fatal(err)
	}
}
