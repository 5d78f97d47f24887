package warehouse

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Outboxes: the local record log of a model whose warehouse is external (ClickHouse,
// PostgreSQL). Ingest appends to it exactly as to an embedded warehouse (the durable 202
// stays local), and a sink ships it to the engine in commit order. Such a file is marked
// once ("outbox" in meta) and then differs in three ways:
//
//	seq/<model id>    key: the sequence number of a log entry's first record (big-endian
//	                  uint64). value: the entry's log key. Log keys are ordered by the
//	                  request's receive time, which is not commit order (a request
//	                  received earlier may commit later), so a sink that followed log keys
//	                  could step over a record committed behind it. Sequence numbers are
//	                  given at commit, in order: the sink follows them.
//	shipped           key: model id. value: the sequence number of the last record the
//	                  engine confirmed (big-endian uint64): the sink's checkpoint, written
//	                  only after the engine acknowledged the batch.
//	no column blocks  the sealer leaves an outbox alone: its log is trimmed behind the
//	                  checkpoint once older than the warehouse's local retention.

var (
	keyOutbox     = []byte("outbox")
	bucketShipped = []byte("shipped")
	seqPrefix     = "seq/"
)

// Outbox returns the record log of an external warehouse, marking its file as an outbox
// the first time. Ingest writes to it through Append like any other log. Errors: the
// file's own (open, upgrade), or a file that already holds embedded records.
func (rs *RecordStore) Outbox(warehouseID string) (*RecordLog, error) {
	l, err := rs.Log(warehouseID)
	if err != nil || l.outbox.Load() {
		return l, err
	}
	err = l.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketWarehouseMeta)
		if meta.Get(keyOutbox) != nil {
			return nil
		}
		// A file with records but no mark was an embedded warehouse: its records were
		// never indexed, so it cannot become an outbox (warehouse types never change).
		var logs bool
		_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			logs = logs || bytes.HasPrefix(name, []byte(logPrefix)) || bytes.HasPrefix(name, []byte(blockMetaPrefix))
			return nil
		})
		if logs {
			return fmt.Errorf("warehouse file %s holds embedded records and cannot become an outbox", warehouseID)
		}
		if _, err := tx.CreateBucketIfNotExists(bucketShipped); err != nil {
			return err
		}
		return meta.Put(keyOutbox, []byte{1})
	})
	if err != nil {
		return nil, err
	}
	l.outbox.Store(true)
	return l, nil
}

// IsOutbox reports whether the file is an external warehouse's outbox.
func (l *RecordLog) IsOutbox() bool { return l.outbox.Load() }

// loadOutboxMark reads the outbox mark at open.
func (l *RecordLog) loadOutboxMark() error {
	return l.view(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketWarehouseMeta); meta != nil && meta.Get(keyOutbox) != nil {
			l.outbox.Store(true)
		}
		return nil
	})
}

// indexEntry records an appended entry in the outbox's sequence index (Append calls it).
func indexEntry(tx *bolt.Tx, modelID string, seq uint64, key []byte) error {
	b, err := tx.CreateBucketIfNotExists([]byte(seqPrefix + modelID))
	if err != nil {
		return err
	}
	b.FillPercent = 1.0
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return b.Put(k[:], key)
}

// OutboxRecord is one record read from an outbox, with its system values.
type OutboxRecord struct {
	Seq        uint64 // the record's sequence number in its model's log
	ReceivedUS int64  // receive time, µs since the epoch
	ClientID   string
	IngestID   string
	// Fields is the record's model fields as compact JSON. It is valid only during the
	// callback.
	Fields []byte
}

// OutboxState is where a model's outbox stands.
type OutboxState struct {
	Head    uint64 // the last sequence number committed
	Shipped uint64 // the checkpoint: every record up to it is in the engine
}

// Lag is how many committed records the engine does not have yet.
func (s OutboxState) Lag() int64 {
	if s.Head < s.Shipped {
		return 0
	}
	return int64(s.Head - s.Shipped)
}

// OutboxState reads a model's head and checkpoint (zero for a model never written).
// Errors: storage only.
func (l *RecordLog) OutboxState(modelID string) (OutboxState, error) {
	var st OutboxState
	err := l.view(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(logPrefix + modelID)); b != nil {
			st.Head = b.Sequence()
		}
		if b := tx.Bucket(bucketShipped); b != nil {
			if v := b.Get([]byte(modelID)); len(v) == 8 {
				st.Shipped = binary.BigEndian.Uint64(v)
			}
		}
		return nil
	})
	return st, err
}

// ReadOutbox calls fn for the records of a model committed after sequence number after,
// in commit order, whole log entries at a time until at least max records or maxBytes of
// their JSON were given (so a checkpoint always falls on an entry's end). It returns the
// sequence number of the last record given (after when none). One read transaction: the
// bounds bound how long it is held. Errors: a damaged entry, or fn's.
func (l *RecordLog) ReadOutbox(modelID string, after uint64, max, maxBytes int, fn func(r *OutboxRecord) error) (uint64, error) {
	last := after
	err := l.view(func(tx *bolt.Tx) error {
		idx := tx.Bucket([]byte(seqPrefix + modelID))
		lb := tx.Bucket([]byte(logPrefix + modelID))
		if idx == nil || lb == nil {
			return nil
		}
		var start [8]byte
		binary.BigEndian.PutUint64(start[:], after+1)
		c := idx.Cursor()
		var d entryReader
		var r OutboxRecord
		n, size := 0, 0
		for k, key := c.Seek(start[:]); k != nil && n < max && size < maxBytes; k, key = c.Next() {
			seq := binary.BigEndian.Uint64(k)
			v := lb.Get(key)
			if v == nil || len(key) != RecordKeySize {
				return fmt.Errorf("outbox of model %s: entry %d is indexed but missing from the log", modelID, seq)
			}
			if err := d.decode(v); err != nil {
				return fmt.Errorf("log entry %x: %w", key, err)
			}
			r.ReceivedUS = int64(binary.BigEndian.Uint64(key[:8]))
			r.ClientID, r.IngestID = d.clientID, d.ingestID
			for i := uint64(0); ; i++ {
				rec, err := d.next()
				if err != nil {
					return fmt.Errorf("log entry %x: %w", key, err)
				}
				if rec == nil {
					break
				}
				r.Seq, r.Fields = seq+i, rec
				if err := fn(&r); err != nil {
					return err
				}
				last = r.Seq
				n++
				size += len(rec)
			}
		}
		return nil
	})
	return last, err
}

// SetShipped moves a model's checkpoint to seq, once the engine confirmed every record up
// to it. It never moves back. Errors: storage only.
func (l *RecordLog) SetShipped(modelID string, seq uint64) error {
	return l.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketShipped)
		if err != nil {
			return err
		}
		if v := b.Get([]byte(modelID)); len(v) == 8 && binary.BigEndian.Uint64(v) >= seq {
			return nil
		}
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], seq)
		return b.Put([]byte(modelID), k[:])
	})
}

// TrimOutbox deletes, from the oldest, the log entries of a model that were shipped (every
// record at or below the checkpoint) and received before cutoff, at most limit entries in
// one transaction. It stops at the first entry that must stay, so what remains is always
// a suffix of the commit order. Returns how many records it deleted. Errors: a damaged
// entry, or storage.
func (l *RecordLog) TrimOutbox(modelID string, cutoff time.Time, limit int) (int, error) {
	deleted := 0
	err := l.update(func(tx *bolt.Tx) error {
		idx := tx.Bucket([]byte(seqPrefix + modelID))
		lb := tx.Bucket([]byte(logPrefix + modelID))
		sb := tx.Bucket(bucketShipped)
		if idx == nil || lb == nil || sb == nil {
			return nil
		}
		v := sb.Get([]byte(modelID))
		if len(v) != 8 {
			return nil
		}
		shipped := binary.BigEndian.Uint64(v)
		cut := uint64(cutoff.UnixMicro())
		c := idx.Cursor()
		for k, key := c.First(); k != nil && limit > 0; k, key = c.First() {
			val := lb.Get(key)
			n := 1
			if val != nil {
				var err error
				if n, _, err = entryHeader(val); err != nil {
					return fmt.Errorf("log entry %x: %w", key, err)
				}
			}
			if binary.BigEndian.Uint64(k)+uint64(n)-1 > shipped || binary.BigEndian.Uint64(key[:8]) >= cut {
				return nil
			}
			if val != nil {
				if err := lb.Delete(key); err != nil {
					return err
				}
				deleted += n
			}
			if err := c.Delete(); err != nil {
				return err
			}
			limit--
		}
		return nil
	})
	return deleted, err
}

// checkOutboxIndex reports an outbox's sequence index out of step with its log: an index
// entry whose log entry is gone, or whose sequence number is not the log entry's; and a
// log entry left out of the index (the sink would never ship it).
func checkOutboxIndex(tx *bolt.Tx, modelID string, idx *bolt.Bucket) []string {
	var out []string
	lb := tx.Bucket([]byte(logPrefix + modelID))
	indexed := 0
	_ = idx.ForEach(func(k, key []byte) error {
		indexed++
		if len(k) != 8 || len(key) != RecordKeySize || lb == nil || lb.Get(key) == nil {
			out = append(out, fmt.Sprintf("model %s outbox: sequence %x points at a missing log entry %x", modelID, k, key))
		} else if !bytes.Equal(k, key[8:]) {
			out = append(out, fmt.Sprintf("model %s outbox: sequence %x points at log entry %x of another sequence", modelID, k, key))
		}
		return nil
	})
	if lb != nil {
		if n := lb.Stats().KeyN; n != indexed {
			out = append(out, fmt.Sprintf("model %s outbox: %d log entries but %d indexed", modelID, n, indexed))
		}
	}
	return out
}
