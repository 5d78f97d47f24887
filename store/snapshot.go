package store

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Snapshot copies the data file, from one read transaction, into an unlinked temporary file
// beside it and returns that file rewound. The read transaction lasts only as long as a
// local disk copy, so a slow consumer of the copy (a backup streamed over the admin socket)
// never keeps bbolt from growing the file (a remap waits for every open read transaction).
// Closing the file frees its space; being unlinked, it is never left behind, even by
// kill -9.
func (s *Store) Snapshot() (*os.File, error) { return SnapshotFile(s.db) }

// SnapshotFile is Snapshot for any bbolt file (the warehouse files use it too).
func SnapshotFile(db *bolt.DB) (*os.File, error) {
	f, err := os.CreateTemp(filepath.Dir(db.Path()), ".backup-*")
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	_ = os.Remove(f.Name())
	err = db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	})
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return f, nil
}
