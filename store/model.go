package store

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Field types of a model.
const (
	TypeString    = "string"
	TypeInteger   = "integer"
	TypeNumber    = "number"
	TypeBoolean   = "boolean"
	TypeTimestamp = "timestamp" // RFC 3339 string or epoch milliseconds
	TypeObject    = "object"
	TypeArray     = "array"
)

// FieldTypes lists the field types, sorted.
var FieldTypes = []string{TypeArray, TypeBoolean, TypeInteger, TypeNumber, TypeObject, TypeString, TypeTimestamp}

// Resource lifecycle states.
const (
	StatusActive   = "active"
	StatusArchived = "archived"
)

// Unknown-field policies of a model.
const (
	UnknownReject = "reject"
	UnknownDrop   = "drop"
)

// MaxRetentionDays bounds retention_days (a century).
const MaxRetentionDays = 36500

// MaxModelFields bounds a model's width.
const MaxModelFields = 500

var (
	keyPattern       = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	fieldNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)
)

// Field is one field of a model.
type Field struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Required    bool   `json:"required"`
	Description string `json:"description"`
}

// Model is a data model: the schema ingest validates records against.
type Model struct {
	Meta
	Key            string  `json:"key"`
	Name           string  `json:"name"`
	Description    string  `json:"description"`
	Fields         []Field `json:"fields"`
	TimestampField string  `json:"timestamp_field"`
	UnknownFields  string  `json:"unknown_fields"`
	WarehouseID    string  `json:"warehouse_id"`
	// RetentionDays, when above 0, is how long records are kept, by record time: older
	// blocks and log ranges are dropped in the background.
	RetentionDays int    `json:"retention_days"`
	Status        string `json:"status"`
}

// ModelInput is a model's writable fields as a request carries them; nil means absent.
type ModelInput struct {
	ProjectID      *string  `json:"project_id"`
	Key            *string  `json:"key"`
	Name           *string  `json:"name"`
	Description    *string  `json:"description"`
	Fields         *[]Field `json:"fields"`
	TimestampField *string  `json:"timestamp_field"`
	UnknownFields  *string  `json:"unknown_fields"`
	WarehouseID    *string  `json:"warehouse_id"`
	RetentionDays  *int     `json:"retention_days"`
}

// Field returns the field with a name.
func (m *Model) Field(name string) (Field, bool) {
	for _, f := range m.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// validate checks a whole model definition (after defaults). Returns validation_failed.
func (m *Model) validate() error {
	var f fieldErrors
	if !keyPattern.MatchString(m.Key) {
		f.add("key", "must match ^[a-z][a-z0-9_]{0,62}$")
	}
	if n := utf8.RuneCountInString(m.Name); n == 0 || n > 200 {
		f.add("name", "must be 1 to 200 characters")
	}
	f.name("name", m.Name)
	if utf8.RuneCountInString(m.Description) > 2000 {
		f.add("description", "must be at most 2000 characters")
	}
	f.text("description", m.Description)
	if len(m.Fields) > MaxModelFields {
		f.add("fields", "must have at most %d fields", MaxModelFields)
	}
	seen := map[string]bool{}
	for i, fd := range m.Fields {
		at := fmt.Sprintf("fields[%d]", i)
		switch {
		case strings.HasPrefix(fd.Name, "_"):
			f.add(at+".name", "%q starts with _, which is reserved for the system fields (_received_at, _client_id, _ingest_id)", fd.Name)
		case !fieldNamePattern.MatchString(fd.Name):
			f.add(at+".name", "must start with a letter and hold only letters, digits and _ (at most 64)")
		case seen[fd.Name]:
			f.add(at+".name", "duplicates field %q", fd.Name)
		}
		seen[fd.Name] = true
		if !validFieldType(fd.Type) {
			f.add(at+".type", "must be one of %s", strings.Join(FieldTypes, ", "))
		}
		if utf8.RuneCountInString(fd.Description) > 1000 {
			f.add(at+".description", "must be at most 1000 characters")
		}
		f.text(at+".description", fd.Description)
	}
	if m.TimestampField != "" {
		if fd, ok := m.Field(m.TimestampField); !ok || fd.Type != TypeTimestamp {
			f.add("timestamp_field", "must name a field of type timestamp")
		}
	}
	if m.RetentionDays < 0 || m.RetentionDays > MaxRetentionDays {
		f.add("retention_days", "must be 0 (keep forever) to %d", MaxRetentionDays)
	}
	if m.UnknownFields != UnknownReject && m.UnknownFields != UnknownDrop {
		f.add("unknown_fields", "must be reject or drop")
	}
	return f.err()
}

func validFieldType(t string) bool {
	for _, x := range FieldTypes {
		if t == x {
			return true
		}
	}
	return false
}

// checkAdditive compares a proposed definition with the stored one: only added optional
// fields and edited names or descriptions are allowed. Returns conflict naming the field.
func (m *Model) checkAdditive(next *Model) error {
	conflict := func(field, format string, args ...any) error {
		e := Errorf(CodeConflict, "only additive model changes are allowed: "+format, args...)
		e.Fields = []FieldError{{Field: field, Message: fmt.Sprintf(format, args...)}}
		return e
	}
	if next.Key != m.Key {
		return conflict("key", "the key cannot change")
	}
	if next.TimestampField != m.TimestampField {
		return conflict("timestamp_field", "timestamp_field cannot change")
	}
	if next.UnknownFields != m.UnknownFields {
		return conflict("unknown_fields", "unknown_fields cannot change")
	}
	for i, old := range m.Fields {
		if i >= len(next.Fields) || next.Fields[i].Name != old.Name {
			if _, ok := next.Field(old.Name); ok {
				return conflict(fmt.Sprintf("fields[%d]", i), "field %q moved; keep existing fields in order and append new ones", old.Name)
			}
			return conflict(fmt.Sprintf("fields[%d]", i), "field %q was removed or renamed", old.Name)
		}
		nf := next.Fields[i]
		if nf.Type != old.Type {
			return conflict(fmt.Sprintf("fields[%d].type", i), "field %q cannot change type from %s to %s", old.Name, old.Type, nf.Type)
		}
		if nf.Required && !old.Required {
			return conflict(fmt.Sprintf("fields[%d].required", i), "field %q cannot become required", old.Name)
		}
		if !nf.Required && old.Required {
			return conflict(fmt.Sprintf("fields[%d].required", i), "field %q cannot become optional: records stored without it would break readers", old.Name)
		}
	}
	for i := len(m.Fields); i < len(next.Fields); i++ {
		if next.Fields[i].Required {
			return conflict(fmt.Sprintf("fields[%d].required", i), "a new field %q must be optional: stored records lack it", next.Fields[i].Name)
		}
	}
	return nil
}

func (m *Model) apply(in ModelInput) {
	if in.Key != nil {
		m.Key = *in.Key
	}
	if in.Name != nil {
		m.Name = strings.TrimSpace(*in.Name)
	}
	if in.Description != nil {
		m.Description = *in.Description
	}
	if in.Fields != nil {
		m.Fields = append([]Field{}, (*in.Fields)...)
	}
	if in.TimestampField != nil {
		m.TimestampField = *in.TimestampField
	}
	if in.UnknownFields != nil {
		m.UnknownFields = *in.UnknownFields
	}
	if in.WarehouseID != nil {
		m.WarehouseID = *in.WarehouseID
	}
	if in.RetentionDays != nil {
		m.RetentionDays = *in.RetentionDays
	}
}

// CreateModel creates a model. Its warehouse defaults to the project's embedded one.
// Returns validation_failed, not_found (project), conflict (key taken).
func (s *Store) CreateModel(projectID string, in ModelInput) (Model, error) {
	var m Model
	err := s.updateRuntime(func(tx *bolt.Tx) (err error) {
		m, err = s.createModel(tx, projectID, in)
		return err
	})
	return m, err
}

func (s *Store) createModel(tx *bolt.Tx, projectID string, in ModelInput) (Model, error) {
	m := Model{Meta: Meta{ProjectID: projectID}, Fields: []Field{}, UnknownFields: UnknownReject, Status: StatusActive}
	m.apply(in)
	if in.Key == nil {
		return m, Invalid(FieldError{Field: "key", Message: "is required"})
	}
	if in.Name == nil {
		m.Name = m.Key
	}
	if m.WarehouseID == "" {
		wh, err := defaultWarehouse(tx, projectID)
		if err != nil {
			return m, err
		}
		m.WarehouseID = wh
	}
	if err := m.validate(); err != nil {
		return m, err
	}
	if _, err := getInProject[Warehouse](tx, KindWarehouse, projectID, m.WarehouseID); err != nil {
		return m, Invalid(FieldError{Field: "warehouse_id", Message: "is not a warehouse of this project"})
	}
	keys := tx.Bucket(bucketModelKeys)
	if keys.Get(pairKey(projectID, m.Key)) != nil {
		return m, conflictField("key", "a model with key %q already exists in this project", m.Key)
	}
	if err := s.insertRes(tx, KindModel, &m, s.now()); err != nil {
		return m, err
	}
	return m, keys.Put(pairKey(projectID, m.Key), []byte(m.ID))
}

func conflictField(field, format string, args ...any) *Error {
	e := Errorf(CodeConflict, format, args...)
	e.Fields = []FieldError{{Field: field, Message: e.Message}}
	return e
}

// UpdateModel applies an additive change. Returns validation_failed, not_found, conflict
// (archived, or not additive), precondition_failed.
func (s *Store) UpdateModel(projectID, id string, in ModelInput, ifMatch int) (Model, error) {
	var m Model
	err := s.updateRuntime(func(tx *bolt.Tx) (err error) {
		m, err = s.updateModel(tx, projectID, id, in, ifMatch)
		return err
	})
	return m, err
}

func (s *Store) updateModel(tx *bolt.Tx, projectID, id string, in ModelInput, ifMatch int) (Model, error) {
	old, err := getInProject[Model](tx, KindModel, projectID, id)
	if err != nil {
		return old, err
	}
	if err := checkIfMatch(ifMatch, old.Version); err != nil {
		return old, err
	}
	if old.Status == StatusArchived {
		return old, Errorf(CodeConflict, "the model is archived; archived models cannot change")
	}
	m := old
	m.Fields = append([]Field{}, old.Fields...)
	m.apply(in)
	// Additivity first: removing or retyping a field is a 409 even when the rest of the
	// proposed definition would also be invalid.
	if err := old.checkAdditive(&m); err != nil {
		return m, err
	}
	if err := m.validate(); err != nil {
		return m, err
	}
	// warehouse_id may change: that moves the model's data path (records acknowledged from
	// then on go to the new warehouse; what the old one holds stays there).
	if m.WarehouseID != old.WarehouseID {
		if _, err := getInProject[Warehouse](tx, KindWarehouse, projectID, m.WarehouseID); err != nil {
			return m, Invalid(FieldError{Field: "warehouse_id", Message: "is not a warehouse of this project"})
		}
	}
	return m, touchRes(tx, KindModel, &m, s.now())
}

// ArchiveModel archives a model (there is no hard delete): ingest into it is refused from
// then on, its definition and data stay. Archiving twice is harmless.
// Returns not_found.
func (s *Store) ArchiveModel(projectID, id string) (Model, error) {
	var m Model
	err := s.updateRuntime(func(tx *bolt.Tx) (err error) {
		if m, err = getInProject[Model](tx, KindModel, projectID, id); err != nil || m.Status == StatusArchived {
			return err
		}
		m.Status = StatusArchived
		return touchRes(tx, KindModel, &m, s.now())
	})
	return m, err
}

// Model returns one model of a project. Returns not_found.
func (s *Store) Model(projectID, id string) (Model, error) {
	return readOne[Model](s, KindModel, projectID, id)
}

// ModelByID returns a model by id, whatever its project (the sealer knows only the id).
// Returns not_found.
func (s *Store) ModelByID(id string) (Model, error) {
	var m Model
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		m, err = getRes[Model](tx, KindModel, id)
		return err
	})
	return m, err
}

// ModelByKey returns a project's model by key. Returns not_found.
func (s *Store) ModelByKey(projectID, key string) (Model, error) {
	var m Model
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketModelKeys).Get(pairKey(projectID, key))
		if id == nil {
			return NotFound("model")
		}
		var err error
		m, err = getRes[Model](tx, KindModel, string(id))
		return err
	})
	return m, err
}

// ListModels lists a project's models; status "" lists all. Returns validation_failed.
func (s *Store) ListModels(projectID, status string, page Page) ([]Model, string, error) {
	if status != "" && status != StatusActive && status != StatusArchived {
		return nil, "", Invalid(FieldError{Field: "status", Message: "must be active or archived"})
	}
	var out []Model
	var next string
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, next, err = listRes[Model](tx, KindModel, projectID, page, func(m *Model) bool {
			return status == "" || m.Status == status
		})
		return err
	})
	return out, next, err
}

// Validate checks one record against the model and returns it as it is to be stored:
// numbers normalised (json.Number in, int64 or float64 out), unknown fields dropped when the
// model says drop. Every problem is reported, each naming its field. rec is not modified.
func (m *Model) Validate(rec map[string]any) (map[string]any, []FieldError) {
	var errs []FieldError
	out := make(map[string]any, len(rec))
	for _, fd := range m.Fields {
		v, ok := rec[fd.Name]
		if !ok || v == nil {
			if fd.Required {
				errs = append(errs, FieldError{Field: fd.Name, Message: "is required"})
			} else if ok {
				out[fd.Name] = nil
			}
			continue
		}
		nv, msg := CheckValue(fd.Type, v)
		if msg != "" {
			errs = append(errs, FieldError{Field: fd.Name, Message: msg})
			continue
		}
		out[fd.Name] = nv
	}
	if len(rec) > len(out) || len(errs) > 0 {
		for name := range rec {
			if _, known := m.Field(name); known {
				continue
			}
			if m.UnknownFields == UnknownReject {
				errs = append(errs, FieldError{Field: name, Message: "is not a field of model " + m.Key})
			}
		}
	}
	if len(errs) > 0 {
		SortFieldErrors(errs)
		return nil, errs
	}
	return out, nil
}

// SortFieldErrors orders field errors by field name, so messages are deterministic.
func SortFieldErrors(errs []FieldError) {
	for i := 1; i < len(errs); i++ {
		for j := i; j > 0 && errs[j].Field < errs[j-1].Field; j-- {
			errs[j], errs[j-1] = errs[j-1], errs[j]
		}
	}
}

// CheckValue checks a decoded JSON value against a field type and returns the value to
// store, or a message saying what is wrong.
func CheckValue(typ string, v any) (any, string) {
	switch typ {
	case TypeString:
		if s, ok := v.(string); ok {
			return s, ""
		}
		return nil, "must be a string"
	case TypeBoolean:
		if b, ok := v.(bool); ok {
			return b, ""
		}
		return nil, "must be a boolean"
	case TypeInteger:
		if n, ok := asInt(v); ok {
			return n, ""
		}
		return nil, "must be an integer"
	case TypeNumber:
		if f, ok := asFloat(v); ok {
			return f, ""
		}
		return nil, "must be a number"
	case TypeTimestamp:
		switch t := v.(type) {
		case string:
			if _, err := time.Parse(time.RFC3339Nano, t); err == nil {
				return t, ""
			}
		default:
			if n, ok := asInt(v); ok && n >= 0 {
				return n, ""
			}
		}
		return nil, "must be an RFC 3339 timestamp or epoch milliseconds"
	case TypeObject:
		if o, ok := v.(map[string]any); ok {
			return o, ""
		}
		return nil, "must be an object"
	case TypeArray:
		if a, ok := v.([]any); ok {
			return a, ""
		}
		return nil, "must be an array"
	}
	return nil, "has an unknown type"
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		if f, err := n.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f), true
		}
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil && !math.IsInf(f, 0)
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}
