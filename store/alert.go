package store

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Alert values (CONTRACTS §6).
const (
	TriggerEvent     = "event"
	MatchAll         = "all"
	MatchAny         = "any"
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
	OriginAssistant  = "assistant"
	MinCooldown      = 300
	MaxAlertItems    = 50 // conditions, select_fields, group_by, channel_ids each
	SimulationTTL    = time.Hour
)

// AlertCondition is one condition of an alert: a governed field, an operator of
// cond's set and its value.
type AlertCondition struct {
	Field    string `json:"field"`
	Operator string `json:"operator"`
	Value    any    `json:"value,omitempty"`
}

// Alert is an event alert: conditions over a model's fields, checked against every record
// the model ingests.
type Alert struct {
	Meta
	Name            string           `json:"name"`
	Description     string           `json:"description"`
	TriggerType     string           `json:"trigger_type"`
	ModelKey        string           `json:"model_key"`
	Conditions      []AlertCondition `json:"conditions"`
	Match           string           `json:"match"`
	SelectFields    []string         `json:"select_fields"`
	GroupBy         []string         `json:"group_by"`
	Severity        string           `json:"severity"`
	ChannelIDs      []string         `json:"channel_ids"`
	CooldownSeconds int              `json:"cooldown_seconds"`
	Enabled         bool             `json:"enabled"`
	Status          string           `json:"status"`
	Origin          string           `json:"origin,omitempty"`
	SimulationID    string           `json:"simulation_id,omitempty"`
}

// AlertInput is an alert's writable fields. Origin and SimulationID are taken at creation
// only.
type AlertInput struct {
	ProjectID       *string           `json:"project_id"`
	Name            *string           `json:"name"`
	Description     *string           `json:"description"`
	TriggerType     *string           `json:"trigger_type"`
	ModelKey        *string           `json:"model_key"`
	Conditions      *[]AlertCondition `json:"conditions"`
	Match           *string           `json:"match"`
	SelectFields    *[]string         `json:"select_fields"`
	GroupBy         *[]string         `json:"group_by"`
	Severity        *string           `json:"severity"`
	ChannelIDs      *[]string         `json:"channel_ids"`
	CooldownSeconds *int              `json:"cooldown_seconds"`
	Enabled         *bool             `json:"enabled"`
	Origin          *string           `json:"origin"`
	SimulationID    *string           `json:"simulation_id"`
}

// AlertRules checks what the store cannot: the conditions against the model's field types
// (the alerts package owns the operators, through cond). The store calls it inside its own
// transaction, with the model it read there.
type AlertRules func(m *Model, a *Alert) []FieldError

// NewAlert returns the alert that in describes, with the defaults of a new alert; the
// simulate route builds drafts with it.
func NewAlert(projectID string, in AlertInput) Alert {
	a := Alert{Meta: Meta{ProjectID: projectID}, TriggerType: TriggerEvent, Match: MatchAll, Severity: SeverityWarning,
		CooldownSeconds: MinCooldown, Enabled: true, Status: StatusActive,
		Conditions: []AlertCondition{}, SelectFields: []string{}, GroupBy: []string{}, ChannelIDs: []string{}}
	a.apply(in)
	if in.Origin != nil {
		a.Origin = *in.Origin
	}
	if in.SimulationID != nil {
		a.SimulationID = *in.SimulationID
	}
	return a
}

func (a *Alert) apply(in AlertInput) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	if in.Name != nil {
		a.Name = strings.TrimSpace(*in.Name)
	}
	set(&a.Description, in.Description)
	set(&a.TriggerType, in.TriggerType)
	set(&a.ModelKey, in.ModelKey)
	set(&a.Match, in.Match)
	set(&a.Severity, in.Severity)
	if in.Conditions != nil {
		a.Conditions = append([]AlertCondition{}, (*in.Conditions)...)
	}
	for _, l := range []struct {
		dst *[]string
		v   *[]string
	}{{&a.SelectFields, in.SelectFields}, {&a.GroupBy, in.GroupBy}, {&a.ChannelIDs, in.ChannelIDs}} {
		if l.v != nil {
			*l.dst = append([]string{}, (*l.v)...)
		}
	}
	if in.CooldownSeconds != nil {
		a.CooldownSeconds = *in.CooldownSeconds
	}
	if in.Enabled != nil {
		a.Enabled = *in.Enabled
	}
}

// RuleKey is what makes two alerts the same rule, for matching an assistant's creation to
// its simulated draft: everything but name, description, enabled and the origin fields.
func (a *Alert) RuleKey() string {
	b, _ := json.Marshal([]any{a.TriggerType, a.ModelKey, a.Conditions, a.Match, a.SelectFields, a.GroupBy, a.Severity, a.ChannelIDs, a.CooldownSeconds})
	return string(b)
}

// Validate checks an alert against its model and the project's channels, read in tx, and
// runs rules on the conditions. A draft (simulation) skips nothing: a rule that could not
// be created is not simulated either.
func (s *Store) validateAlert(tx *bolt.Tx, a *Alert, rules AlertRules) (*Model, error) {
	var f fieldErrors
	if n := utf8.RuneCountInString(a.Name); n == 0 || n > 200 {
		f.add("name", "must be 1 to 200 characters")
	}
	f.name("name", a.Name)
	if utf8.RuneCountInString(a.Description) > 2000 {
		f.add("description", "must be at most 2000 characters")
	}
	f.text("description", a.Description)
	if a.TriggerType != TriggerEvent {
		f.add("trigger_type", "must be event")
	}
	if a.Match != MatchAll && a.Match != MatchAny {
		f.add("match", "must be all or any")
	}
	switch a.Severity {
	case SeverityInfo, SeverityWarning, SeverityCritical:
	default:
		f.add("severity", "must be info, warning or critical")
	}
	if a.CooldownSeconds < MinCooldown || a.CooldownSeconds > 7*24*3600 {
		f.add("cooldown_seconds", "must be %d to %d seconds", MinCooldown, 7*24*3600)
	}
	if len(a.Conditions) == 0 {
		f.add("conditions", "must hold at least one condition")
	}
	for _, l := range []struct {
		name string
		n    int
	}{{"conditions", len(a.Conditions)}, {"select_fields", len(a.SelectFields)}, {"group_by", len(a.GroupBy)}, {"channel_ids", len(a.ChannelIDs)}} {
		if l.n > MaxAlertItems {
			f.add(l.name, "must hold at most %d entries", MaxAlertItems)
		}
	}
	seen := map[string]bool{}
	for i, id := range a.ChannelIDs {
		field := "channel_ids[" + itoa(i) + "]"
		switch {
		case seen[id]:
			f.add(field, "names channel %q twice", id)
		case !inProject(tx, KindChannel, a.ProjectID, id):
			f.add(field, "%q is not a notification channel of this project", id)
		}
		seen[id] = true
	}
	if a.Origin != "" && a.Origin != OriginAssistant {
		f.add("origin", "must be assistant or left out")
	}
	var m *Model
	id := tx.Bucket(bucketModelKeys).Get(pairKey(a.ProjectID, a.ModelKey))
	if id == nil {
		f.add("model_key", "%q is not a model of this project", a.ModelKey)
	} else if mm, err := getRes[Model](tx, KindModel, string(id)); err != nil {
		return nil, err
	} else if mm.Status != StatusActive {
		f.add("model_key", "model %q is archived", a.ModelKey)
	} else {
		m = &mm
		if rules == nil {
			return nil, Errorf(CodeInternal, "alert rules are not loaded")
		}
		f = append(f, rules(m, a)...)
	}
	return m, f.err()
}

func inProject(tx *bolt.Tx, k Kind, projectID, id string) bool {
	return strings.HasPrefix(id, k.prefix) && tx.Bucket(bucketByProject).Get(byProjectKey(k, projectID, id)) != nil
}

// CreateAlert stores a new alert. An alert with origin "assistant" must name the
// simulation of the same rule, made as a draft within SimulationTTL.
// Returns validation_failed, not_found (project), conflict (simulation missing, stale or of
// another rule).
func (s *Store) CreateAlert(projectID string, in AlertInput, rules AlertRules) (Alert, error) {
	a := NewAlert(projectID, in)
	// updateRuntime: the evaluator recompiles a model's alerts when the generation moves.
	err := s.updateRuntime(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketProjects).Get([]byte(projectID)) == nil {
			return NotFound("project")
		}
		if _, err := s.validateAlert(tx, &a, rules); err != nil {
			return err
		}
		if a.Origin == OriginAssistant {
			sim, err := getJSONSimulation(tx, a.SimulationID)
			switch {
			case err != nil || sim.ProjectID != projectID || !sim.Draft:
				return conflictField("simulation_id", "an assistant may create an alert only after simulating the draft: simulate it first (POST /alerts/simulate) and send the simulation_id")
			case s.now().Sub(sim.At) > SimulationTTL:
				return conflictField("simulation_id", "the simulation is older than an hour: simulate the draft again")
			case sim.RuleKey != a.RuleKey():
				return conflictField("simulation_id", "the simulation was of a different rule: simulate this draft")
			}
		} else if a.SimulationID != "" {
			return Invalid(FieldError{Field: "simulation_id", Message: "is only taken with origin \"assistant\""})
		}
		return s.insertRes(tx, KindAlert, &a, s.now())
	})
	return a, err
}

// Alert reads an alert. Returns not_found.
func (s *Store) Alert(projectID, id string) (Alert, error) {
	var a Alert
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		a, err = getInProject[Alert](tx, KindAlert, projectID, id)
		return err
	})
	return a, err
}

// AlertFilter narrows a list of alerts; empty fields keep all.
type AlertFilter struct {
	Q           string // in name or description, case-insensitive
	TriggerType string
	Enabled     *bool
}

// ListAlerts lists a project's alerts (archived included) in creation order.
func (s *Store) ListAlerts(projectID string, f AlertFilter, p Page) ([]Alert, string, error) {
	var out []Alert
	var next string
	q := strings.ToLower(f.Q)
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, next, err = listRes[Alert](tx, KindAlert, projectID, p, func(a *Alert) bool {
			return (q == "" || strings.Contains(strings.ToLower(a.Name), q) || strings.Contains(strings.ToLower(a.Description), q)) &&
				(f.TriggerType == "" || a.TriggerType == f.TriggerType) && (f.Enabled == nil || a.Enabled == *f.Enabled)
		})
		return err
	})
	return out, next, err
}

// ProjectAlerts returns every alert of a project (the evaluator and metadata read them).
func (s *Store) ProjectAlerts(projectID string) ([]Alert, error) {
	var out []Alert
	err := s.db.View(func(tx *bolt.Tx) error {
		return eachRes[Alert](tx, KindAlert, projectID, func(a *Alert) error {
			out = append(out, *a)
			return nil
		})
	})
	return out, err
}

// UpdateAlert replaces an alert's writable fields. Returns validation_failed, not_found,
// conflict (archived), precondition_failed.
func (s *Store) UpdateAlert(projectID, id string, in AlertInput, ifMatch int, rules AlertRules) (Alert, error) {
	return updateRes(s, KindAlert, projectID, id, ifMatch, func(tx *bolt.Tx, a *Alert) error {
		if a.Status == StatusArchived {
			return Errorf(CodeConflict, "the alert is archived; archived alerts keep their history and cannot change")
		}
		if in.Origin != nil || in.SimulationID != nil {
			return Invalid(FieldError{Field: "origin", Message: "is set at creation only"})
		}
		a.apply(in)
		_, err := s.validateAlert(tx, a, rules)
		return err
	})
}

// SetAlertEnabled turns evaluation on or off. Returns not_found, conflict (archived).
func (s *Store) SetAlertEnabled(projectID, id string, enabled bool) (Alert, error) {
	return updateRes(s, KindAlert, projectID, id, 0, func(tx *bolt.Tx, a *Alert) error {
		if a.Status == StatusArchived && enabled {
			return Errorf(CodeConflict, "the alert is archived and cannot be enabled again; create a new alert")
		}
		a.Enabled = enabled
		return nil
	})
}

// ArchiveAlert archives and disables an alert; it stays readable with its history.
// Archiving an archived alert returns it unchanged. Returns not_found.
func (s *Store) ArchiveAlert(projectID, id string) (Alert, error) {
	var a Alert
	err := s.updateRuntime(func(tx *bolt.Tx) (err error) {
		if a, err = getInProject[Alert](tx, KindAlert, projectID, id); err != nil || a.Status == StatusArchived {
			return err
		}
		a.Status, a.Enabled = StatusArchived, false
		return touchRes(tx, KindAlert, &a, s.now())
	})
	return a, err
}

// Simulation is the one record a simulation writes: enough to let an assistant's creation
// prove it simulated the same rule first.
type Simulation struct {
	ID        string    `json:"id"`
	ProjectID string    `json:"project_id"`
	AlertID   string    `json:"alert_id,omitempty"`
	Draft     bool      `json:"draft"`
	RuleKey   string    `json:"rule_key"`
	At        time.Time `json:"at"`
}

// ValidateDraft checks a draft alert as CreateAlert would (except the assistant's
// simulation rule) without writing anything, and returns the model it names.
// Returns validation_failed, not_found (project).
func (s *Store) ValidateDraft(a *Alert, rules AlertRules) (*Model, error) {
	var m *Model
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		if tx.Bucket(bucketProjects).Get([]byte(a.ProjectID)) == nil {
			return NotFound("project")
		}
		m, err = s.validateAlert(tx, a, rules)
		return err
	})
	return m, err
}

// RecordSimulation stores a simulation record and drops those past SimulationTTL, oldest
// first (ids are time-ordered, so the walk stops at the first one still fresh).
func (s *Store) RecordSimulation(sim *Simulation) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSimulations)
		sim.ID, sim.At = s.newID("sim_"), s.now()
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.First() {
			var old Simulation
			if json.Unmarshal(v, &old) == nil && sim.At.Sub(old.At) <= SimulationTTL {
				break
			}
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return putJSON(b, []byte(sim.ID), sim)
	})
}

func getJSONSimulation(tx *bolt.Tx, id string) (Simulation, error) {
	var sim Simulation
	err := getJSON(tx.Bucket(bucketSimulations), []byte(id), "simulation", &sim)
	return sim, err
}

// AlertMetadataState is what alert metadata is made of: the project's active models and
// the types of its channels, read in one transaction.
type AlertMetadataState struct {
	Models []Model
}

// AlertMetadata reads the project's active models. Returns not_found (project).
func (s *Store) AlertMetadata(projectID string) (AlertMetadataState, error) {
	var st AlertMetadataState
	err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketProjects).Get([]byte(projectID)) == nil {
			return NotFound("project")
		}
		return eachRes[Model](tx, KindModel, projectID, func(m *Model) error {
			if m.Status == StatusActive {
				st.Models = append(st.Models, *m)
			}
			return nil
		})
	})
	return st, err
}
