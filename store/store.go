// Package store is Lookout's only user of bbolt: every resource, index and queue lives in one
// data file. One exported method is one transaction; values are JSON, keys are documented in
// buckets.go, and bytes read from bbolt are copied (decoded) before a transaction ends.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Store is the control-plane database.
type Store struct {
	db  *bolt.DB
	ids ids
	// identityGen counts committed writes to accounts, memberships and tokens; see
	// IdentityGeneration.
	identityGen atomic.Uint64
	// runtimeGen counts committed writes to what the runtime reads on every request; see
	// RuntimeGeneration.
	runtimeGen atomic.Uint64
	// Now is the clock; tests replace it. Every timestamp the store writes comes from here.
	Now    func() time.Time
	sealer *Sealer
	rules  QueryRules
}

// Options tune Open.
type Options struct {
	// LockTimeout bounds the wait for the file lock another process holds; 0 means 1 s.
	LockTimeout time.Duration
	// ReadOnly opens with a shared lock and changes nothing: no migration, no key check
	// written. A file older than the binary opens too (a backup before an upgrade, a
	// check of an old copy); only a newer one is refused.
	ReadOnly bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Sealer encrypts stored secrets. Without one, writes that carry a secret fail; reads,
	// backups and checks work. With one, a read-write Open checks that the sealer's key is
	// the data file's (see ErrWrongMasterKey), storing the key check on first use.
	Sealer *Sealer
	// QueryRules checks the query objects that Analytics APIs and query clients store.
	// Without it those writes fail with an internal error rather than store an unchecked
	// query.
	QueryRules QueryRules
	// NewMasterKey replaces the stored key check with one for Sealer's key: the operator
	// lost the old key and accepts that secrets sealed with it stay unreadable.
	NewMasterKey bool
}

// ErrLocked is returned by Open when another process holds the data file.
var ErrLocked = errors.New("the data file is in use by another process (is lookout serve already running on this data dir?)")

// Open opens (creating if needed) the data file at path and brings its schema up to date.
func Open(path string, opts Options) (*Store, error) {
	if opts.LockTimeout == 0 {
		opts.LockTimeout = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        opts.LockTimeout,
		ReadOnly:       opts.ReadOnly,
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &Store{db: db, Now: opts.Now, sealer: opts.Sealer, rules: opts.QueryRules}
	if opts.ReadOnly {
		err = checkVersion(db)
	} else if err = migrate(s); err == nil && opts.Sealer != nil {
		err = s.ensureKeyCheck(opts.NewMasterKey)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// updateIdentity runs a write transaction that may change accounts, memberships or tokens,
// and then moves the identity generation on, so caches of those records notice.
func (s *Store) updateIdentity(fn func(tx *bolt.Tx) error) error {
	return s.updateBumping(&s.identityGen, fn)
}

// IdentityGeneration changes after every committed write that may change what
// TokenForAuth returns (except last_used_at). A cache that reads the generation before
// reading a record may keep that record for as long as the generation stays the same.
func (s *Store) IdentityGeneration() uint64 { return s.identityGen.Load() }

// updateRuntime runs a write transaction that may change what runtime authentication or
// ingest resolve on every request (projects, models, warehouses, clients, runtime keys,
// Client CAs, and any resource written through updateRes), and then moves the runtime
// generation on, so caches of those records notice.
func (s *Store) updateRuntime(fn func(tx *bolt.Tx) error) error {
	return s.updateBumping(&s.runtimeGen, fn)
}

// updateBumping runs a write transaction and moves gen on once it has committed: a write
// that was refused (rolled back) changed nothing, so caches keep what they hold.
func (s *Store) updateBumping(gen *atomic.Uint64, fn func(tx *bolt.Tx) error) error {
	err := s.db.Update(fn)
	if err == nil {
		gen.Add(1)
	}
	return err
}

// RuntimeGeneration changes after every committed write that may change a project, model,
// warehouse, client, runtime key or Client CA. A cache that reads the generation before
// reading a record may keep that record for as long as the generation stays the same.
func (s *Store) RuntimeGeneration() uint64 { return s.runtimeGen.Load() }

// Close closes the data file; pending write transactions have finished when it returns.
func (s *Store) Close() error { return s.db.Close() }

// now returns the clock's time in UTC at whole seconds, the precision every stored timestamp
// has: a value reads back exactly as it was written, and every timestamp in the API has the
// same fixed-width form ("2026-11-21T13:18:02Z"), so comparing them as strings is safe.
// Ordering within a second comes from the ids, which are time-ordered to the millisecond.
func (s *Store) now() time.Time { return s.Now().UTC().Truncate(time.Second) }

// newID returns a fresh id with the given type prefix ("prj_").
func (s *Store) newID(prefix string) string { return s.ids.next(prefix, s.Now()) }

// NewID returns a fresh sortable id with a type prefix, for ids made outside the store
// (an ingest_id).
func (s *Store) NewID(prefix string) string { return s.newID(prefix) }

// Size returns the data file's size in bytes as bbolt sees it.
func (s *Store) Size() (n int64) {
	_ = s.db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

// Backup writes a consistent copy of the whole data file to w from one read transaction, so
// it runs while the server keeps serving (writers are not blocked). size, when not nil, is
// told the copy's exact length before the first byte is written.
func (s *Store) Backup(w io.Writer, size func(int64)) (int64, error) {
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		if size != nil {
			size(tx.Size())
		}
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// getJSON decodes the value at key into v; a missing key is a not_found error for kind.
func getJSON(b *bolt.Bucket, key []byte, kind string, v any) error {
	raw := b.Get(key)
	if raw == nil {
		return NotFound(kind)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode %s %q: %w", kind, key, err)
	}
	return nil
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

// Page asks for one page of a list: at most Limit items after the item with id After ("":
// from the start). Cursors that carry After to clients, integrity-protected and bound to
// their list, are the transport's business (http/cursor.go).
type Page struct {
	Limit int
	After string
}

// scanPage walks the ids stored under prefix in an index bucket, in key order, starting
// after page.After. load turns an id into an item and says whether it belongs in the list
// (a filter). It returns at most page.Limit items and the After of the next page (the last
// id returned), which is "" exactly when no further item would match.
func scanPage[T any](idx *bolt.Bucket, prefix []byte, page Page, load func(id string) (T, bool, error)) ([]T, string, error) {
	after := page.After
	c := idx.Cursor()
	start := append(append([]byte{}, prefix...), after...)
	k, _ := c.Seek(start)
	if after != "" && k != nil && string(k) == string(start) {
		k, _ = c.Next()
	}
	items := []T{}
	last := ""
	for ; k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		id := string(k[len(prefix):])
		item, ok, err := load(id)
		if err != nil {
			return nil, "", err
		}
		if !ok {
			continue
		}
		if len(items) == page.Limit {
			return items, last, nil
		}
		items = append(items, item)
		last = id
	}
	return items, "", nil
}

func hasPrefix(k, prefix []byte) bool {
	return len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix)
}

func getJSONBytes(raw []byte, v any) error { return json.Unmarshal(raw, v) }

func itoa(i int) string { return strconv.Itoa(i) }
