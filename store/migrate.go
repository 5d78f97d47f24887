package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// migrations is append-only: entry i moves a data file from schema version i to i+1. Never
// edit or reorder an entry that has shipped; add a new one.
var migrations = []func(s *Store, tx *bolt.Tx) error{
	// 1: the foundation buckets.
	func(s *Store, tx *bolt.Tx) error {
		for _, b := range [][]byte{
			bucketUsers, bucketUsersByEmail, bucketWorkspaces, bucketMemberships,
			bucketMembershipsByUser, bucketProjects, bucketProjectsByWorkspace,
			bucketProjectMembers, bucketTokens, bucketTokensByPrefix, bucketTokensByUser,
			bucketSessions,
		} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	},
	// 2: the Management resources, and the default embedded warehouse every project has.
	func(s *Store, tx *bolt.Tx) error {
		for _, b := range [][]byte{
			bucketByProject, bucketModels, bucketModelKeys, bucketWarehouses, bucketCredentials,
			bucketIngestClients, bucketQueryClients, bucketRuntimeKeys, bucketRuntimeHashes,
			bucketAnalyticsAPIs, bucketAPIKeys, bucketBindings, bucketClientCAs,
		} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketProjects).ForEach(func(k, _ []byte) error {
			return s.createDefaultWarehouse(tx, string(k), s.now())
		})
	},
	// 3: discovery sessions.
	func(s *Store, tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketDiscovery)
		return err
	},
	// 4: console sessions indexed by expiry, so sign-in prunes only what expired instead of
	// scanning every session; backfilled from the sessions already stored.
	func(s *Store, tx *bolt.Tx) error {
		idx, err := tx.CreateBucketIfNotExists(bucketSessionsByExpiry)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
			var ses Session
			if err := getJSONBytes(v, &ses); err != nil {
				return fmt.Errorf("session %s: %w", k, err)
			}
			return idx.Put(expiryKey(ses.ExpiresAt, string(k)), nil)
		})
	},
	// 5: discovery previews move out of the session record into their own keys, and each
	// client's waiting session is indexed, so a capture no longer rewrites the previews
	// nor reads every session of the project.
	migrateDiscoveryPreviews,
	// 6: alerts, notification channels and alert simulations.
	func(s *Store, tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketAlerts, bucketChannels, bucketSimulations} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	},
	// 7: incidents, their occurrences and the delivery queue.
	func(s *Store, tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketIncidents, bucketIncidentsOpen, bucketOccurrences, bucketDeliveries, bucketDeliveryQueue, bucketDeliveriesByInc, bucketDeliveryMerge} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	},
}

// SchemaVersion is the data-file version this binary writes.
func SchemaVersion() int { return len(migrations) }

func readSchemaVersion(tx *bolt.Tx) uint64 {
	b := tx.Bucket(bucketMeta)
	if b == nil {
		return 0
	}
	v := b.Get(schemaVersionKey)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// ErrNewerFile is returned by Open when the data file was written by a newer binary.
type ErrNewerFile struct{ File, Binary int }

func (e ErrNewerFile) Error() string {
	return fmt.Sprintf("data file has schema version %d but this lookout binary only knows up to %d: upgrade lookout (never downgrade a data file)", e.File, e.Binary)
}

// migrate runs every pending migration in one write transaction, so a crash leaves the file
// at either the old or the new version.
func migrate(s *Store) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		cur := readSchemaVersion(tx)
		if cur > uint64(len(migrations)) {
			return ErrNewerFile{File: int(cur), Binary: len(migrations)}
		}
		if cur == uint64(len(migrations)) {
			return nil
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		for i := cur; i < uint64(len(migrations)); i++ {
			if err := migrations[i](s, tx); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(len(migrations)))
		return meta.Put(schemaVersionKey, v[:])
	})
}

// checkVersion is migrate's read-only twin, for files opened read-only: a newer file is
// refused, an older one is read as it is (Check skips the buckets it does not have yet).
func checkVersion(db *bolt.DB) error {
	return db.View(func(tx *bolt.Tx) error {
		if cur := readSchemaVersion(tx); cur > uint64(len(migrations)) {
			return ErrNewerFile{File: int(cur), Binary: len(migrations)}
		}
		return nil
	})
}
