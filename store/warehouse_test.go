package store

import (
	"path/filepath"
	"strings"
	"testing"

	"lookout/internal/testclock"
)

// openSealed is openTest with a master key, so credentials can be stored.
func openSealed(t *testing.T) *Store {
	t.Helper()
	sealer, err := NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(t.TempDir(), "lookout.db"), Options{Now: testclock.New().Now, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if problems, err := s.Check(); err != nil || len(problems) > 0 {
			t.Errorf("check: %v %v", err, problems)
		}
		s.Close()
	})
	return s
}

func TestWarehouseValidation(t *testing.T) {
	s := openSealed(t)
	_, ws := owner(t, s, "o@example.com")
	p, _ := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("x")})
	pw, err := s.CreateCredential(p.ID, CredentialInput{Name: ptr("pw"), Type: ptr(CredentialPassword), Username: ptr("lookout"), Secret: ptr("the-password-1234")})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.CreateCredential(p.ID, CredentialInput{Name: ptr("tok"), Type: ptr(CredentialToken), Secret: ptr("a-token")})
	if err != nil {
		t.Fatal(err)
	}
	ch := func(c WarehouseConfig) WarehouseInput {
		return WarehouseInput{Name: ptr("ch"), Type: ptr(WarehouseClickHouse), Config: &c}
	}
	pg := func(c WarehouseConfig) WarehouseInput {
		return WarehouseInput{Name: ptr("pg"), Type: ptr(WarehousePostgres), Config: &c}
	}
	for _, c := range []struct {
		name  string
		in    WarehouseInput
		field string // "" when valid
		want  WarehouseConfig
	}{
		{"clickhouse defaults", ch(WarehouseConfig{URL: "http://ch.internal:8123"}), "", WarehouseConfig{URL: "http://ch.internal:8123", Database: "default", LocalRetentionHours: 24}},
		{"clickhouse https with a path", ch(WarehouseConfig{URL: "https://proxy.example/clickhouse", Database: "events", LocalRetentionHours: 72}), "", WarehouseConfig{URL: "https://proxy.example/clickhouse", Database: "events", LocalRetentionHours: 72}},
		{"clickhouse without url", ch(WarehouseConfig{}), "config.url", WarehouseConfig{}},
		{"clickhouse ftp url", ch(WarehouseConfig{URL: "ftp://ch.internal"}), "config.url", WarehouseConfig{}},
		{"clickhouse url without host", ch(WarehouseConfig{URL: "http://:8123"}), "config.url", WarehouseConfig{}},
		{"clickhouse url with user info", ch(WarehouseConfig{URL: "http://u:p@ch.internal:8123"}), "config.url", WarehouseConfig{}},
		{"clickhouse url with query", ch(WarehouseConfig{URL: "http://ch.internal:8123/?user=x"}), "config.url", WarehouseConfig{}},
		{"clickhouse url with fragment", ch(WarehouseConfig{URL: "http://ch.internal:8123/#x"}), "config.url", WarehouseConfig{}},
		{"clickhouse with host", ch(WarehouseConfig{URL: "http://ch.internal:8123", Host: "ch.internal"}), "config.host", WarehouseConfig{}},
		{"clickhouse with sslmode", ch(WarehouseConfig{URL: "http://ch.internal:8123", SSLMode: "require"}), "config.sslmode", WarehouseConfig{}},
		{"clickhouse long database", ch(WarehouseConfig{URL: "http://ch.internal:8123", Database: strings.Repeat("d", 64)}), "config.database", WarehouseConfig{}},
		{"retention too long", ch(WarehouseConfig{URL: "http://ch.internal:8123", LocalRetentionHours: 8761}), "config.local_retention_hours", WarehouseConfig{}},
		{"retention negative", pg(WarehouseConfig{Host: "db", Database: "d", LocalRetentionHours: -1}), "config.local_retention_hours", WarehouseConfig{}},
		{"postgres defaults", pg(WarehouseConfig{Host: "db", Database: "d"}), "", WarehouseConfig{Host: "db", Port: 5432, Database: "d", Schema: "public", SSLMode: "prefer", LocalRetentionHours: 24}},
		{"postgres with url", pg(WarehouseConfig{Host: "db", Database: "d", URL: "http://db"}), "config.url", WarehouseConfig{}},
		{"embedded with retention", WarehouseInput{Name: ptr("e"), Type: ptr(WarehouseEmbedded), Config: &WarehouseConfig{LocalRetentionHours: 24}}, "config", WarehouseConfig{}},
		{"password credential", WarehouseInput{Name: ptr("ch"), Type: ptr(WarehouseClickHouse), Config: &WarehouseConfig{URL: "http://ch"}, CredentialID: &pw.ID}, "", WarehouseConfig{URL: "http://ch", Database: "default", LocalRetentionHours: 24}},
		{"token credential", WarehouseInput{Name: ptr("ch"), Type: ptr(WarehouseClickHouse), Config: &WarehouseConfig{URL: "http://ch"}, CredentialID: &tok.ID}, "credential_id", WarehouseConfig{}},
		{"unknown type", WarehouseInput{Name: ptr("x"), Type: ptr("oracle")}, "type", WarehouseConfig{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prepared, perr := s.PrepareWarehouse(p.ID, "", c.in, 0)
			w, err := s.CreateWarehouse(p.ID, c.in)
			if c.field == "" {
				if err != nil || perr != nil {
					t.Fatalf("create: %v, prepare: %v", err, perr)
				}
				if w.Config != c.want || prepared.Config != c.want {
					t.Fatalf("config %+v, prepared %+v, want %+v", w.Config, prepared.Config, c.want)
				}
				return
			}
			for _, err := range []error{err, perr} {
				e, ok := err.(*Error)
				if !ok || e.Code != CodeValidation || len(e.Fields) == 0 || e.Fields[0].Field != c.field {
					t.Fatalf("want validation_failed naming %s, got %v", c.field, err)
				}
			}
		})
	}
	if e := (&Warehouse{Type: "oracle", Name: "x"}).validate(nil); !strings.Contains(e.Error(), "must be embedded, postgres or clickhouse") {
		t.Fatalf("type message: %v", e)
	}
}

func TestUpdateWarehouse(t *testing.T) {
	s := openSealed(t)
	_, ws := owner(t, s, "o@example.com")
	p, _ := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("x")})
	other, _ := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("y")})
	cred, _ := s.CreateCredential(p.ID, CredentialInput{Name: ptr("pw"), Type: ptr(CredentialPassword), Username: ptr("lookout"), Secret: ptr("the-password-1234")})
	w, err := s.CreateWarehouse(p.ID, WarehouseInput{Name: ptr("ch"), Type: ptr(WarehouseClickHouse), Config: &WarehouseConfig{URL: "http://ch:8123"}, CredentialID: &cred.ID})
	if err != nil {
		t.Fatal(err)
	}

	// A rename keeps the config; a config given replaces it whole (defaults filled again).
	w2, err := s.UpdateWarehouse(p.ID, w.ID, WarehouseInput{Name: ptr("renamed")}, w.Version)
	if err != nil || w2.Name != "renamed" || w2.Config != w.Config || w2.Version != 2 || w2.CredentialID != cred.ID {
		t.Fatalf("rename: %+v %v", w2, err)
	}
	w3, err := s.UpdateWarehouse(p.ID, w.ID, WarehouseInput{Config: &WarehouseConfig{URL: "https://ch2:8443", LocalRetentionHours: 48}, CredentialID: ptr("")}, 0)
	if err != nil || w3.Config != (WarehouseConfig{URL: "https://ch2:8443", Database: "default", LocalRetentionHours: 48}) || w3.CredentialID != "" {
		t.Fatalf("replace config: %+v %v", w3, err)
	}

	for _, c := range []struct {
		name    string
		in      WarehouseInput
		ifMatch int
		code    string
	}{
		{"stale If-Match", WarehouseInput{Name: ptr("x")}, 1, CodePreconditionFailed},
		{"type change", WarehouseInput{Type: ptr(WarehousePostgres)}, 0, CodeConflict},
		{"project change", WarehouseInput{ProjectID: &other.ID}, 0, CodeValidation},
		{"bad config", WarehouseInput{Config: &WarehouseConfig{URL: "ch:8123"}}, 0, CodeValidation},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, perr := s.PrepareWarehouse(p.ID, w.ID, c.in, c.ifMatch)
			_, err := s.UpdateWarehouse(p.ID, w.ID, c.in, c.ifMatch)
			if ErrorCode(err) != c.code || ErrorCode(perr) != c.code {
				t.Fatalf("update %v, prepare %v; want %s", err, perr, c.code)
			}
			if got, _ := s.Warehouse(p.ID, w.ID); got.Version != w3.Version {
				t.Fatalf("a refused update wrote version %d", got.Version)
			}
		})
	}
	if _, err := s.UpdateWarehouse(other.ID, w.ID, WarehouseInput{Name: ptr("x")}, 0); !IsCode(err, CodeNotFound) {
		t.Fatalf("another project's warehouse: %v", err)
	}

	// The default warehouse may be renamed; its config stays empty.
	def, _, _ := s.ListWarehouses(p.ID, WarehouseEmbedded, Page{Limit: 1})
	if _, err := s.UpdateWarehouse(p.ID, def[0].ID, WarehouseInput{Name: ptr("local")}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateWarehouse(p.ID, def[0].ID, WarehouseInput{Config: &WarehouseConfig{LocalRetentionHours: 5}}, 0); !IsCode(err, CodeValidation) {
		t.Fatalf("embedded config: %v", err)
	}

	// Prepare writes nothing and reports the version it read.
	prep, err := s.PrepareWarehouse(p.ID, w.ID, WarehouseInput{Name: ptr("prepared")}, 0)
	if err != nil || prep.Name != "prepared" || prep.Version != w3.Version {
		t.Fatalf("prepare: %+v %v", prep, err)
	}
	if got, _ := s.Warehouse(p.ID, w.ID); got.Name == "prepared" {
		t.Fatal("prepare wrote")
	}
}

func TestWarehouseTarget(t *testing.T) {
	s := openSealed(t)
	_, ws := owner(t, s, "o@example.com")
	p, _ := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("x")})
	cred, _ := s.CreateCredential(p.ID, CredentialInput{Name: ptr("pw"), Type: ptr(CredentialPassword), Username: ptr("lookout"), Secret: ptr("the-password-1234")})
	w := Warehouse{Meta: Meta{ProjectID: p.ID}, Type: WarehousePostgres, CredentialID: cred.ID}
	if u, sec, err := s.WarehouseTarget(p.ID, w); err != nil || u != "lookout" || sec != "the-password-1234" {
		t.Fatalf("target: %q %q %v", u, sec, err)
	}
	w.CredentialID = ""
	if u, sec, err := s.WarehouseTarget(p.ID, w); err != nil || u != "" || sec != "" {
		t.Fatalf("no credential: %q %q %v", u, sec, err)
	}
	w.CredentialID = "whc_nope"
	if _, _, err := s.WarehouseTarget(p.ID, w); !IsCode(err, CodeValidation) {
		t.Fatalf("missing credential: %v", err)
	}
}
