package store

import (
	"encoding/json"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Discovery session states.
const (
	DiscoveryWaiting   = "waiting"
	DiscoveryAccepted  = "accepted"
	DiscoveryDiscarded = "discarded"
)

// MaxDiscoverySamples bounds the records one session learns from; later ones are counted
// but not inspected.
const MaxDiscoverySamples = 10_000

// maxPreview is how many samples a session keeps to show the reviewer.
const maxPreview = 5

// FieldStats is what a session learned of one field.
type FieldStats struct {
	Seen  int            `json:"seen"`
	Nulls int            `json:"nulls"`
	Kinds map[string]int `json:"kinds"` // inferred type -> count
}

// InferredField is a field as discovery proposes it.
type InferredField struct {
	Name      string  `json:"name"`
	Type      string  `json:"type"`
	SeenRatio float64 `json:"seen_ratio"`
	Required  bool    `json:"required"`
	Mixed     bool    `json:"mixed,omitempty"`
}

// DiscoverySession captures sample records from one ingest client and proposes a model.
type DiscoverySession struct {
	Meta
	IngestClientID string            `json:"ingest_client_id"`
	ModelKey       string            `json:"model_key"`
	State          string            `json:"state"`
	Samples        int               `json:"samples"`
	Fields         []InferredField   `json:"fields"`
	Preview        []json.RawMessage `json:"preview"`
	ModelID        string            `json:"model_id,omitempty"`
}

type discoveryRecord struct {
	DiscoverySession
	Stats map[string]*FieldStats `json:"stats"`
}

// DiscoveryInput opens a session.
type DiscoveryInput struct {
	IngestClientID string `json:"ingest_client_id"`
	ModelKey       string `json:"model_key"`
}

// inferKind is the model type a sample value suggests ("" for null).
func inferKind(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		return TypeBoolean
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return TypeInteger
		}
		return TypeNumber
	case float64:
		if _, ok := asInt(x); ok {
			return TypeInteger
		}
		return TypeNumber
	case string:
		if _, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return TypeTimestamp
		}
		return TypeString
	case map[string]any:
		return TypeObject
	case []any:
		return TypeArray
	}
	return TypeString
}

// infer turns field statistics into proposed fields, sorted by name. A field seen with
// integers and numbers is a number; with timestamps and other strings a string; with any
// other mix a string, marked mixed.
func infer(stats map[string]*FieldStats, samples int) []InferredField {
	out := []InferredField{}
	for name, st := range stats {
		f := InferredField{Name: name}
		if samples > 0 {
			f.SeenRatio = float64(st.Seen) / float64(samples)
		}
		f.Required = st.Seen == samples && st.Nulls == 0
		kinds := map[string]bool{}
		for k := range st.Kinds {
			kinds[k] = true
		}
		switch {
		case len(kinds) == 0:
			f.Type = TypeString
		case len(kinds) == 1:
			for k := range kinds {
				f.Type = k
			}
		case len(kinds) == 2 && kinds[TypeInteger] && kinds[TypeNumber]:
			f.Type = TypeNumber
		case len(kinds) == 2 && kinds[TypeString] && kinds[TypeTimestamp]:
			f.Type = TypeString
		default:
			f.Type, f.Mixed = TypeString, true
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// OpenDiscovery opens a waiting session for an ingest client; the client may have one
// waiting session at a time. Returns validation_failed, not_found, conflict.
func (s *Store) OpenDiscovery(projectID string, in DiscoveryInput) (DiscoverySession, error) {
	var d discoveryRecord
	err := s.db.Update(func(tx *bolt.Tx) error {
		var f fieldErrors
		if !keyPattern.MatchString(in.ModelKey) {
			f.add("model_key", "must match ^[a-z][a-z0-9_]{0,62}$")
		}
		if _, err := getInProject[clientRecord](tx, KindIngest, projectID, in.IngestClientID); err != nil {
			f.add("ingest_client_id", "is not an ingest client of this project")
		}
		if err := f.err(); err != nil {
			return err
		}
		if w, _ := waitingSession(tx, projectID, in.IngestClientID); w != nil {
			return Errorf(CodeConflict, "the client already has a waiting discovery session (%s); accept or discard it first", w.ID)
		}
		d = discoveryRecord{DiscoverySession: DiscoverySession{Meta: Meta{ProjectID: projectID}, IngestClientID: in.IngestClientID,
			ModelKey: in.ModelKey, State: DiscoveryWaiting, Fields: []InferredField{}, Preview: []json.RawMessage{}}, Stats: map[string]*FieldStats{}}
		return s.insertRes(tx, KindDiscovery, &d, s.now())
	})
	return d.DiscoverySession, err
}

func waitingSession(tx *bolt.Tx, projectID, clientID string) (*discoveryRecord, error) {
	var found *discoveryRecord
	err := eachRes[discoveryRecord](tx, KindDiscovery, projectID, func(d *discoveryRecord) error {
		if d.IngestClientID == clientID && d.State == DiscoveryWaiting {
			c := *d
			found = &c
		}
		return nil
	})
	return found, err
}

// CaptureDiscovery adds sample records to the client's waiting session and returns it.
// Returns conflict when no session is waiting.
func (s *Store) CaptureDiscovery(projectID, clientID string, samples []map[string]any) (DiscoverySession, int, error) {
	var d *discoveryRecord
	captured := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		if d, err = waitingSession(tx, projectID, clientID); err != nil {
			return err
		}
		if d == nil {
			return Errorf(CodeConflict, "no discovery session is waiting for this client: open one in the console first")
		}
		if d.Stats == nil {
			d.Stats = map[string]*FieldStats{}
		}
		for _, rec := range samples {
			captured++
			d.Samples++
			if d.Samples > MaxDiscoverySamples {
				continue
			}
			if len(d.Preview) < maxPreview {
				raw, _ := json.Marshal(rec)
				d.Preview = append(d.Preview, raw)
			}
			for name, v := range rec {
				st := d.Stats[name]
				if st == nil {
					st = &FieldStats{Kinds: map[string]int{}}
					d.Stats[name] = st
				}
				st.Seen++
				if k := inferKind(v); k == "" {
					st.Nulls++
				} else {
					st.Kinds[k]++
				}
			}
		}
		d.Fields = infer(d.Stats, min(d.Samples, MaxDiscoverySamples))
		return touchRes(tx, KindDiscovery, d, s.now())
	})
	if d == nil {
		return DiscoverySession{}, 0, err
	}
	return d.DiscoverySession, captured, err
}

// AcceptDiscovery ends a session by creating its model from the inferred fields, or, when
// the model exists, by appending the inferred fields it lacks (an additive update). Field
// names a model cannot hold are left out. Returns not_found, conflict (not waiting, no
// samples, or the update would not be additive), validation_failed.
func (s *Store) AcceptDiscovery(projectID, id string) (DiscoverySession, Model, error) {
	var d discoveryRecord
	var m Model
	err := s.updateRuntime(func(tx *bolt.Tx) (err error) {
		if d, err = getInProject[discoveryRecord](tx, KindDiscovery, projectID, id); err != nil {
			return err
		}
		if d.State != DiscoveryWaiting {
			return Errorf(CodeConflict, "the discovery session is %s", d.State)
		}
		if d.Samples == 0 {
			return Errorf(CodeConflict, "the discovery session has captured nothing yet")
		}
		var fields []Field
		for _, f := range d.Fields {
			if fieldNamePattern.MatchString(f.Name) {
				fields = append(fields, Field{Name: f.Name, Type: f.Type, Required: f.Required})
			}
		}
		if id := tx.Bucket(bucketModelKeys).Get(pairKey(projectID, d.ModelKey)); id != nil {
			cur, err := getRes[Model](tx, KindModel, string(id))
			if err != nil {
				return err
			}
			next := append([]Field{}, cur.Fields...)
			for _, f := range fields {
				if _, ok := cur.Field(f.Name); !ok {
					f.Required = false // a new field must be optional: stored records lack it
					next = append(next, f)
				}
			}
			m, err = s.updateModel(tx, projectID, cur.ID, ModelInput{Fields: &next}, 0)
		} else {
			m, err = s.createModel(tx, projectID, ModelInput{Key: &d.ModelKey, Fields: &fields})
		}
		if err != nil {
			return err
		}
		d.State, d.ModelID = DiscoveryAccepted, m.ID
		return touchRes(tx, KindDiscovery, &d, s.now())
	})
	return d.DiscoverySession, m, err
}

// DiscardDiscovery ends a session without touching any model. Returns not_found, conflict.
func (s *Store) DiscardDiscovery(projectID, id string) (DiscoverySession, error) {
	var d discoveryRecord
	err := s.db.Update(func(tx *bolt.Tx) (err error) {
		if d, err = getInProject[discoveryRecord](tx, KindDiscovery, projectID, id); err != nil {
			return err
		}
		if d.State != DiscoveryWaiting {
			return Errorf(CodeConflict, "the discovery session is %s", d.State)
		}
		d.State = DiscoveryDiscarded
		return touchRes(tx, KindDiscovery, &d, s.now())
	})
	return d.DiscoverySession, err
}

// Discovery returns one session. Returns not_found.
func (s *Store) Discovery(projectID, id string) (DiscoverySession, error) {
	d, err := readOne[discoveryRecord](s, KindDiscovery, projectID, id)
	return d.DiscoverySession, err
}

// ListDiscovery lists a project's sessions, optionally in one state.
func (s *Store) ListDiscovery(projectID, state string, page Page) ([]DiscoverySession, string, error) {
	var recs []discoveryRecord
	var next string
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		recs, next, err = listRes[discoveryRecord](tx, KindDiscovery, projectID, page, func(d *discoveryRecord) bool {
			return state == "" || d.State == state
		})
		return err
	})
	out := make([]DiscoverySession, len(recs))
	for i := range recs {
		out[i] = recs[i].DiscoverySession
	}
	return out, next, err
}
