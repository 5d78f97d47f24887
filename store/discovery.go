package store

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// A discovery session is fed by a client that may send anything, so everything it keeps is
// capped: the session record holds counters and at most MaxDiscoveryFields field
// statistics (each a few counters), and previews live in their own keys, so a capture costs
// the same however long the session has been fed.
const (
	// MaxDiscoverySamples is how many samples one session learns from. A thousand records
	// show every field a client sends often enough to matter and give stable seen ratios;
	// past it a session is full and /discover answers 409 until it is reviewed.
	MaxDiscoverySamples = 1_000
	// MaxDiscoveryFields is how many distinct field names a session tracks: as many as a
	// model may hold. Values of further names are counted in fields_dropped.
	MaxDiscoveryFields = MaxModelFields
	// MaxDiscoveryFieldName is the longest field name tracked (the longest a model field
	// name may be); values of longer names are counted in fields_dropped.
	MaxDiscoveryFieldName = 64
	// MaxDiscoveryPreview is how many samples a session keeps to show the reviewer: the
	// latest ones.
	MaxDiscoveryPreview = 20
	// MaxDiscoveryPreviewBytes is the largest sample kept as a preview (as compact JSON).
	// A larger one still feeds the statistics but is left out of the preview (counted in
	// preview_skipped): a cut-off sample would not be JSON.
	MaxDiscoveryPreviewBytes = 16 << 10
)

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
// Fields are inferred from top-level field names only: a nested object or array is one
// field of type object or array, so nesting never adds names.
type DiscoverySession struct {
	Meta
	IngestClientID string `json:"ingest_client_id"`
	ModelKey       string `json:"model_key"`
	State          string `json:"state"`
	// Samples is how many samples the session learned from (at most MaxDiscoverySamples).
	Samples int `json:"samples"`
	// FieldsDropped counts field values not inspected because their name was too long or
	// the session already tracked MaxDiscoveryFields names.
	FieldsDropped int `json:"fields_dropped"`
	// PreviewSkipped counts samples left out of the preview for exceeding
	// MaxDiscoveryPreviewBytes.
	PreviewSkipped int             `json:"preview_skipped"`
	Fields         []InferredField `json:"fields"`
	// Preview is the latest samples, oldest first; only a single session read carries it,
	// and a session that has ended has none (the samples are dropped once reviewed).
	Preview []json.RawMessage `json:"preview,omitempty"`
	ModelID string            `json:"model_id,omitempty"`
}

// discoveryRecord is a session as stored: counters and statistics, bounded by the caps.
// Fields are inferred from Stats when read; previews are in bucketDiscoveryPreviews.
type discoveryRecord struct {
	Meta
	IngestClientID string                 `json:"ingest_client_id"`
	ModelKey       string                 `json:"model_key"`
	State          string                 `json:"state"`
	Samples        int                    `json:"samples"`
	FieldsDropped  int                    `json:"fields_dropped"`
	PreviewSkipped int                    `json:"preview_skipped"`
	PreviewNext    uint64                 `json:"preview_next"` // sequence of the next preview
	ModelID        string                 `json:"model_id,omitempty"`
	Stats          map[string]*FieldStats `json:"stats"`
}

// view is the session as the API shows it, without previews.
func (d *discoveryRecord) view() DiscoverySession {
	return DiscoverySession{Meta: d.Meta, IngestClientID: d.IngestClientID, ModelKey: d.ModelKey, State: d.State,
		Samples: d.Samples, FieldsDropped: d.FieldsDropped, PreviewSkipped: d.PreviewSkipped,
		Fields: infer(d.Stats, d.Samples), ModelID: d.ModelID}
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
		if id := tx.Bucket(bucketDiscoveryWaiting).Get([]byte(in.IngestClientID)); id != nil {
			return Errorf(CodeConflict, "the client already has a waiting discovery session (%s); accept or discard it first", id)
		}
		d = discoveryRecord{Meta: Meta{ProjectID: projectID}, IngestClientID: in.IngestClientID,
			ModelKey: in.ModelKey, State: DiscoveryWaiting, Stats: map[string]*FieldStats{}}
		if err := s.insertRes(tx, KindDiscovery, &d, s.now()); err != nil {
			return err
		}
		return tx.Bucket(bucketDiscoveryWaiting).Put([]byte(in.IngestClientID), []byte(d.ID))
	})
	v := d.view()
	v.Preview = []json.RawMessage{}
	return v, err
}

// waitingSession is the client's waiting session, found through the waiting index.
func waitingSession(tx *bolt.Tx, projectID, clientID string) (*discoveryRecord, error) {
	id := tx.Bucket(bucketDiscoveryWaiting).Get([]byte(clientID))
	if id == nil {
		return nil, nil
	}
	d, err := getInProject[discoveryRecord](tx, KindDiscovery, projectID, string(id))
	if IsCode(err, CodeNotFound) || (err == nil && d.State != DiscoveryWaiting) {
		return nil, nil // a stale entry: the client has no waiting session
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// CaptureDiscovery adds sample records to the client's waiting session and returns it
// (without previews) and how many samples it took: all of them, or as many as fit under
// MaxDiscoverySamples. Each capture reads and writes one record bounded by the caps, and
// at most MaxDiscoveryPreview preview keys. Returns conflict when no session is waiting or
// the waiting one is full.
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
		if d.Samples >= MaxDiscoverySamples {
			return Errorf(CodeConflict, "the discovery session %s already holds %d samples, as many as a session learns from: accept or discard it in the console", d.ID, MaxDiscoverySamples)
		}
		if d.Stats == nil {
			d.Stats = map[string]*FieldStats{}
		}
		// Only the latest previews survive, so collect this request's last ones first
		// and write each key once.
		var fresh [][]byte
		for _, rec := range samples {
			if d.Samples >= MaxDiscoverySamples {
				break
			}
			captured++
			d.Samples++
			d.learn(rec)
			raw, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			if len(raw) > MaxDiscoveryPreviewBytes {
				d.PreviewSkipped++
				continue
			}
			if len(fresh) == MaxDiscoveryPreview {
				fresh = fresh[1:]
			}
			fresh = append(fresh, raw)
		}
		if err := d.addPreviews(tx, fresh); err != nil {
			return err
		}
		return touchRes(tx, KindDiscovery, d, s.now())
	})
	if err != nil || d == nil {
		return DiscoverySession{}, 0, err
	}
	return d.view(), captured, nil
}

// learn folds one sample's top-level fields into the statistics, within the field caps.
func (d *discoveryRecord) learn(rec map[string]any) {
	for name, v := range rec {
		st := d.Stats[name]
		if st == nil {
			if len(name) > MaxDiscoveryFieldName || len(d.Stats) >= MaxDiscoveryFields {
				d.FieldsDropped++
				continue
			}
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

// addPreviews appends previews and deletes the oldest beyond MaxDiscoveryPreview.
func (d *discoveryRecord) addPreviews(tx *bolt.Tx, fresh [][]byte) error {
	if len(fresh) == 0 {
		return nil
	}
	b := tx.Bucket(bucketDiscoveryPreviews)
	for _, raw := range fresh {
		if err := b.Put(previewKey(d.ID, d.PreviewNext), raw); err != nil {
			return err
		}
		d.PreviewNext++
	}
	keep := previewKey(d.ID, d.PreviewNext-min(d.PreviewNext, MaxDiscoveryPreview))
	return deletePreviews(tx, d.ID, keep)
}

// deletePreviews deletes a session's previews whose key sorts below until (nil: all).
func deletePreviews(tx *bolt.Tx, sessionID string, until []byte) error {
	b := tx.Bucket(bucketDiscoveryPreviews)
	prefix := pairPrefix(sessionID)
	var old [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && (until == nil || bytes.Compare(k, until) < 0); k, _ = c.Next() {
		old = append(old, bytes.Clone(k))
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// previews reads a session's previews, oldest first.
func previews(tx *bolt.Tx, sessionID string) []json.RawMessage {
	out := []json.RawMessage{}
	b := tx.Bucket(bucketDiscoveryPreviews)
	if b == nil {
		return out
	}
	prefix := pairPrefix(sessionID)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		out = append(out, bytes.Clone(v))
	}
	return out
}

// endDiscovery moves a session out of waiting: the client's waiting entry and the
// previews go (the samples are the client's data, not needed once reviewed).
func endDiscovery(tx *bolt.Tx, d *discoveryRecord) error {
	w := tx.Bucket(bucketDiscoveryWaiting)
	if id := w.Get([]byte(d.IngestClientID)); string(id) == d.ID {
		if err := w.Delete([]byte(d.IngestClientID)); err != nil {
			return err
		}
	}
	return deletePreviews(tx, d.ID, nil)
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
		for _, f := range infer(d.Stats, d.Samples) {
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
		if err := endDiscovery(tx, &d); err != nil {
			return err
		}
		return touchRes(tx, KindDiscovery, &d, s.now())
	})
	return d.view(), m, err
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
		if err := endDiscovery(tx, &d); err != nil {
			return err
		}
		return touchRes(tx, KindDiscovery, &d, s.now())
	})
	return d.view(), err
}

// Discovery returns one session with its previews. Returns not_found.
func (s *Store) Discovery(projectID, id string) (DiscoverySession, error) {
	var out DiscoverySession
	err := s.db.View(func(tx *bolt.Tx) error {
		d, err := getInProject[discoveryRecord](tx, KindDiscovery, projectID, id)
		if err != nil {
			return err
		}
		out = d.view()
		out.Preview = previews(tx, d.ID)
		return nil
	})
	return out, err
}

// ListDiscovery lists a project's sessions, optionally in one state, without previews.
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
		out[i] = recs[i].view()
	}
	return out, next, err
}

// migrateDiscoveryPreviews (migration 5) moves the previews stored inside each session
// record into bucketDiscoveryPreviews, drops the stored copy of the inferred fields (they
// are inferred on read now), clamps a session's sample count to what it learned from, and
// indexes each waiting session by its client.
func migrateDiscoveryPreviews(s *Store, tx *bolt.Tx) error {
	for _, b := range [][]byte{bucketDiscoveryPreviews, bucketDiscoveryWaiting} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	type legacy struct {
		discoveryRecord
		Preview []json.RawMessage `json:"preview"`
	}
	var recs []legacy
	err := tx.Bucket(bucketDiscovery).ForEach(func(k, v []byte) error {
		var d legacy
		if err := getJSONBytes(v, &d); err != nil {
			return fmt.Errorf("discovery session %s: %w", k, err)
		}
		recs = append(recs, d)
		return nil
	})
	if err != nil {
		return err
	}
	for i := range recs {
		d := &recs[i].discoveryRecord
		// The old cap counted samples past the 10,000 it learned from.
		d.Samples = min(d.Samples, 10_000)
		if d.State == DiscoveryWaiting {
			if err := tx.Bucket(bucketDiscoveryWaiting).Put([]byte(d.IngestClientID), []byte(d.ID)); err != nil {
				return err
			}
			var keep [][]byte
			for _, raw := range recs[i].Preview {
				if len(raw) <= MaxDiscoveryPreviewBytes {
					keep = append(keep, raw)
				}
			}
			if err := d.addPreviews(tx, keep); err != nil {
				return err
			}
		}
		if err := putJSON(tx.Bucket(bucketDiscovery), []byte(d.ID), d); err != nil {
			return err
		}
	}
	return nil
}
