package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// seedRecords makes a data dir with an owner, a project whose embedded warehouse holds
// three records, and stops the server: a data dir with every kind of file.
func seedRecords(t *testing.T, dir string) (warehouse string) {
	t.Helper()
	token, ws := bootstrap(t, dir)
	p := startServe(t, freeArgs(dir)...)
	c := client{t: t, base: p.base, auth: token}
	mk := c.create
	pid := mk("/projects", map[string]any{"workspace_id": ws, "name": "seed"})["id"].(string)
	warehouse = mk("/models", map[string]any{"project_id": pid, "key": "events", "fields": []map[string]any{{"name": "n", "type": "integer"}}})["warehouse_id"].(string)
	ic := mk("/ingest-clients", map[string]any{"project_id": pid, "name": "in", "models": []string{"events"}})["id"].(string)
	key := mk("/runtime-api-keys", map[string]any{"project_id": pid, "name": "k", "kind": "ingest", "client_id": ic})["key"].(string)
	req, _ := http.NewRequest("POST", listenerURL(t, p, "ingest")+"/ingest?schema=events", strings.NewReader("{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"))
	req.Header.Set("Authorization", "ApiKey "+key)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("ingest: %v %v", err, resp)
	}
	resp.Body.Close()
	p.stop(t)
	if _, err := os.Stat(filepath.Join(dir, "warehouses", warehouse+".db")); err != nil {
		t.Fatalf("no warehouse file: %v", err)
	}
	return warehouse
}

// fileState is what a read-only command must not change about a file.
type fileState struct {
	sum   [sha256.Size]byte
	mtime time.Time
	mode  fs.FileMode
}

// dirState records every file and directory under dir.
func dirState(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := fileState{mtime: info.ModTime(), mode: info.Mode()}
		if info.Mode().IsRegular() {
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			st.sum = sha256.Sum256(raw)
		}
		out[path] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameState(t *testing.T, what string, before, after map[string]fileState) {
	t.Helper()
	for path, b := range before {
		a, ok := after[path]
		switch {
		case !ok:
			t.Errorf("%s removed %s", what, path)
		case a.sum != b.sum:
			t.Errorf("%s changed the bytes of %s", what, path)
		case !a.mtime.Equal(b.mtime):
			t.Errorf("%s changed the mtime of %s (%s -> %s)", what, path, b.mtime, a.mtime)
		case a.mode != b.mode:
			t.Errorf("%s changed the mode of %s", what, path)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("%s created %s", what, path)
		}
	}
}

// TestOfflineCheckAndBackupChangeNothing: check and backup of a data dir no server holds
// open every file read-only: no byte, mtime or mode changes and no file appears — also in
// a data dir from before lookout.lock existed.
func TestOfflineCheckAndBackupChangeNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	seedRecords(t, dir)
	for _, withoutLock := range []bool{false, true} {
		if withoutLock {
			os.Remove(filepath.Join(dir, lockName)) // as an older lookout left it
		}
		before := dirState(t, dir)
		if out := run(t, "", false, "check", "--data-dir", dir); !strings.Contains(out, "ok") {
			t.Fatalf("check: %s", out)
		}
		sameState(t, "check", before, dirState(t, dir))
		run(t, "", false, "backup", "--data-dir", dir, "--out", filepath.Join(t.TempDir(), "b"))
		sameState(t, "backup", before, dirState(t, dir))
	}
}

// TestBackupRefusesDangerousOut: a backup is never written inside the data dir (by any
// spelling of its path) or over anything that exists; the data dir stays as it was.
func TestBackupRefusesDangerousOut(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	bootstrap(t, dir)
	link := filepath.Join(root, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(root, "old-backup")
	os.Mkdir(existing, 0o700)
	before := dirState(t, dir)
	for _, tc := range []struct{ name, out, want string }{
		{"the live file", filepath.Join(dir, "lookout.db"), "already exists"},
		{"a new file in the data dir", filepath.Join(dir, "backup"), "inside the data dir"},
		{"the data dir itself", dir, "already exists"},
		{"through a symlink", filepath.Join(link, "backup"), "inside the data dir"},
		{"through a symlink onto the live file", filepath.Join(link, "lookout.db"), "already exists"},
		{"dot-dot back into the data dir", filepath.Join(root, "x", "..", "data", "b"), "inside the data dir"},
		{"an existing directory", existing, "already exists"},
		{"a missing parent", filepath.Join(root, "nowhere", "b"), "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := newRootCommand()
			cmd.SetArgs([]string{"backup", "--data-dir", dir, "--out", tc.out})
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			sameState(t, "a refused backup", before, dirState(t, dir))
		})
	}
}

// TestLockOutlivesAReplacedDataFile: the process lock is on lookout.lock, which nothing
// replaces. Even with lookout.db replaced under a running server, a second serve refuses
// the data dir and leaves the first one's admin socket alone.
func TestLockOutlivesAReplacedDataFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	startServe(t, freeArgs(dir)...)
	raw, err := os.ReadFile(filepath.Join(dir, "lookout.db"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "lookout.db")); err != nil {
		t.Fatal(err)
	}
	out := run(t, "", true, append([]string{"serve"}, freeArgs(dir)...)...)
	if !strings.Contains(out, "in use by another process") {
		t.Fatalf("second serve said %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "lookout.sock")); err != nil {
		t.Fatalf("the first server's socket is gone: %v", err)
	}
}

// TestBackupFailingHalfwayLeavesNoSet: when one file of the set cannot be copied, no
// backup directory appears (and no partial one is left): never a control-plane copy
// beside warehouse copies of another moment.
func TestBackupFailingHalfwayLeavesNoSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	warehouse := seedRecords(t, dir)
	// A second warehouse file that cannot be read: the copy fails after lookout.db and
	// the good warehouse file were written.
	if err := os.WriteFile(filepath.Join(dir, "warehouses", "wh_zzz.db"), bytes.Repeat([]byte("x"), 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	out := filepath.Join(root, "b")
	said := run(t, "", true, "backup", "--data-dir", dir, "--out", out)
	if !strings.Contains(said, "wh_zzz") {
		t.Fatalf("backup said %q", said)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("a failed backup left %v", entries)
	}
	os.Remove(filepath.Join(dir, "warehouses", "wh_zzz.db"))
	run(t, "", false, "backup", "--data-dir", dir, "--out", out)
	for _, f := range []string{"lookout.db", "warehouses/" + warehouse + ".db", "SHA256SUMS"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatalf("backup set lacks %s: %v", f, err)
		}
	}
}

// TestCheckFindsLostWarehouseFilesAndWrongKey: a restored data dir without its warehouse
// file, or checked with another master key, is not "ok".
func TestCheckFindsLostWarehouseFilesAndWrongKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	warehouse := seedRecords(t, dir)
	backup := filepath.Join(t.TempDir(), "b")
	run(t, "", false, "backup", "--data-dir", dir, "--out", backup)
	key := filepath.Join(dir, "lookout.key")
	otherKey := filepath.Join(t.TempDir(), "other.key")
	os.WriteFile(otherKey, bytes.Repeat([]byte{7}, 32), 0o600)

	onlyDB := t.TempDir()
	raw, _ := os.ReadFile(filepath.Join(backup, "lookout.db"))
	os.WriteFile(filepath.Join(onlyDB, "lookout.db"), raw, 0o600)

	for _, tc := range []struct {
		name, dir, key string
		wantErr        bool
		want           string
	}{
		{"the whole set", backup, key, false, "ok"},
		{"without its warehouse file", onlyDB, key, true, "warehouse " + warehouse + ": its file warehouses/" + warehouse + ".db is missing"},
		{"with another master key", backup, otherKey, true, "does not open this data file's key check"},
		{"without a master key", backup, filepath.Join(t.TempDir(), "absent.key"), true, "master key: none given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, "", tc.wantErr, "check", "--data-dir", tc.dir, "--master-key-file", tc.key)
			if !strings.Contains(out, tc.want) {
				t.Fatalf("check said %q, want %q", out, tc.want)
			}
		})
	}
	// serve refuses the wrong key, and takes it when told the old one is lost.
	out := run(t, "", true, append([]string{"serve", "--master-key-file", otherKey}, freeArgs(dir)...)...)
	if !strings.Contains(out, "--new-master-key") {
		t.Fatalf("serve with another key said %q", out)
	}
	p := startServe(t, append([]string{"--master-key-file", otherKey, "--new-master-key"}, freeArgs(dir)...)...)
	p.stop(t)
	if out := run(t, "", false, "check", "--data-dir", dir, "--master-key-file", otherKey); !strings.Contains(out, "ok") {
		t.Fatalf("check after --new-master-key: %s", out)
	}
}

// TestEphemeralRemovesItsDirOnSIGHUP: a fixture whose terminal goes away cleans up too.
func TestEphemeralRemovesItsDirOnSIGHUP(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--ephemeral", "--log-level", "warn")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		DataDir string `json:"data_dir"`
	}
	if err := json.Unmarshal(line, &fx); err != nil || fx.DataDir == "" {
		t.Fatalf("fixture line %q: %v", line, err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGHUP: %v", err)
	}
	if _, err := os.Stat(fx.DataDir); !os.IsNotExist(err) {
		t.Fatalf("ephemeral data dir left behind after SIGHUP: %v", err)
	}
}
