package warehouse

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"lookout/store"

	bolt "go.etcd.io/bbolt"
)

// Snapshot is store.Store.Snapshot for an embedded warehouse file.
func (l *RecordLog) Snapshot() (*os.File, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return store.SnapshotFile(l.db)
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
