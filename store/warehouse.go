package store

import (
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Warehouse types.
const (
	WarehouseEmbedded = "embedded"
	WarehousePostgres = "postgres"
)

// WarehouseConfig is a warehouse's non-secret connection settings (postgres only).
type WarehouseConfig struct {
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
	Database string `json:"database,omitempty"`
	Schema   string `json:"schema,omitempty"`
	SSLMode  string `json:"sslmode,omitempty"`
}

// Warehouse is where a project's records are stored.
type Warehouse struct {
	Meta
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Config       WarehouseConfig `json:"config"`
	CredentialID string          `json:"credential_id"`
}

// WarehouseInput is a warehouse's writable fields.
type WarehouseInput struct {
	ProjectID    *string          `json:"project_id"`
	Name         *string          `json:"name"`
	Type         *string          `json:"type"`
	Config       *WarehouseConfig `json:"config"`
	CredentialID *string          `json:"credential_id"`
}

var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

func (w *Warehouse) validate(tx *bolt.Tx) error {
	var f fieldErrors
	if n := utf8.RuneCountInString(w.Name); n == 0 || n > 200 {
		f.add("name", "must be 1 to 200 characters")
	}
	f.name("name", w.Name)
	switch w.Type {
	case WarehouseEmbedded:
		if w.Config != (WarehouseConfig{}) {
			f.add("config", "must be empty for an embedded warehouse")
		}
		if w.CredentialID != "" {
			f.add("credential_id", "must be empty for an embedded warehouse")
		}
	case WarehousePostgres:
		c := &w.Config
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
		if w.CredentialID != "" {
			if _, err := getInProject[credentialRecord](tx, KindCredential, w.ProjectID, w.CredentialID); err != nil {
				f.add("credential_id", "is not a warehouse credential of this project")
			}
		}
	default:
		f.add("type", "must be embedded or postgres")
	}
	return f.err()
}

// CreateWarehouse adds a warehouse destination to a project. Connecting to an external
// engine is the warehouse engine's job; here the configuration is only validated.
// Returns validation_failed, not_found.
func (s *Store) CreateWarehouse(projectID string, in WarehouseInput) (Warehouse, error) {
	var w Warehouse
	err := s.updateRuntime(func(tx *bolt.Tx) error {
		w = Warehouse{Meta: Meta{ProjectID: projectID}}
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
		if err := w.validate(tx); err != nil {
			return err
		}
		return s.insertRes(tx, KindWarehouse, &w, s.now())
	})
	return w, err
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
