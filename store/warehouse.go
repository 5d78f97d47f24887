package store

import (
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Warehouse types.
const (
	WarehouseEmbedded   = "embedded"
	WarehousePostgres   = "postgres"
	WarehouseClickHouse = "clickhouse"
)

// DefaultLocalRetentionHours is how long an external warehouse keeps its local record log
// when config.local_retention_hours is not given: a day of records to ship again from if
// the engine loses some.
const DefaultLocalRetentionHours = 24

// WarehouseConfig is a warehouse's non-secret connection settings: url and database for
// clickhouse; host, port, database, schema and sslmode for postgres; local_retention_hours
// for both. An embedded warehouse has none.
type WarehouseConfig struct {
	URL                 string `json:"url,omitempty"`
	Host                string `json:"host,omitempty"`
	Port                int    `json:"port,omitempty"`
	Database            string `json:"database,omitempty"`
	Schema              string `json:"schema,omitempty"`
	SSLMode             string `json:"sslmode,omitempty"`
	LocalRetentionHours int    `json:"local_retention_hours,omitempty"`
}

// Warehouse is where a project's records are stored.
type Warehouse struct {
	Meta
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Config       WarehouseConfig `json:"config"`
	CredentialID string          `json:"credential_id"`
}

// External reports whether the warehouse is an engine Lookout connects to (not embedded).
func (w Warehouse) External() bool { return w.Type != WarehouseEmbedded }

// WarehouseInput is a warehouse's writable fields.
type WarehouseInput struct {
	ProjectID    *string          `json:"project_id"`
	Name         *string          `json:"name"`
	Type         *string          `json:"type"`
	Config       *WarehouseConfig `json:"config"`
	CredentialID *string          `json:"credential_id"`
}

var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// apply copies the given fields of in; a config given replaces the whole config. The type
// is set here only for a new warehouse: change refuses a different one first.
func (w *Warehouse) apply(in WarehouseInput) {
	if in.Name != nil {
		w.Name = strings.TrimSpace(*in.Name)
	}
	if in.Type != nil {
		w.Type = *in.Type
	}
	if in.Config != nil {
		w.Config = *in.Config
	}
	if in.CredentialID != nil {
		w.CredentialID = *in.CredentialID
	}
}

// change applies an update to a stored warehouse: the project and the type stay.
func (w *Warehouse) change(tx *bolt.Tx, in WarehouseInput) error {
	if in.ProjectID != nil && *in.ProjectID != w.ProjectID {
		return Invalid(FieldError{Field: "project_id", Message: "cannot change: a resource stays in its project"})
	}
	if in.Type != nil && *in.Type != w.Type {
		return conflictField("type", "the type of a warehouse cannot change (it is %s): create another warehouse", w.Type)
	}
	w.apply(in)
	return w.validate(tx)
}

// validate checks a warehouse and fills the defaults of its type's config.
func (w *Warehouse) validate(tx *bolt.Tx) error {
	var f fieldErrors
	if n := utf8.RuneCountInString(w.Name); n == 0 || n > 200 {
		f.add("name", "must be 1 to 200 characters")
	}
	f.name("name", w.Name)
	c := &w.Config
	switch w.Type {
	case WarehouseEmbedded:
		if *c != (WarehouseConfig{}) {
			f.add("config", "must be empty for an embedded warehouse")
		}
		if w.CredentialID != "" {
			f.add("credential_id", "must be empty for an embedded warehouse")
		}
		return f.err()
	case WarehousePostgres:
		if c.URL != "" {
			f.add("config.url", "must be empty for a postgres warehouse: give host, port and database")
		}
		if c.Port == 0 {
			c.Port = 5432
		}
		if c.Schema == "" {
			c.Schema = "public"
		}
		if c.SSLMode == "" {
			c.SSLMode = "prefer"
		}
		if h := strings.TrimSpace(c.Host); h == "" || len(h) > 253 || strings.ContainsAny(h, " /?#@") {
			f.add("config.host", "must be a host name or address")
		}
		if c.Port < 1 || c.Port > 65535 {
			f.add("config.port", "must be 1 to 65535")
		}
		if c.Database == "" || len(c.Database) > 63 {
			f.add("config.database", "must be 1 to 63 characters")
		}
		if len(c.Schema) > 63 {
			f.add("config.schema", "must be at most 63 characters")
		}
		if !contains(sslModes, c.SSLMode) {
			f.add("config.sslmode", "must be one of %s", strings.Join(sslModes, ", "))
		}
	case WarehouseClickHouse:
		for _, s := range []struct {
			field string
			set   bool
		}{{"host", c.Host != ""}, {"port", c.Port != 0}, {"schema", c.Schema != ""}, {"sslmode", c.SSLMode != ""}} {
			if s.set {
				f.add("config."+s.field, "must be empty for a clickhouse warehouse: its address is config.url")
			}
		}
		if msg := checkClickHouseURL(c.URL); msg != "" {
			f.add("config.url", "%s", msg)
		}
		if c.Database == "" {
			c.Database = "default"
		}
		if len(c.Database) > 63 {
			f.add("config.database", "must be 1 to 63 characters")
		}
	default:
		f.add("type", "must be embedded, postgres or clickhouse")
		return f.err()
	}
	if c.LocalRetentionHours == 0 {
		c.LocalRetentionHours = DefaultLocalRetentionHours
	}
	if c.LocalRetentionHours < 1 || c.LocalRetentionHours > 8760 {
		f.add("config.local_retention_hours", "must be 1 to 8760 (hours the local record log is kept; default %d)", DefaultLocalRetentionHours)
	}
	if w.CredentialID != "" {
		cr, err := getInProject[credentialRecord](tx, KindCredential, w.ProjectID, w.CredentialID)
		switch {
		case err != nil:
			f.add("credential_id", "is not a warehouse credential of this project")
		case cr.Type != CredentialPassword:
			f.add("credential_id", "must be a credential of type password (a user name and a password), not %s", cr.Type)
		}
	}
	return f.err()
}

// checkClickHouseURL says what is wrong with the address of ClickHouse's HTTP interface,
// or "" when nothing is. Credentials belong in a warehouse credential, never in the URL,
// which is shown on every read; the engine sets its own query parameters.
func checkClickHouseURL(raw string) string {
	const want = "must be the http or https address of ClickHouse's HTTP interface, such as http://clickhouse.internal:8123"
	if raw == "" || len(raw) > 2048 {
		return want
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.Hostname() == "":
		return want
	case u.User != nil:
		return "must not carry a user name or password: put them in a warehouse credential of type password"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a query or a fragment"
	}
	return ""
}

// newWarehouse builds a project's new warehouse from in, validated, with defaults filled.
func newWarehouse(tx *bolt.Tx, projectID string, in WarehouseInput) (Warehouse, error) {
	w := Warehouse{Meta: Meta{ProjectID: projectID}}
	if tx.Bucket(bucketProjects).Get([]byte(projectID)) == nil {
		return w, NotFound("project")
	}
	w.apply(in)
	return w, w.validate(tx)
}

// CreateWarehouse adds a warehouse destination to a project. Connecting to an external
// engine is not done here (no network inside a transaction): the caller tests the
// connection with PrepareWarehouse's result first.
// Returns validation_failed, not_found.
func (s *Store) CreateWarehouse(projectID string, in WarehouseInput) (Warehouse, error) {
	var w Warehouse
	err := s.updateRuntime(func(tx *bolt.Tx) (err error) {
		if w, err = newWarehouse(tx, projectID, in); err != nil {
			return err
		}
		return s.insertRes(tx, KindWarehouse, &w, s.now())
	})
	return w, err
}

// UpdateWarehouse replaces a warehouse's writable fields (name, config, credential_id);
// fields absent from in keep their value, a config given replaces the whole config. The
// type and the project cannot change. The embedded "default" warehouse may be renamed; its
// config stays empty. Returns validation_failed, not_found, conflict (type),
// precondition_failed.
func (s *Store) UpdateWarehouse(projectID, id string, in WarehouseInput, ifMatch int) (Warehouse, error) {
	return updateRes(s, KindWarehouse, projectID, id, ifMatch, func(tx *bolt.Tx, w *Warehouse) error {
		return w.change(tx, in)
	})
}

// PrepareWarehouse returns, without writing, the warehouse that CreateWarehouse (id "")
// or UpdateWarehouse (id set, with ifMatch) would store from in: validated, defaults
// filled, at the version the update would replace. The caller tests the connection with
// it between this read and the write, so no network I/O happens inside a transaction.
// Returns validation_failed, not_found, conflict, precondition_failed.
func (s *Store) PrepareWarehouse(projectID, id string, in WarehouseInput, ifMatch int) (Warehouse, error) {
	var w Warehouse
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		if id == "" {
			w, err = newWarehouse(tx, projectID, in)
			return err
		}
		if w, err = getInProject[Warehouse](tx, KindWarehouse, projectID, id); err != nil {
			return err
		}
		if err := checkIfMatch(ifMatch, w.Version); err != nil {
			return err
		}
		return w.change(tx, in)
	})
	return w, err
}

// WarehouseTarget returns the user name and the unsealed secret an external warehouse
// signs in with, from its credential ("", "" without one), for a connection test or the
// engine. Returns validation_failed (the credential is gone), internal.
func (s *Store) WarehouseTarget(projectID string, w Warehouse) (username, secret string, err error) {
	if w.CredentialID == "" {
		return "", "", nil
	}
	c, err := readOne[credentialRecord](s, KindCredential, projectID, w.CredentialID)
	if IsCode(err, CodeNotFound) {
		return "", "", Invalid(FieldError{Field: "credential_id", Message: "is not a warehouse credential of this project"})
	}
	if err != nil {
		return "", "", err
	}
	if s.sealer == nil {
		return "", "", Errorf(CodeInternal, "no master key loaded")
	}
	pt, err := s.sealer.Unseal(c.SealedSecret, []byte(c.ID))
	return c.Username, string(pt), err
}

// createDefaultWarehouse gives a project its embedded warehouse named "default".
func (s *Store) createDefaultWarehouse(tx *bolt.Tx, projectID string, now time.Time) error {
	w := Warehouse{Meta: Meta{ProjectID: projectID}, Name: "default", Type: WarehouseEmbedded}
	return s.insertRes(tx, KindWarehouse, &w, now)
}

// defaultWarehouse returns the id of a project's first embedded warehouse.
func defaultWarehouse(tx *bolt.Tx, projectID string) (string, error) {
	id := ""
	err := eachRes[Warehouse](tx, KindWarehouse, projectID, func(w *Warehouse) error {
		if id == "" && w.Type == WarehouseEmbedded {
			id = w.ID
		}
		return nil
	})
	if err == nil && id == "" {
		if tx.Bucket(bucketProjects).Get([]byte(projectID)) == nil {
			return "", NotFound("project")
		}
		return "", Invalid(FieldError{Field: "warehouse_id", Message: "is required: the project has no embedded warehouse"})
	}
	return id, err
}

// Warehouse returns one warehouse. Returns not_found.
func (s *Store) Warehouse(projectID, id string) (Warehouse, error) {
	return readOne[Warehouse](s, KindWarehouse, projectID, id)
}

// ListWarehouses lists a project's warehouses; typ "" lists all.
func (s *Store) ListWarehouses(projectID, typ string, page Page) ([]Warehouse, string, error) {
	var out []Warehouse
	var next string
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, next, err = listRes[Warehouse](tx, KindWarehouse, projectID, page, func(w *Warehouse) bool {
			return typ == "" || w.Type == typ
		})
		return err
	})
	return out, next, err
}
