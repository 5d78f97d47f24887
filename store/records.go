package store

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
	"time"

	bolt "go.etcd.io/bbolt"
)

// The embedded warehouse's record log (design/warehouse.md, layer 1).
//
// Each embedded warehouse has its own bbolt file, <data-dir>/warehouses/<warehouse id>.db,
// so a long ingest transaction never holds the control plane's write lock. In it:
//
//	log/<model id>   key: receive time (µs since the epoch, big-endian uint64) then a
//	                 sequence number (big-endian uint64, the bucket's NextSequence), so a
//	                 time range is a key range and a walk is a sequential read.
//	                 value: the validated record as compact JSON, with "_received_at",
//	                 "_client_id" and "ingest_id" appended.
//	idempotency      key: client id 0 Idempotency-Key. value: idemRecord JSON (the first
//	                 response and when it was stored); kept 24 h.
//
// Records are stored once, as validated; nothing is decoded to be written.

var (
	bucketIdempotency = []byte("idempotency")
	logPrefix         = "log/"
)

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

	dir  string
	mu   sync.Mutex
	logs map[string]*RecordLog
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
	if !validFileID(warehouseID) {
		return nil, fmt.Errorf("bad warehouse id %q", warehouseID)
	}
	if err := os.MkdirAll(rs.dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(rs.dir, warehouseID+".db")
	_, statErr := os.Stat(path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: time.Second, FreelistType: bolt.FreelistMapType, NoFreelistSync: true,
		InitialMmapSize: 64 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("open warehouse %s: %w", warehouseID, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketIdempotency)
		return err
	})
	if err == nil && errors.Is(statErr, os.ErrNotExist) && rs.OnCreate != nil {
		err = rs.OnCreate(warehouseID)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	l := &RecordLog{db: db}
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

// Close closes every open warehouse file.
func (rs *RecordStore) Close() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var errs []error
	for id, l := range rs.logs {
		errs = append(errs, l.db.Close())
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

// RecordLog is one embedded warehouse file.
type RecordLog struct {
	db *bolt.DB
}

// AppendBatch is one request's records for one model, appended atomically.
type AppendBatch struct {
	ModelID    string
	ReceivedAt time.Time
	Records    [][]byte
	// IdemKey, when set, makes the batch exactly-once: if the key was stored within
	// IdempotencyTTL the records are not written and Duplicate receives the first response.
	IdemKey      []byte
	IdemResponse []byte
	Duplicate    []byte
}

type idemRecord struct {
	At       time.Time       `json:"at"`
	Response json.RawMessage `json:"response"`
}

// Append writes every batch in one transaction and one fsync: the group commit. When it
// returns nil, every record of every non-duplicate batch is on disk.
func (l *RecordLog) Append(batches []*AppendBatch) error {
	return l.db.Update(func(tx *bolt.Tx) error {
		idem := tx.Bucket(bucketIdempotency)
		var buckets map[string]*bolt.Bucket
		for _, b := range batches {
			if b.IdemKey != nil {
				if raw := idem.Get(b.IdemKey); raw != nil {
					var r idemRecord
					if json.Unmarshal(raw, &r) == nil && b.ReceivedAt.Sub(r.At) < IdempotencyTTL {
						b.Duplicate = append([]byte(nil), r.Response...)
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
			for _, rec := range b.Records {
				seq, err := lb.NextSequence()
				if err != nil {
					return err
				}
				var k [RecordKeySize]byte
				putKey(k[:], us, seq)
				if err := lb.Put(k[:], rec); err != nil {
					return err
				}
			}
			if b.IdemKey != nil {
				raw, err := json.Marshal(idemRecord{At: b.ReceivedAt, Response: b.IdemResponse})
				if err != nil {
					return err
				}
				if err := idem.Put(b.IdemKey, raw); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Idempotent returns the stored first response of an idempotency key still within its TTL
// at now, or nil.
func (l *RecordLog) Idempotent(key []byte, now time.Time) []byte {
	var out []byte
	_ = l.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketIdempotency).Get(key)
		var r idemRecord
		if raw != nil && json.Unmarshal(raw, &r) == nil && now.Sub(r.At) < IdempotencyTTL {
			out = append([]byte(nil), r.Response...)
		}
		return nil
	})
	return out
}

// PruneIdempotency deletes idempotency entries older than the TTL at now, at most limit
// per call so the write transaction stays short. It returns how many it deleted.
func (l *RecordLog) PruneIdempotency(now time.Time, limit int) (int, error) {
	n := 0
	err := l.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketIdempotency)
		c := b.Cursor()
		for k, v := c.First(); k != nil && n < limit; {
			var r idemRecord
			if json.Unmarshal(v, &r) != nil || now.Sub(r.At) >= IdempotencyTTL {
				if err := c.Delete(); err != nil {
					return err
				}
				n++
				k, v = c.Seek(k)
				continue
			}
			k, v = c.Next()
		}
		return nil
	})
	return n, err
}

// RecordTime returns the receive time encoded in a record key.
func RecordTime(key []byte) time.Time {
	return time.UnixMicro(int64(binary.BigEndian.Uint64(key[:8]))).UTC()
}

// ScanPage is how many records one read transaction of Scan visits: short transactions
// let writers reuse pages and keep the mmap from being pinned (bbolt caveats).
const ScanPage = 4096

// Scan calls fn for every record of a model received in [from, to) in receive order; a
// zero from or to leaves that end open. fn gets the key and value; both are valid only
// during the call. Scan pages with short read transactions, so it sees records committed
// while it runs up to where it has got. Returning a non-nil error from fn stops the scan
// with that error.
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
	for {
		var last []byte
		n := 0
		err := l.db.View(func(tx *bolt.Tx) error {
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
				if err := fn(k, v); err != nil {
					return err
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

// Count returns how many records a model has in the log.
func (l *RecordLog) Count(modelID string) (int, error) {
	n := 0
	err := l.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(logPrefix + modelID)); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	return n, err
}

// Backup writes a consistent copy of the warehouse file to w from one read transaction;
// size, when not nil, is told the copy's length first.
func (l *RecordLog) Backup(w io.Writer, size func(int64)) (int64, error) {
	var n int64
	err := l.db.View(func(tx *bolt.Tx) (err error) {
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

// Check runs bbolt's consistency check on the warehouse file.
func (l *RecordLog) Check() []string {
	var out []string
	_ = l.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			out = append(out, err.Error())
		}
		return nil
	})
	return out
}

func putKey(k []byte, us, seq uint64) {
	binary.BigEndian.PutUint64(k[:8], us)
	binary.BigEndian.PutUint64(k[8:], seq)
}
