package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesOpenKeyFile: serve refuses a master key file other accounts may read,
// says how to fix it, and starts with --insecure-key-permissions (issue 7, item 15).
func TestServeRefusesOpenKeyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "lookout.key")
	if err := os.WriteFile(key, bytes.Repeat([]byte{3}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, "", true, append([]string{"serve"}, freeArgs(dir)...)...)
	if !strings.Contains(out, "chmod 600") || !strings.Contains(out, "--insecure-key-permissions") {
		t.Fatalf("serve said %q", out)
	}
	p := startServe(t, append(freeArgs(dir), "--insecure-key-permissions")...)
	p.stop(t)
}

// TestServeMetricsToken: --metrics-token (or LOOKOUT_METRICS_TOKEN) closes /metrics to
// callers without it, and a short token is refused at start.
func TestServeMetricsToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	out := run(t, "", true, append([]string{"serve", "--metrics-token", "short"}, freeArgs(dir)...)...)
	if !strings.Contains(out, "at least 16 characters") {
		t.Fatalf("serve said %q", out)
	}
	const token = "0123456789abcdef0123456789abcdef"
	p := startServe(t, append(freeArgs(dir), "--metrics-token", token)...)
	for _, tc := range []struct {
		authz  string
		status int
	}{{"", 401}, {"Bearer " + token, 200}} {
		req, _ := http.NewRequest("GET", p.base+"/metrics", nil)
		if tc.authz != "" {
			req.Header.Set("Authorization", tc.authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("Authorization %q: %d, want %d", tc.authz, resp.StatusCode, tc.status)
		}
	}
	p.stop(t)
	if strings.Contains(p.logs(), token) {
		t.Fatal("the metrics token reached the log")
	}
}

// TestServeRefusesBadTimeouts: the read deadline flags take positive values only.
func TestServeRefusesBadTimeouts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, tc := range [][]string{
		{"--body-read-timeout", "0s"},
		{"--ingest-read-idle-timeout", "-1s"},
		{"--ingest-min-rate", "0"},
	} {
		out := run(t, "", true, append(append([]string{"serve"}, freeArgs(dir)...), tc...)...)
		if !strings.Contains(out, tc[0]) {
			t.Fatalf("%v: serve said %q", tc, out)
		}
	}
}
