package warehouse

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The embedded warehouse's record log (design/warehouse.md, layer 1).
//
// Each embedded warehouse has its own bbolt file, <data-dir>/warehouses/<warehouse id>.db,
// so a long ingest transaction never holds the control plane's write lock. In it:
//
//	log/<model id>   key: receive time (µs since the epoch, big-endian uint64) then a
//	                 sequence number (big-endian uint64), so a time range is a key range
//	                 and a walk is a sequential read. value: a log entry, the records of
//	                 one chunk of one request (entry.go); before format 4, one record as
//	                 compact JSON with "_received_at", "_client_id" and "_ingest_id".
//	idempotency      key: client id 0 Idempotency-Key. value: idemRecord JSON (the first
//	                 response, the request's fingerprint and when it was stored); kept 24 h.
//	idempotency_exp  key: expiry (µs, big-endian uint64) then the idempotency key; empty
//	                 value. Pruning walks it from the start and stops at the first entry
//	                 not yet due, so a pass touches only what expired.
//	meta             "version": the file's format version (big-endian uint64); a file
//	                 without it is version 1.
//	blockmeta/<model id>, blockcols/<model id>: the column blocks (blocks.go).
//
// Records are stored as validated; nothing is decoded to be written.

var (
	bucketIdempotency    = []byte("idempotency")
	bucketIdempotencyExp = []byte("idempotency_exp")
	bucketWarehouseMeta  = []byte("meta")
	keyWarehouseVersion  = []byte("version")
	logPrefix            = "log/"
)

// WarehouseVersion is the format version of the warehouse files this binary writes.
// Version 2 renamed the system field ingest_id to _ingest_id and added idempotency_exp.
// Version 3 added column blocks: a binary that knows only the log must refuse the file,
// or sealed records would look lost to it. Version 4 writes log entries of many records
// (entry.go); older records stay as they are, and only an older binary must refuse.
const WarehouseVersion = 4

// RecordKeySize is the size of a record key: receive µs then sequence.
const RecordKeySize = 16

// IdempotencyTTL is how long a repeated Idempotency-Key returns the first response.
const IdempotencyTTL = 24 * time.Hour

// RecordStore opens embedded warehouse files on first use and keeps them open.
type RecordStore struct {
	// OnCreate, when set, is told the id of every warehouse file Log creates, once the file
	// exists (serve records it in the control plane, so check can tell lost from never
	// written). An error fails that Log call.
	OnCreate func(warehouseID string) error

	dir    string
	mu     sync.Mutex
	logs   map[string]*RecordLog
	closed bool
}

// OpenRecordStore returns the record store under dataDir/warehouses. The directory is
// made when the first warehouse file is, so read-only commands (check, backup) leave a data
// dir as they found it.
func OpenRecordStore(dataDir string) (*RecordStore, error) {
	dir := filepath.Join(dataDir, "warehouses")
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	return &RecordStore{dir: dir, logs: map[string]*RecordLog{}}, nil
}

// Log returns the record log of an embedded warehouse, opening its file if needed.
func (rs *RecordStore) Log(warehouseID string) (*RecordLog, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if l := rs.logs[warehouseID]; l != nil {
		return l, nil
	}
	if rs.closed { // a handler outliving shutdown must not reopen a file
		return nil, ErrRecordStoreClosed
	}
	if !validFileID(warehouseID) {
		return nil, fmt.Errorf("bad warehouse id %q", warehouseID)
	}
	if err := os.MkdirAll(rs.dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(rs.dir, warehouseID+".db")
	_ = os.Remove(path + compactSuffix) // a compaction the process did not finish
	_, statErr := os.Stat(path)
	db, err := bolt.Open(path, 0o600, warehouseOptions())
	if err != nil {
		return nil, fmt.Errorf("open warehouse %s: %w", warehouseID, err)
	}
	err = upgradeWarehouse(db)
	if err == nil && errors.Is(statErr, os.ErrNotExist) && rs.OnCreate != nil {
		err = rs.OnCreate(warehouseID)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("warehouse %s: %w", warehouseID, err)
	}
	l := &RecordLog{db: db, path: path}
	if err := l.loadOutboxMark(); err != nil {
		db.Close()
		return nil, fmt.Errorf("warehouse %s: %w", warehouseID, err)
	}
	rs.logs[warehouseID] = l
	return l, nil
}

func validFileID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// warehouseOptions are the bbolt options of a warehouse file. The freelist is synced
// (NoFreelistSync false): otherwise bbolt rebuilds it at open by walking every page, so
// opening took time proportional to the file (0.6 s per GB measured), while syncing an
// append-only file's small freelist costs little per commit (docs/performance.md).
func warehouseOptions() *bolt.Options {
	return &bolt.Options{
		Timeout: time.Second, FreelistType: bolt.FreelistMapType, NoFreelistSync: false,
		// Address space, not memory: a long query's read transaction blocks a remap
		// (and with it the ingest writer) only once the file outgrows this.
		InitialMmapSize: 1 << 30,
	}
}

// upgradeWarehouse brings a warehouse file to WarehouseVersion, refusing one written by a
// newer binary. Each step is idempotent and works in bounded transactions, so an upgrade
// killed halfway is simply run again at the next open.
func upgradeWarehouse(db *bolt.DB) error {
	version := uint64(0)
	err := db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketWarehouseMeta)
		if meta == nil {
			fresh := true
			_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				fresh = false
				return nil
			})
			var err error
			if meta, err = tx.CreateBucket(bucketWarehouseMeta); err != nil {
				return err
			}
			if fresh { // a new file starts at the current version
				for _, b := range [][]byte{bucketIdempotency, bucketIdempotencyExp} {
					if _, err := tx.CreateBucket(b); err != nil {
						return err
					}
				}
				return putVersion(meta, WarehouseVersion)
			}
			if err := putVersion(meta, 1); err != nil {
				return err
			}
		}
		if _, err := tx.CreateBucketIfNotExists(bucketIdempotency); err != nil {
			return err
		}
		version = binary.BigEndian.Uint64(meta.Get(keyWarehouseVersion))
		return nil
	})
	if err != nil {
		return err
	}
	if version > WarehouseVersion {
		return fmt.Errorf("the file has format version %d but this binary knows only up to %d: run a newer Lookout", version, WarehouseVersion)
	}
	if version < 2 {
		if err := renameIngestID(db); err != nil {
			return fmt.Errorf("upgrade to version 2: %w", err)
		}
		if err := indexIdempotency(db); err != nil {
			return fmt.Errorf("upgrade to version 2: %w", err)
		}
		if err := db.Update(func(tx *bolt.Tx) error { return putVersion(tx.Bucket(bucketWarehouseMeta), 2) }); err != nil {
			return err
		}
	}
	if version < WarehouseVersion { // 3: blocks appear as the sealer writes them; 4: both
		// kinds of log value are read. Nothing to convert.
		if err := db.Update(func(tx *bolt.Tx) error { return putVersion(tx.Bucket(bucketWarehouseMeta), WarehouseVersion) }); err != nil {
			return err
		}
	}
	return nil
}

func putVersion(meta *bolt.Bucket, v uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return meta.Put(keyWarehouseVersion, b[:])
}

// upgradeBatch bounds the records one upgrade transaction rewrites.
const upgradeBatch = 20_000

// oldIngestID is how version 1 stored the system field: last in the record.
var oldIngestID = []byte(`,"ingest_id":"`)

// renamedIngestID returns the record with its trailing system field ingest_id renamed to
// _ingest_id, or nil when the record does not end with it (already renamed). A model
// field named ingest_id is never last: the system fields follow every model field.
func renamedIngestID(v []byte) []byte {
	i := bytes.LastIndex(v, oldIngestID)
	if i < 0 {
		return nil
	}
	rest := v[i+len(oldIngestID):]
	if len(rest) != len("ing_")+26+2 || !bytes.HasPrefix(rest, []byte("ing_")) || !bytes.HasSuffix(rest, []byte(`"}`)) {
		return nil
	}
	out := make([]byte, 0, len(v)+1)
	out = append(out, v[:i]...)
	out = append(out, `,"_ingest_id":"`...)
	return append(out, rest...)
}

// renameIngestID rewrites every version-1 record of every log bucket.
func renameIngestID(db *bolt.DB) error {
	var names [][]byte
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if bytes.HasPrefix(name, []byte(logPrefix)) {
				names = append(names, append([]byte(nil), name...))
			}
			return nil
		})
	}); err != nil {
		return err
	}
	for _, name := range names {
		var from []byte
		for done := false; !done; {
			err := db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(name)
				type kv struct{ k, v []byte }
				var edits []kv
				c := b.Cursor()
				k, v := c.Seek(from)
				if from != nil && bytes.Equal(k, from) {
					k, v = c.Next()
				}
				n := 0
				for ; k != nil && n < upgradeBatch; k, v = c.Next() {
					if nv := renamedIngestID(v); nv != nil {
						edits = append(edits, kv{append([]byte(nil), k...), nv})
					}
					from = append(from[:0], k...)
					n++
				}
				done = k == nil
				// Values grow by one byte in place: keep the pages full, as Append does,
				// or the upgrade would split every page and double the file.
				b.FillPercent = 1.0
				for _, e := range edits {
					if err := b.Put(e.k, e.v); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// indexIdempotency builds idempotency_exp for the entries a version-1 file holds, in
// transactions of at most upgradeBatch entries (re-running it only re-puts entries).
func indexIdempotency(db *bolt.DB) error {
	var from []byte
	for done := false; !done; {
		err := db.Update(func(tx *bolt.Tx) error {
			exp, err := tx.CreateBucketIfNotExists(bucketIdempotencyExp)
			if err != nil {
				return err
			}
			c := tx.Bucket(bucketIdempotency).Cursor()
			k, v := c.Seek(from)
			if from != nil && bytes.Equal(k, from) {
				k, v = c.Next()
			}
			for n := 0; k != nil && n < upgradeBatch; k, v = c.Next() {
				var r idemRecord
				if json.Unmarshal(v, &r) != nil {
					r.At = time.Time{} // unreadable: due at once
				}
				if err := exp.Put(expKey(r.At.Add(IdempotencyTTL), k), nil); err != nil {
					return err
				}
				from = append(from[:0], k...)
				n++
			}
			done = k == nil
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// expKey is an idempotency_exp key: the expiry then the idempotency key.
func expKey(at time.Time, key []byte) []byte {
	us := at.UnixMicro()
	if us < 0 {
		us = 0
	}
	out := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(out, uint64(us))
	return append(out, key...)
}

// ErrNoFile is returned by Existing for a warehouse nothing was ever written to.
var ErrNoFile = errors.New("nothing was ever written to this warehouse")

// Existing returns an embedded warehouse's file when it exists, opening it if needed, and
// ErrNoFile when it does not (a query or a stats read must not create files).
func (rs *RecordStore) Existing(warehouseID string) (*RecordLog, error) {
	rs.mu.Lock()
	l := rs.logs[warehouseID]
	rs.mu.Unlock()
	if l != nil {
		return l, nil
	}
	if !validFileID(warehouseID) {
		return nil, fmt.Errorf("bad warehouse id %q", warehouseID)
	}
	if _, err := os.Stat(filepath.Join(rs.dir, warehouseID+".db")); errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoFile
	}
	return rs.Log(warehouseID)
}

// OpenAll opens every warehouse file on disk, so the sealer keeps them all in shape after
// a restart, not only those that receive records.
func (rs *RecordStore) OpenAll() error {
	ids, err := rs.Files()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := rs.Log(id); err != nil {
			return err
		}
	}
	return nil
}

// SealWriteSeconds is how long sealing has held the write locks of the open warehouse
// files, all told: time in which ingest commits to those files waited.
func (rs *RecordStore) SealWriteSeconds() float64 {
	var n int64
	for _, l := range rs.open() {
		n += l.sealWriteNanos.Load()
	}
	return float64(n) / 1e9
}

// open returns the open warehouse files.
func (rs *RecordStore) open() []*RecordLog {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make([]*RecordLog, 0, len(rs.logs))
	for _, l := range rs.logs {
		out = append(out, l)
	}
	return out
}

// IsOpen reports whether a warehouse file is open.
func (rs *RecordStore) IsOpen(warehouseID string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.logs[warehouseID] != nil
}

// ErrRecordStoreClosed is returned by Log after Close.
var ErrRecordStoreClosed = errors.New("the warehouse files are closed: the server is shutting down")

// Close closes every open warehouse file; Log opens none after it.
func (rs *RecordStore) Close() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.closed = true
	var errs []error
	for id, l := range rs.logs {
		l.mu.Lock()
		errs = append(errs, l.db.Close())
		l.mu.Unlock()
		delete(rs.logs, id)
	}
	return errors.Join(errs...)
}

// Files lists the ids of the warehouse files on disk.
func (rs *RecordStore) Files() ([]string, error) {
	entries, err := os.ReadDir(rs.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && filepath.Ext(n) == ".db" {
			ids = append(ids, n[:len(n)-3])
		}
	}
	return ids, nil
}

// RecordLog is one embedded warehouse file: the record log and the column blocks.
type RecordLog struct {
	// mu guards db: every use holds it shared; Compact holds it alone while it swaps
	// the file for its compacted copy.
	mu   sync.RWMutex
	db   *bolt.DB
	path string

	metaMu sync.Mutex
	metas  map[metaKey]*BlockMeta
	cols   colCache
	// lastAppend is when Append last committed (Unix ns), for the sealer's yielding.
	lastAppend atomic.Int64
	// sealWriteNanos is the time Seal has held the file's write lock, all told.
	sealWriteNanos atomic.Int64
	// outbox is set when the file buffers records for an external engine (outbox.go).
	outbox atomic.Bool
}

// view runs fn in a read transaction.
func (l *RecordLog) view(fn func(tx *bolt.Tx) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.db.View(fn)
}

// update runs fn in a write transaction.
func (l *RecordLog) update(fn func(tx *bolt.Tx) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.db.Update(fn)
}

// AppendBatch is one request's records for one model, appended atomically.
type AppendBatch struct {
	ModelID    string
	ReceivedAt time.Time
	// Entries are the records, encoded by EncodeEntries before the batch is queued (so the
	// compression runs in the request's goroutine, not in the one that commits).
	Entries []Entry
	// Records, ClientID and IngestID are the plain form for tests and tools: when Entries
	// is empty, Append encodes them itself.
	Records            [][]byte
	ClientID, IngestID string
	// IdemKey, when set, makes the batch exactly-once: if the key was stored within
	// IdempotencyTTL the records are not written and Duplicate receives the first response.
	IdemKey      []byte
	IdemHash     []byte // the request's fingerprint, compared on a repeat
	IdemResponse []byte
	// Duplicate receives the first response when the key was stored for the same
	// request; Mismatch is set instead when it was stored for a different one.
	Duplicate []byte
	Mismatch  bool
}

type idemRecord struct {
	At       time.Time       `json:"at"`
	Hash     []byte          `json:"hash,omitempty"`
	Response json.RawMessage `json:"response"`
}

// Append writes every batch in one transaction and one fsync: the group commit. When it
// returns nil, every record of every non-duplicate batch is on disk.
func (l *RecordLog) Append(batches []*AppendBatch) error {
	defer l.lastAppend.Store(time.Now().UnixNano())
	return l.update(func(tx *bolt.Tx) error {
		// Read in the transaction, not from l.outbox: the mark and the appends it governs
		// are then always seen together.
		outbox := tx.Bucket(bucketWarehouseMeta).Get(keyOutbox) != nil
		idem := tx.Bucket(bucketIdempotency)
		var buckets map[string]*bolt.Bucket
		for _, b := range batches {
			if b.IdemKey != nil {
				if raw := idem.Get(b.IdemKey); raw != nil {
					var r idemRecord
					if json.Unmarshal(raw, &r) == nil && b.ReceivedAt.Sub(r.At) < IdempotencyTTL {
						if r.Hash != nil && !bytes.Equal(r.Hash, b.IdemHash) {
							b.Mismatch = true
						} else {
							b.Duplicate = append([]byte(nil), r.Response...)
						}
						continue
					}
				}
			}
			if buckets == nil {
				buckets = map[string]*bolt.Bucket{}
			}
			lb := buckets[b.ModelID]
			if lb == nil {
				var err error
				if lb, err = tx.CreateBucketIfNotExists([]byte(logPrefix + b.ModelID)); err != nil {
					return err
				}
				// Appends only: full pages halve the file and speed commits (design note).
				lb.FillPercent = 1.0
				buckets[b.ModelID] = lb
			}
			us := uint64(b.ReceivedAt.UnixMicro())
			entries := b.Entries
			if entries == nil {
				entries = EncodeEntries(b.Records, b.ClientID, b.IngestID)
			}
			for _, e := range entries {
				// The entry's records take the next e.n sequence numbers; the key names the
				// first (entry.go).
				seq := lb.Sequence() + 1
				if err := lb.SetSequence(seq + uint64(e.n) - 1); err != nil {
					return err
				}
				var k [RecordKeySize]byte
				putKey(k[:], us, seq)
				if err := lb.Put(k[:], e.value); err != nil {
					return err
				}
				if outbox {
					if err := indexEntry(tx, b.ModelID, seq, k[:]); err != nil {
						return err
					}
				}
			}
			if b.IdemKey != nil {
				raw, err := json.Marshal(idemRecord{At: b.ReceivedAt, Hash: b.IdemHash, Response: b.IdemResponse})
				if err != nil {
					return err
				}
				if err := idem.Put(b.IdemKey, raw); err != nil {
					return err
				}
				if err := tx.Bucket(bucketIdempotencyExp).Put(expKey(b.ReceivedAt.Add(IdempotencyTTL), b.IdemKey), nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Idempotent returns the stored first response of an idempotency key still within its TTL
// at now, and the fingerprint of the request that stored it (nil for entries stored before
// fingerprints were kept); nil, nil when there is none.
func (l *RecordLog) Idempotent(key []byte, now time.Time) (response, hash []byte) {
	_ = l.view(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketIdempotency).Get(key)
		var r idemRecord
		if raw != nil && json.Unmarshal(raw, &r) == nil && now.Sub(r.At) < IdempotencyTTL {
			response, hash = append([]byte(nil), r.Response...), r.Hash
		}
		return nil
	})
	return response, hash
}

// pruneBatch bounds the entries one pruning transaction deletes.
const pruneBatch = 1000

// PruneIdempotency deletes the idempotency entries that expired by now, walking the
// expiry index so it touches only those, in transactions of at most pruneBatch entries,
// and at most limit entries in all. It returns how many it deleted.
func (l *RecordLog) PruneIdempotency(now time.Time, limit int) (int, error) {
	total := 0
	for total < limit {
		n, more := 0, false
		err := l.update(func(tx *bolt.Tx) error {
			exp, idem := tx.Bucket(bucketIdempotencyExp), tx.Bucket(bucketIdempotency)
			due := uint64(now.UnixMicro())
			c := exp.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.First() {
				if binary.BigEndian.Uint64(k[:8]) > due {
					return nil
				}
				if n == pruneBatch || total+n == limit {
					more = true
					return nil
				}
				key := append([]byte(nil), k[8:]...)
				if err := c.Delete(); err != nil {
					return err
				}
				// The key may have been stored again since this entry was made: only an
				// entry that has expired itself goes.
				var r idemRecord
				if raw := idem.Get(key); raw != nil && (json.Unmarshal(raw, &r) != nil || now.Sub(r.At) >= IdempotencyTTL) {
					if err := idem.Delete(key); err != nil {
						return err
					}
				}
				n++
			}
			return nil
		})
		total += n
		if err != nil || !more {
			return total, err
		}
	}
	return total, nil
}

// RecordTime returns the receive time encoded in a record key.
func RecordTime(key []byte) time.Time {
	return time.UnixMicro(int64(binary.BigEndian.Uint64(key[:8]))).UTC()
}

// ScanPage is how many log entries one read transaction of Scan visits: short
// transactions let writers reuse pages and keep the mmap from being pinned (bbolt caveats).
const ScanPage = 256

// Scan calls fn for every record of a model's log received in [from, to) in receive order;
// a zero from or to leaves that end open. fn gets the record's key and the record as
// compact JSON with its system fields; both are valid only during the call. Scan pages
// with short read transactions, so it sees records committed while it runs up to where it
// has got. Returning a non-nil error from fn stops the scan with that error. It is the
// plain reading for tests and tools; queries read parts (ReadParts).
func (l *RecordLog) Scan(modelID string, from, to time.Time, fn func(key, rec []byte) error) error {
	var start [RecordKeySize]byte
	if !from.IsZero() {
		binary.BigEndian.PutUint64(start[:8], uint64(from.UnixMicro()))
	}
	var end []byte
	if !to.IsZero() {
		end = make([]byte, 8)
		binary.BigEndian.PutUint64(end, uint64(to.UnixMicro()))
	}
	cursor := start[:]
	first := true
	var d entryReader
	var rec []byte
	for {
		var last []byte
		n := 0
		err := l.view(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(logPrefix + modelID))
			if b == nil {
				return nil
			}
			c := b.Cursor()
			k, v := c.Seek(cursor)
			if !first && k != nil && bytes.Equal(k, cursor) {
				k, v = c.Next()
			}
			for ; k != nil && n < ScanPage; k, v = c.Next() {
				if end != nil && bytes.Compare(k[:8], end) >= 0 {
					return nil
				}
				if err := d.decode(v); err != nil {
					return fmt.Errorf("log entry %x: %w", k, err)
				}
				us, seq := binary.BigEndian.Uint64(k[:8]), binary.BigEndian.Uint64(k[8:])
				received := FormatTimestampMicro(int64(us))
				for i := uint64(0); ; i++ {
					r, err := d.next()
					if err != nil {
						return fmt.Errorf("log entry %x: %w", k, err)
					}
					if r == nil {
						break
					}
					if !d.legacy {
						rec = append(append(rec[:0], r[:len(r)-1]...), appendSystem(nil, SystemValues{ReceivedAt: received, ClientID: d.clientID, IngestID: d.ingestID}, len(r) == 2)...)
						r = rec
					}
					var rk [RecordKeySize]byte
					putKey(rk[:], us, seq+i)
					if err := fn(rk[:], r); err != nil {
						return err
					}
				}
				last = append(last[:0], k...)
				n++
			}
			return nil
		})
		if err != nil || n < ScanPage {
			return err
		}
		cursor, first = last, false
	}
}

// FormatTimestampMicro writes µs since the epoch as the system field _received_at is
// written: RFC 3339 in UTC with exactly six fractional digits.
func FormatTimestampMicro(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000Z")
}

// Count returns how many records a model has in the log.
func (l *RecordLog) Count(modelID string) (int, error) {
	n := 0
	err := l.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(logPrefix + modelID))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			m, _, err := entryHeader(v)
			if err != nil {
				return fmt.Errorf("log entry %x: %w", k, err)
			}
			n += m
		}
		return nil
	})
	return n, err
}

// Backup writes a consistent copy of the warehouse file to w from one read transaction;
// size, when not nil, is told the copy's length first.
func (l *RecordLog) Backup(w io.Writer, size func(int64)) (int64, error) {
	var n int64
	err := l.view(func(tx *bolt.Tx) (err error) {
		if size != nil {
			size(tx.Size())
		}
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// Check runs bbolt's consistency check on every warehouse file, naming the file in each
// problem.
func (rs *RecordStore) Check() ([]string, error) {
	ids, err := rs.Files()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		l, err := rs.Log(id)
		if err != nil {
			out = append(out, fmt.Sprintf("warehouse file %s: %v", id, err))
			continue
		}
		for _, p := range l.Check() {
			out = append(out, fmt.Sprintf("warehouse file %s: %s", id, p))
		}
	}
	return out, nil
}

// Check runs bbolt's consistency check on the warehouse file, then decodes every column
// of every block against its metadata.
func (l *RecordLog) Check() []string {
	var out []string
	_ = l.view(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			out = append(out, err.Error())
		}
		var d entryReader
		return tx.ForEach(func(name []byte, mb *bolt.Bucket) error {
			if model, ok := bytes.CutPrefix(name, []byte(seqPrefix)); ok {
				out = append(out, checkOutboxIndex(tx, string(model), mb)...)
				return nil
			}
			if model, ok := bytes.CutPrefix(name, []byte(logPrefix)); ok {
				return mb.ForEach(func(k, v []byte) error {
					err := d.decode(v)
					for r := []byte{}; err == nil && r != nil; {
						r, err = d.next()
					}
					if err != nil {
						out = append(out, fmt.Sprintf("model %s log entry %x: %v", model, k, err))
					}
					return nil
				})
			}
			model, ok := bytes.CutPrefix(name, []byte(blockMetaPrefix))
			if !ok {
				return nil
			}
			cb := tx.Bucket([]byte(blockColsPrefix + string(model)))
			return mb.ForEach(func(k, v []byte) error {
				var meta BlockMeta
				if err := json.Unmarshal(v, &meta); err != nil {
					out = append(out, fmt.Sprintf("model %s block %x: metadata: %v", model, k, err))
					return nil
				}
				for _, st := range meta.Cols {
					var raw []byte
					if cb != nil {
						raw = cb.Get(append(append([]byte(nil), k...), st.Name...))
					}
					if raw == nil {
						out = append(out, fmt.Sprintf("model %s block %d: column %s is missing", model, meta.ID, st.Name))
						continue
					}
					if _, err := decodeColumn(st.Name, st.Type, meta.Rows, raw); err != nil {
						out = append(out, fmt.Sprintf("model %s block %d: %v", model, meta.ID, err))
					}
				}
				return nil
			})
		})
	})
	return out
}

func putKey(k []byte, us, seq uint64) {
	binary.BigEndian.PutUint64(k[:8], us)
	binary.BigEndian.PutUint64(k[8:], seq)
}
