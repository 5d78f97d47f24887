package store

import (
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// keyCheckValue is what the key check seals: opening it proves a master key is the one the
// data file's secrets were sealed with, whether or not any secret is stored yet.
var keyCheckValue = []byte("lookout master key check v1")

// ErrWrongMasterKey is returned by Open when the master key does not open the data file's
// key check: the file was made with another key, and secrets sealed with that key would
// not open (and new ones would be sealed under a second key).
var ErrWrongMasterKey = errors.New("the master key does not open this data file's key check: it was made with another key (check --master-key-file or LOOKOUT_MASTER_KEY); if the old key is lost for good, start once with --new-master-key (secrets sealed with the old key stay unreadable)")

// ensureKeyCheck stores the key check at the first read-write open with a sealer (data files
// made before key checks existed get theirs at their next serve start) and verifies it at
// every later one. replace overwrites a check made with another key.
func (s *Store) ensureKeyCheck(replace bool) error {
	var stored []byte
	_ = s.db.View(func(tx *bolt.Tx) error {
		stored = append([]byte(nil), tx.Bucket(bucketMeta).Get(keyCheckKey)...)
		return nil
	})
	if len(stored) > 0 {
		if s.keyOpens(s.sealer, stored) {
			return nil
		}
		if !replace {
			return ErrWrongMasterKey
		}
	}
	if len(stored) == 0 && !replace {
		// A data file from before key checks: if it holds a sealed secret, the key must
		// open it before its check is written, or a restore without its lookout.key (a
		// fresh key made at start) would be sealed into the check as if it were right.
		sealed, aad := s.anySealedSecret()
		if sealed != nil {
			if _, err := s.sealer.Unseal(sealed, aad); err != nil {
				return ErrWrongMasterKey
			}
		}
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyCheckKey, s.sealer.Seal(keyCheckValue, keyCheckKey))
	})
}

// anySealedSecret returns one sealed secret the file holds (a warehouse credential's or a
// client's HS256 secret) with its additional data, or nil.
func (s *Store) anySealedSecret() (sealed, aad []byte) {
	_ = s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketCredentials); b != nil {
			_ = b.ForEach(func(k, v []byte) error {
				var c credentialRecord
				if sealed == nil && getJSONBytes(v, &c) == nil && len(c.SealedSecret) > 0 {
					sealed, aad = c.SealedSecret, []byte(c.ID)
				}
				return nil
			})
		}
		for _, name := range [][]byte{bucketIngestClients, bucketQueryClients} {
			if b := tx.Bucket(name); b != nil && sealed == nil {
				_ = b.ForEach(func(k, v []byte) error {
					var c clientRecord
					if sealed == nil && getJSONBytes(v, &c) == nil && len(c.SealedHS256) > 0 {
						sealed, aad = c.SealedHS256, []byte(c.ID)
					}
					return nil
				})
			}
		}
		return nil
	})
	return sealed, aad
}

func (s *Store) keyOpens(sl *Sealer, sealed []byte) bool {
	pt, err := sl.Unseal(sealed, keyCheckKey)
	return err == nil && string(pt) == string(keyCheckValue)
}

// CheckMasterKey verifies that sl (nil: the store's own sealer) opens the stored key check.
// It returns one problem when it does not, or when the file has a key check but no key was
// given; a file without a key check (never served since key checks exist) passes.
func (s *Store) CheckMasterKey(sl *Sealer) ([]string, error) {
	if sl == nil {
		sl = s.sealer
	}
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return nil
		}
		stored := meta.Get(keyCheckKey)
		switch {
		case stored == nil:
		case sl == nil:
			out = append(out, "master key: none given (lookout.key is missing and LOOKOUT_MASTER_KEY is not set), so stored secrets cannot be opened")
		case !s.keyOpens(sl, stored):
			out = append(out, "master key: it does not open this data file's key check (the file was made with another key): stored secrets cannot be opened")
		}
		return nil
	})
	return out, err
}

// NoteWarehouseFiles records that the embedded warehouse files of ids exist, so Check can
// tell a lost file from one that was never written. Ids already recorded are left alone.
func (s *Store) NoteWarehouseFiles(ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	var missing bool
	_ = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketWarehouseFiles)
		for _, id := range ids {
			if b == nil || b.Get([]byte(id)) == nil {
				missing = true
			}
		}
		return nil
	})
	if !missing {
		return nil // the common case writes nothing
	}
	at := s.now().Format(time.RFC3339)
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketWarehouseFiles)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if b.Get([]byte(id)) == nil {
				if err := b.Put([]byte(id), []byte(at)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// CheckWarehouseFiles returns a problem for every embedded warehouse file the control plane
// recorded (NoteWarehouseFiles) that is not among files, the ids of the files on disk: a
// restored data dir that lacks its warehouse copies.
func (s *Store) CheckWarehouseFiles(files []string) ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketWarehouseFiles)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if !slices.Contains(files, string(k)) {
				out = append(out, fmt.Sprintf("warehouse %s: its file warehouses/%s.db is missing (it was written on %s)", k, k, v))
			}
			return nil
		})
	})
	return out, err
}
