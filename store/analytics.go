package store

import (
	"strings"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// AnalyticsAPI is a stored, parameterised query published under a stable key.
type AnalyticsAPI struct {
	Meta
	Key         string    `json:"key"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	ModelKey    string    `json:"model_key"`
	Query       QuerySpec `json:"query"`
	Params      []Param   `json:"params"`
	Status      string    `json:"status"`
}

// AnalyticsAPIInput is an Analytics API's writable fields.
type AnalyticsAPIInput struct {
	ProjectID   *string    `json:"project_id"`
	Key         *string    `json:"key"`
	Name        *string    `json:"name"`
	Description *string    `json:"description"`
	ModelKey    *string    `json:"model_key"`
	Query       *QuerySpec `json:"query"`
	Params      *[]Param   `json:"params"`
}

func (a *AnalyticsAPI) apply(in AnalyticsAPIInput) {
	if in.Key != nil {
		a.Key = *in.Key
	}
	if in.Name != nil {
		a.Name = strings.TrimSpace(*in.Name)
	}
	if in.Description != nil {
		a.Description = *in.Description
	}
	if in.ModelKey != nil {
		a.ModelKey = *in.ModelKey
	}
	if in.Query != nil {
		a.Query = *in.Query
	}
	if in.Params != nil {
		a.Params = append([]Param{}, (*in.Params)...)
	}
}

// validate checks the API against its model, read in the same transaction.
func (a *AnalyticsAPI) validate(tx *bolt.Tx, rules QueryRules) error {
	if rules == nil {
		return errNoQueryRules
	}
	var f fieldErrors
	if !keyPattern.MatchString(a.Key) {
		f.add("key", "must match ^[a-z][a-z0-9_]{0,62}$")
	}
	if n := utf8.RuneCountInString(a.Name); n == 0 || n > 200 {
		f.add("name", "must be 1 to 200 characters")
	}
	f.name("name", a.Name)
	if utf8.RuneCountInString(a.Description) > 2000 {
		f.add("description", "must be at most 2000 characters")
	}
	f.text("description", a.Description)
	f = append(f, rules.ValidateParams(a.Params)...)
	id := tx.Bucket(bucketModelKeys).Get(pairKey(a.ProjectID, a.ModelKey))
	if id == nil {
		f.add("model_key", "%q is not a model of this project", a.ModelKey)
		return f.err()
	}
	m, err := getRes[Model](tx, KindModel, string(id))
	if err != nil {
		return err
	}
	if m.Status != StatusActive {
		f.add("model_key", "model %q is archived", a.ModelKey)
	}
	f = append(f, rules.ValidateQuery(&m, &a.Query, a.Params)...)
	return f.err()
}

// CreateAnalyticsAPI publishes a query under a key unique in the project.
// Returns validation_failed, not_found, conflict (key taken).
func (s *Store) CreateAnalyticsAPI(projectID string, in AnalyticsAPIInput) (AnalyticsAPI, error) {
	var a AnalyticsAPI
	err := s.db.Update(func(tx *bolt.Tx) error {
		a = AnalyticsAPI{Meta: Meta{ProjectID: projectID}, Params: []Param{}, Status: StatusActive}
		a.apply(in)
		if in.Name == nil {
			a.Name = a.Key
		}
		if tx.Bucket(bucketProjects).Get([]byte(projectID)) == nil {
			return NotFound("project")
		}
		if err := a.validate(tx, s.rules); err != nil {
			return err
		}
		keys := tx.Bucket(bucketAPIKeys)
		if keys.Get(pairKey(projectID, a.Key)) != nil {
			return conflictField("key", "an Analytics API with key %q already exists in this project", a.Key)
		}
		if err := s.insertRes(tx, KindAPI, &a, s.now()); err != nil {
			return err
		}
		return keys.Put(pairKey(projectID, a.Key), []byte(a.ID))
	})
	return a, err
}

// UpdateAnalyticsAPI replaces an API's writable fields; the key is stable.
// Returns validation_failed, not_found, conflict (archived, key change), precondition_failed.
func (s *Store) UpdateAnalyticsAPI(projectID, id string, in AnalyticsAPIInput, ifMatch int) (AnalyticsAPI, error) {
	return updateRes(s, KindAPI, projectID, id, ifMatch, func(tx *bolt.Tx, a *AnalyticsAPI) error {
		if a.Status == StatusArchived {
			return Errorf(CodeConflict, "the Analytics API is archived; archived APIs cannot change")
		}
		if in.Key != nil && *in.Key != a.Key {
			return conflictField("key", "the key of an Analytics API is stable and cannot change")
		}
		a.apply(in)
		return a.validate(tx, s.rules)
	})
}

// ArchiveAnalyticsAPI archives an API and retires its bindings. Returns not_found.
func (s *Store) ArchiveAnalyticsAPI(projectID, id string) (AnalyticsAPI, error) {
	var a AnalyticsAPI
	err := s.db.Update(func(tx *bolt.Tx) (err error) {
		if a, err = getInProject[AnalyticsAPI](tx, KindAPI, projectID, id); err != nil || a.Status == StatusArchived {
			return err
		}
		now := s.now()
		a.Status = StatusArchived
		if err := touchRes(tx, KindAPI, &a, now); err != nil {
			return err
		}
		return eachRes[Binding](tx, KindBinding, projectID, func(b *Binding) error {
			if b.AnalyticsAPIID != id || b.State == BindingRetired {
				return nil
			}
			b.State = BindingRetired
			return touchRes(tx, KindBinding, b, now)
		})
	})
	return a, err
}

// AnalyticsAPI returns one API. Returns not_found.
func (s *Store) AnalyticsAPI(projectID, id string) (AnalyticsAPI, error) {
	return readOne[AnalyticsAPI](s, KindAPI, projectID, id)
}

// AnalyticsAPIByKey returns a project's API by key. Returns not_found.
func (s *Store) AnalyticsAPIByKey(projectID, key string) (AnalyticsAPI, error) {
	var a AnalyticsAPI
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketAPIKeys).Get(pairKey(projectID, key))
		if id == nil {
			return NotFound("Analytics API")
		}
		var err error
		a, err = getRes[AnalyticsAPI](tx, KindAPI, string(id))
		return err
	})
	return a, err
}

// ListAnalyticsAPIs lists a project's APIs, optionally by status and model.
func (s *Store) ListAnalyticsAPIs(projectID, status, modelKey string, page Page) ([]AnalyticsAPI, string, error) {
	if status != "" && status != StatusActive && status != StatusArchived {
		return nil, "", Invalid(FieldError{Field: "status", Message: "must be active or archived"})
	}
	var out []AnalyticsAPI
	var next string
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, next, err = listRes[AnalyticsAPI](tx, KindAPI, projectID, page, func(a *AnalyticsAPI) bool {
			return (status == "" || a.Status == status) && (modelKey == "" || a.ModelKey == modelKey)
		})
		return err
	})
	return out, next, err
}

// Binding states.
const (
	BindingStandby = "standby"
	BindingActive  = "active"
	BindingRetired = "retired"
)

// Binding routes an Analytics API through a warehouse. One binding per API is active.
type Binding struct {
	Meta
	AnalyticsAPIID string `json:"analytics_api_id"`
	WarehouseID    string `json:"warehouse_id"`
	State          string `json:"state"`
}

// BindingInput is a binding's writable fields.
type BindingInput struct {
	ProjectID      *string `json:"project_id"`
	AnalyticsAPIID *string `json:"analytics_api_id"`
	WarehouseID    *string `json:"warehouse_id"`
}

// CreateBinding binds an API to a warehouse. The first binding of an API becomes active at
// once (an API is usable as soon as it is bound); later ones start standby until promoted.
// Returns validation_failed, not_found, conflict (archived API).
func (s *Store) CreateBinding(projectID string, in BindingInput) (Binding, error) {
	var b Binding
	err := s.db.Update(func(tx *bolt.Tx) error {
		var f fieldErrors
		if in.AnalyticsAPIID == nil || *in.AnalyticsAPIID == "" {
			f.add("analytics_api_id", "is required")
		}
		if in.WarehouseID == nil || *in.WarehouseID == "" {
			f.add("warehouse_id", "is required")
		}
		if err := f.err(); err != nil {
			return err
		}
		if tx.Bucket(bucketProjects).Get([]byte(projectID)) == nil {
			return NotFound("project")
		}
		api, err := getInProject[AnalyticsAPI](tx, KindAPI, projectID, *in.AnalyticsAPIID)
		if err != nil {
			f.add("analytics_api_id", "is not an Analytics API of this project")
		}
		if _, err := getInProject[Warehouse](tx, KindWarehouse, projectID, *in.WarehouseID); err != nil {
			f.add("warehouse_id", "is not a warehouse of this project")
		}
		if err := f.err(); err != nil {
			return err
		}
		if api.Status == StatusArchived {
			return Errorf(CodeConflict, "the Analytics API is archived")
		}
		b = Binding{Meta: Meta{ProjectID: projectID}, AnalyticsAPIID: api.ID, WarehouseID: *in.WarehouseID, State: BindingActive}
		err = eachRes[Binding](tx, KindBinding, projectID, func(o *Binding) error {
			if o.AnalyticsAPIID == api.ID && o.State == BindingActive {
				b.State = BindingStandby
			}
			return nil
		})
		if err != nil {
			return err
		}
		return s.insertRes(tx, KindBinding, &b, s.now())
	})
	return b, err
}

// PromoteBinding makes a binding the one active binding of its API; the previously active
// one becomes standby, in the same transaction, so there is never zero or two.
// Returns not_found, conflict (retired binding).
func (s *Store) PromoteBinding(projectID, id string) (Binding, error) {
	var b Binding
	err := s.db.Update(func(tx *bolt.Tx) (err error) {
		if b, err = getInProject[Binding](tx, KindBinding, projectID, id); err != nil {
			return err
		}
		if b.State == BindingRetired {
			return Errorf(CodeConflict, "the binding is retired (its Analytics API was archived)")
		}
		if b.State == BindingActive {
			return nil
		}
		now := s.now()
		err = eachRes[Binding](tx, KindBinding, projectID, func(o *Binding) error {
			if o.AnalyticsAPIID != b.AnalyticsAPIID || o.State != BindingActive {
				return nil
			}
			o.State = BindingStandby
			return touchRes(tx, KindBinding, o, now)
		})
		if err != nil {
			return err
		}
		b.State = BindingActive
		return touchRes(tx, KindBinding, &b, now)
	})
	return b, err
}

// Binding returns one binding. Returns not_found.
func (s *Store) Binding(projectID, id string) (Binding, error) {
	return readOne[Binding](s, KindBinding, projectID, id)
}

// ListBindings lists a project's bindings, optionally of one API and in one state.
func (s *Store) ListBindings(projectID, apiID, state string, page Page) ([]Binding, string, error) {
	if state != "" && state != BindingActive && state != BindingStandby && state != BindingRetired {
		return nil, "", Invalid(FieldError{Field: "state", Message: "must be active, standby or retired"})
	}
	var out []Binding
	var next string
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, next, err = listRes[Binding](tx, KindBinding, projectID, page, func(b *Binding) bool {
			return (apiID == "" || b.AnalyticsAPIID == apiID) && (state == "" || b.State == state)
		})
		return err
	})
	return out, next, err
}
