package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"lookout/store"
)

// MaxDiscover is the largest discovery submission (spec §8): 10 MB.
const MaxDiscover = 10_000_000

// Captured is the answer to a discovery submission.
type Captured struct {
	SessionID string `json:"session_id"`
	Captured  int    `json:"captured"`
	// Dropped is how many samples of the submission the session did not take because it
	// reached store.MaxDiscoverySamples.
	Dropped int `json:"dropped"`
}

// Discover reads one JSON object or an array of objects (at most 10 MB) and adds them to
// the caller's waiting discovery session. Nothing is written to any warehouse.
//
// It spends the client's quota exactly as /ingest does, from the same budgets: one request
// of requests_per_minute, and one record of records_per_minute per sample. Sharing them
// keeps a quota what it promises the operator (the most a client may make the server do
// per minute) rather than a per-endpoint allowance a client could double by also
// sending to /discover.
//
// Returns *QuotaExceeded, too_large, invalid_json, conflict (no waiting session, or it
// is full).
func (s *Service) Discover(c Caller, body io.Reader) (*Captured, error) {
	if err := s.allowRequest(c); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(body, MaxDiscover+1))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || len(raw) > MaxDiscover {
		return nil, errf(store.CodeTooLarge, "a discovery submission may be at most %d bytes", MaxDiscover)
	}
	if err != nil {
		return nil, errf(store.CodeInvalidJSON, "could not read the body")
	}
	samples, err := decodeSamples(raw)
	if err != nil {
		return nil, err
	}
	if q := c.Quota.RecordsPerMinute; q > 0 && len(samples) > q {
		return nil, errf(store.CodeTooLarge, "this submission holds %d samples but the client's records_per_minute quota is %d, so it can never be accepted; send at most %d samples at a time", len(samples), q, q)
	}
	if err := s.allowRecords(c, len(samples)); err != nil {
		return nil, err
	}
	sess, n, err := s.store.CaptureDiscovery(c.ProjectID, c.ClientID, samples)
	if err != nil {
		return nil, err
	}
	return &Captured{SessionID: sess.ID, Captured: n, Dropped: len(samples) - n}, nil
}

// decodeSamples accepts one object or an array of objects.
func decodeSamples(raw []byte) ([]map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	bad := errf(store.CodeInvalidJSON, "send one JSON object or an array of objects")
	if len(raw) == 0 {
		return nil, bad
	}
	var out []map[string]any
	switch raw[0] {
	case '{':
		var one map[string]any
		if dec.Decode(&one) != nil {
			return nil, bad
		}
		out = []map[string]any{one}
	case '[':
		if dec.Decode(&out) != nil {
			return nil, bad
		}
		for _, o := range out {
			if o == nil {
				return nil, bad
			}
		}
	default:
		return nil, bad
	}
	if dec.More() {
		return nil, bad
	}
	if len(out) == 0 {
		return nil, errf(store.CodeInvalidJSON, "the array holds no samples")
	}
	return out, nil
}
