package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"lookout/store"
)

// lockName is the process lock of a data dir. bbolt's own lock sits on lookout.db, a file
// that can be replaced (a restore, a mistaken backup onto it): a second process would then
// lock the new inode while the first still writes the old one. lookout.lock is created
// once, never renamed, replaced or removed, so whoever holds its flock holds the data dir.
const lockName = "lookout.lock"

// lockMode says how a command takes the process lock.
type lockMode int

const (
	// lockExclusive: serve and the writing commands (admin, token); the lock file is
	// created when missing.
	lockExclusive lockMode = iota
	// lockShared: read-only commands (check, backup). The lock file is never created, so a
	// read-only command leaves the data dir exactly as it was; without one, bbolt's shared
	// lock on lookout.db still keeps a writer out.
	lockShared
)

// lockDataDir takes the process lock of dir, waiting up to timeout for another holder. It
// returns (nil, nil) for lockShared when there is no lock file, and an error wrapping
// store.ErrLocked when another process holds it.
func lockDataDir(dir string, mode lockMode, timeout time.Duration) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	flag, how := os.O_RDWR|os.O_CREATE, syscall.LOCK_EX
	if mode == lockShared {
		flag, how = os.O_RDONLY, syscall.LOCK_SH
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if mode == lockShared && errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s: %w", dir, store.ErrLocked)
		}
		time.Sleep(25 * time.Millisecond) // polling, as bbolt does for its own lock
	}
}
