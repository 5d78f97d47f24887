package warehouse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// bbolt never gives disk space back: pages freed by sealing (the log range a block
// replaces is about ten times the block) are reused, but the file keeps the size of the
// largest log it ever held. Once the sealer has caught up and most of the file is free,
// Compact rewrites it, so the disk holds what the blocks need.

// errBusy means the file was in use; compaction is tried again on a later pass.
var errBusy = errors.New("the file is in use")

// compactSuffix names the copy being written; a leftover from a crash is removed at open.
const compactSuffix = ".compact"

// FreeBytes returns the file's size and how much of it is free pages.
func (l *RecordLog) FreeBytes() (size, free int64, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	fi, err := os.Stat(l.db.Path())
	if err != nil {
		return 0, 0, err
	}
	st := l.db.Stats()
	return fi.Size(), int64(st.FreePageN+st.PendingPageN) * int64(l.db.Info().PageSize), nil
}

// Compact rewrites the file without its free pages. Every other use of the file waits
// while it runs (writes queue in the ingest writer; nothing fails), so callers compact
// only when it pays: see CompactWorth.
func (l *RecordLog) Compact() error {
	// Only when the file is free this instant: waiting for the lock would queue every
	// writer behind a long query (a waiting Lock blocks new RLocks).
	if !l.mu.TryLock() {
		return errBusy
	}
	defer l.mu.Unlock()
	path := l.db.Path()
	tmp := path + compactSuffix
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, warehouseOptions())
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	if err := bolt.Compact(dst, l.db, 64<<20); err != nil {
		dst.Close()
		os.Remove(tmp)
		return fmt.Errorf("compact: %w", err)
	}
	if err := dst.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("compact: %w", err)
	}
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	renameErr := os.Rename(tmp, path)
	if renameErr == nil {
		renameErr = syncDir(filepath.Dir(path))
	}
	db, err := bolt.Open(path, 0o600, warehouseOptions())
	if err != nil {
		// The file (old or new, both whole) stays on disk; the next open uses it.
		return fmt.Errorf("compact: reopen: %w", err)
	}
	l.db = db
	if renameErr != nil {
		os.Remove(tmp)
		return fmt.Errorf("compact: %w", renameErr)
	}
	return nil
}

// CompactWorth says whether a file of size with free bytes free is worth rewriting:
// at least 32 MiB and half of it would come back.
func CompactWorth(size, free int64) bool {
	return free >= 32<<20 && free*2 >= size
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
