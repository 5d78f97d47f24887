package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"lookout/store"
)

// TestCommands runs the cobra commands in-process (SetArgs/SetOut) over a real data dir.
func TestCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	missing := filepath.Join(t.TempDir(), "nothing")
	for _, tc := range []struct {
		name    string
		args    []string
		stdin   string
		wantErr string
		wantOut string
	}{
		{"version", []string{"version"}, "", "", fmt.Sprintf("data schema %d", store.SchemaVersion())},
		{"check of a missing dir", []string{"check", "--data-dir", missing}, "", "no data file", ""},
		{"backup of a missing dir", []string{"backup", "--data-dir", missing, "--out", filepath.Join(missing, "x")}, "", "no data file", ""},
		{"backup without --out", []string{"backup", "--data-dir", dir}, "", "--out is required", ""},
		{"owner without password-stdin", []string{"admin", "create-owner", "--data-dir", dir, "--email", "a@example.com"}, "", "--password-stdin", ""},
		{"owner with empty stdin", []string{"admin", "create-owner", "--data-dir", dir, "--email", "a@example.com", "--password-stdin"}, "", "no password", ""},
		{"owner with short password", []string{"admin", "create-owner", "--data-dir", dir, "--email", "a@example.com", "--password-stdin"}, "short\n", "password", ""},
		{"owner", []string{"admin", "create-owner", "--data-dir", dir, "--email", "a@example.com", "--password-stdin"}, "long enough\n", "", `"workspace_id":"ws_`},
		{"owner twice", []string{"admin", "create-owner", "--data-dir", dir, "--email", "a@example.com", "--password-stdin"}, "long enough\n", "already exists", ""},
		{"token for nobody", []string{"token", "create", "--data-dir", dir, "--email", "b@example.com", "--scopes", "all"}, "", "no account", ""},
		{"token bad scope", []string{"token", "create", "--data-dir", dir, "--email", "a@example.com", "--scopes", "root"}, "", "unknown scope", ""},
		{"token bad expiry", []string{"token", "create", "--data-dir", dir, "--email", "a@example.com", "--scopes", "all", "--expires", "soon"}, "", "--expires", ""},
		{"token", []string{"token", "create", "--data-dir", dir, "--email", "a@example.com", "--scopes", "projects:read", "--expires", "24h"}, "", "", "lk_mgmt_"},
		{"check", []string{"check", "--data-dir", dir}, "", "", "ok"},
		{"backup", []string{"backup", "--data-dir", dir, "--out", filepath.Join(t.TempDir(), "b.db")}, "", "", "wrote "},
		{"serve bad log format", []string{"serve", "--data-dir", dir, "--log-format", "xml"}, "", "--log-format", ""},
		{"serve half TLS", []string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--ingest-addr", "127.0.0.1:0", "--query-addr", "127.0.0.1:0", "--tls-cert", "x.pem"}, "", "both a TLS certificate and a key", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newRootCommand()
			var out bytes.Buffer
			cmd.SetArgs(tc.args)
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetIn(strings.NewReader(tc.stdin))
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v; out %s", err, out.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Fatalf("out = %q, want %q", out.String(), tc.wantOut)
			}
		})
	}
}
