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

// FreeBytes returns the file's size and how much of it holds no live page: free pages and
// the tail bbolt grows the file by ahead of use (up to 16 MiB at a time), which a compaction
// gives back as well. Counting only free pages left a file whose log had been sealed just
// short of CompactWorth's half, uncompacted, by the luck of where its tail ended.
func (l *RecordLog) FreeBytes() (size, free int64, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	fi, err := os.Stat(l.path)
	if err != nil {
		return 0, 0, err
	}
	var used int64
	if err := l.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
		return 0, 0, err
	}
	st := l.db.Stats()
	used -= int64(st.FreePageN+st.PendingPageN) * int64(l.db.Info().PageSize)
	return fi.Size(), max(fi.Size()-used, 0), nil
}

// Compact rewrites the file without its free pages. Every other use of the file waits
// while it runs (writes queue in the ingest writer; nothing fails), so callers compact
// only when it pays: see CompactWorth.
//
// The copy is written beside the file, then renamed over it while still open, and becomes
// the file in use: the lock passes from the old file to the new one with no moment in which
// neither is held, nothing is reopened, and any failure before the rename leaves the old
// file in use as it was.
func (l *RecordLog) Compact() error {
	// Only when the file is free this instant: waiting for the lock would queue every
	// writer behind a long query (a waiting Lock blocks new RLocks).
	if !l.mu.TryLock() {
		return errBusy
	}
	defer l.mu.Unlock()
	tmp := l.path + compactSuffix
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, warehouseOptions())
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	abandon := func(err error) error {
		dst.Close()
		os.Remove(tmp)
		return fmt.Errorf("compact: %w", err)
	}
	if err := bolt.Compact(dst, l.db, 64<<20); err != nil {
		return abandon(err)
	}
	if err := renameFile(tmp, l.path); err != nil {
		return abandon(err)
	}
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		// The rename happened; only its durability is in doubt, and both files are
		// whole: use the new one.
		err = fmt.Errorf("compact: sync directory: %w", err)
		old := l.db
		l.db = dst
		old.Close()
		return err
	}
	old := l.db
	l.db = dst
	_ = old.Close() // its file is unlinked: nothing of it is used again
	return nil
}

// renameFile is os.Rename; tests make it fail.
var renameFile = os.Rename

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
