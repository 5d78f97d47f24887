package store

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// RuntimeKey is an ingest or query runtime API key. Only the SHA-256 of the key is stored
// (runtimeKeyRecord); reads show key_prefix so a person can tell keys apart.
type RuntimeKey struct {
	Meta
	Name      string     `json:"name"`
	Kind      string     `json:"kind"`
	ClientID  string     `json:"client_id"`
	Models    []string   `json:"models"`
	KeyPrefix string     `json:"key_prefix"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

type runtimeKeyRecord struct {
	RuntimeKey
	KeyHash []byte `json:"key_hash"`
}

// RuntimeKeyInput is a runtime key's writable fields. kind and client_id are fixed at
// creation.
type RuntimeKeyInput struct {
	ProjectID *string    `json:"project_id"`
	Name      *string    `json:"name"`
	Kind      *string    `json:"kind"`
	ClientID  *string    `json:"client_id"`
	Models    *[]string  `json:"models"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// RuntimeKey statuses, derived for list filters.
const (
	KeyActive  = "active"
	KeyExpired = "expired"
	KeyRevoked = "revoked"
)

// Status says whether a key can be used at t.
func (k *RuntimeKey) Status(t time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return KeyRevoked
	case k.ExpiresAt != nil && !t.Before(*k.ExpiresAt):
		return KeyExpired
	}
	return KeyActive
}

func (k *runtimeKeyRecord) apply(in RuntimeKeyInput) {
	if in.Name != nil {
		k.Name = strings.TrimSpace(*in.Name)
	}
	if in.Models != nil {
		k.Models = append([]string{}, (*in.Models)...)
	}
	if in.ExpiresAt != nil {
		e := in.ExpiresAt.UTC().Truncate(time.Second)
		k.ExpiresAt = &e
	}
}

// validate checks the key against its client: it must be of the key's kind, in the
// project, and the key's models must be among the client's.
func (k *runtimeKeyRecord) validate(tx *bolt.Tx, now time.Time, expiresChanged bool) error {
	var f fieldErrors
	if n := utf8.RuneCountInString(k.Name); n == 0 || n > 200 {
		f.add("name", "must be 1 to 200 characters")
	}
	f.name("name", k.Name)
	if k.Kind != ClientIngest && k.Kind != ClientQuery {
		f.add("kind", "must be ingest or query")
		return f.err()
	}
	c, err := getInProject[clientRecord](tx, clientKind(k.Kind), k.ProjectID, k.ClientID)
	if err != nil {
		f.add("client_id", "is not %s of this project", WithArticle(clientKind(k.Kind).Name))
		return f.err()
	}
	seen := map[string]bool{}
	for i, m := range k.Models {
		at := fmt.Sprintf("models[%d]", i)
		switch {
		case seen[m]:
			f.add(at, "repeats %q", m)
		case !contains(c.Models, m):
			f.add(at, "%q is not among the client's models: a key may only narrow its client", m)
		}
		seen[m] = true
	}
	if expiresChanged && k.ExpiresAt != nil && !k.ExpiresAt.After(now) {
		f.add("expires_at", "must be in the future")
	}
	return f.err()
}

// CreateRuntimeKey stores a runtime key made by the caller (auth.NewRuntimeKey); the key
// itself never reaches the store, only its hash and display prefix.
// Returns validation_failed, not_found.
func (s *Store) CreateRuntimeKey(projectID string, in RuntimeKeyInput, keyHash []byte, keyPrefix string) (RuntimeKey, error) {
	var k runtimeKeyRecord
	err := s.updateRuntime(func(tx *bolt.Tx) error {
		k = runtimeKeyRecord{RuntimeKey: RuntimeKey{Meta: Meta{ProjectID: projectID}, Models: []string{}, KeyPrefix: keyPrefix}, KeyHash: keyHash}
		if in.Kind != nil {
			k.Kind = *in.Kind
		}
		if in.ClientID != nil {
			k.ClientID = *in.ClientID
		}
		k.apply(in)
		if tx.Bucket(bucketProjects).Get([]byte(projectID)) == nil {
			return NotFound("project")
		}
		if err := k.validate(tx, s.now(), true); err != nil {
			return err
		}
		hashes := tx.Bucket(bucketRuntimeHashes)
		if hashes.Get(keyHash) != nil {
			return Errorf(CodeConflict, "key collision; try again")
		}
		if err := s.insertRes(tx, KindRuntimeKey, &k, s.now()); err != nil {
			return err
		}
		return hashes.Put(keyHash, []byte(k.ID))
	})
	return k.RuntimeKey, err
}

// UpdateRuntimeKey changes a key's name, models or expiry. kind and client_id cannot
// change. Returns validation_failed, not_found, conflict (revoked), precondition_failed.
func (s *Store) UpdateRuntimeKey(projectID, id string, in RuntimeKeyInput, ifMatch int) (RuntimeKey, error) {
	k, err := updateRes(s, KindRuntimeKey, projectID, id, ifMatch, func(tx *bolt.Tx, k *runtimeKeyRecord) error {
		if k.RevokedAt != nil {
			return Errorf(CodeConflict, "the runtime API key is revoked; revoked keys cannot change")
		}
		var f fieldErrors
		if in.Kind != nil && *in.Kind != k.Kind {
			f.add("kind", "cannot change; create a new key")
		}
		if in.ClientID != nil && *in.ClientID != k.ClientID {
			f.add("client_id", "cannot change; create a new key")
		}
		if err := f.err(); err != nil {
			return err
		}
		k.apply(in)
		return k.validate(tx, s.now(), in.ExpiresAt != nil)
	})
	return k.RuntimeKey, err
}

// RevokeRuntimeKey revokes a key for good (it stays listed with revoked_at). Revoking twice
// is harmless. Returns not_found.
func (s *Store) RevokeRuntimeKey(projectID, id string) (RuntimeKey, error) {
	var k runtimeKeyRecord
	err := s.updateRuntime(func(tx *bolt.Tx) (err error) {
		if k, err = getInProject[runtimeKeyRecord](tx, KindRuntimeKey, projectID, id); err != nil || k.RevokedAt != nil {
			return err
		}
		now := s.now()
		k.RevokedAt = &now
		return touchRes(tx, KindRuntimeKey, &k, now)
	})
	return k.RuntimeKey, err
}

// RuntimeKey returns one key. Returns not_found.
func (s *Store) RuntimeKey(projectID, id string) (RuntimeKey, error) {
	k, err := readOne[runtimeKeyRecord](s, KindRuntimeKey, projectID, id)
	return k.RuntimeKey, err
}

// RuntimeKeyByHash finds a key by the SHA-256 of the whole key, for runtime
// authentication. Returns not_found.
func (s *Store) RuntimeKeyByHash(hash []byte) (RuntimeKey, error) {
	var k runtimeKeyRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketRuntimeHashes).Get(hash)
		if id == nil {
			return NotFound("runtime API key")
		}
		var err error
		k, err = getRes[runtimeKeyRecord](tx, KindRuntimeKey, string(id))
		return err
	})
	return k.RuntimeKey, err
}

// RuntimeKeyFilter narrows a key list; empty fields do not filter.
type RuntimeKeyFilter struct {
	ClientID, Kind, Status string
}

// ListRuntimeKeys lists a project's runtime keys. Returns validation_failed (bad filter).
func (s *Store) ListRuntimeKeys(projectID string, flt RuntimeKeyFilter, page Page) ([]RuntimeKey, string, error) {
	var f fieldErrors
	if flt.Kind != "" && flt.Kind != ClientIngest && flt.Kind != ClientQuery {
		f.add("kind", "must be ingest or query")
	}
	if flt.Status != "" && flt.Status != KeyActive && flt.Status != KeyExpired && flt.Status != KeyRevoked {
		f.add("status", "must be active, expired or revoked")
	}
	if err := f.err(); err != nil {
		return nil, "", err
	}
	now := s.Now()
	var recs []runtimeKeyRecord
	var next string
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		recs, next, err = listRes[runtimeKeyRecord](tx, KindRuntimeKey, projectID, page, func(k *runtimeKeyRecord) bool {
			return (flt.ClientID == "" || k.ClientID == flt.ClientID) && (flt.Kind == "" || k.Kind == flt.Kind) &&
				(flt.Status == "" || k.Status(now) == flt.Status)
		})
		return err
	})
	out := make([]RuntimeKey, len(recs))
	for i := range recs {
		out[i] = recs[i].RuntimeKey
	}
	return out, next, err
}
