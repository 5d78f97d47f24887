package store

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Snapshot copies the data file, from one read transaction, into an unlinked temporary file
// beside it and returns that file rewound. The read transaction lasts only as long as a
// local disk copy, so a slow consumer of the copy (a backup streamed over the admin socket)
// never keeps bbolt from growing the file (a remap waits for every open read transaction).
// Closing the file frees its space; being unlinked, it is never left behind, even by
// kill -9.
func (s *Store) Snapshot() (*os.File, error) { return snapshot(s.db) }

// Snapshot is Store.Snapshot for an embedded warehouse file.
func (l *RecordLog) Snapshot() (*os.File, error) { return snapshot(l.db) }

func snapshot(db *bolt.DB) (*os.File, error) {
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

// ReadOnlyLog is an embedded warehouse file opened for reading only, for the offline
// check and backup commands: nothing is created, migrated or written, and the file's
// bytes and modification time stay as they were.
type ReadOnlyLog struct{ *RecordLog }

// OpenReadOnlyLog opens <dataDir>/warehouses/<warehouseID>.db read-only. A missing file is
// an error (it is never created).
func OpenReadOnlyLog(dataDir, warehouseID string) (*ReadOnlyLog, error) {
	if !validFileID(warehouseID) {
		return nil, fmt.Errorf("bad warehouse id %q", warehouseID)
	}
	path := filepath.Join(dataDir, "warehouses", warehouseID+".db")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open warehouse %s: %w", warehouseID, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("open warehouse %s: %w", warehouseID, err)
	}
	return &ReadOnlyLog{&RecordLog{db: db}}, nil
}

// Close closes the file.
func (l *ReadOnlyLog) Close() error { return l.db.Close() }
