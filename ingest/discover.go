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
}

// Discover reads one JSON object or an array of objects (at most 10 MB) and adds them to
// the caller's waiting discovery session. Nothing is written to any warehouse. Returns
// too_large, invalid_json, conflict (no waiting session).
func (s *Service) Discover(c Caller, body io.Reader) (*Captured, error) {
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
	sess, n, err := s.store.CaptureDiscovery(c.ProjectID, c.ClientID, samples)
	if err != nil {
		return nil, err
	}
	return &Captured{SessionID: sess.ID, Captured: n}, nil
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
