package warehouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"lookout/store"
)

// Blocks live beside the log in the warehouse file:
//
//	blockmeta/<model id>  key: block id (big-endian uint64, rising: block order is log
//	                      order). value: BlockMeta JSON.
//	blockcols/<model id>  key: block id, then the column name. value: the column's bytes
//	                      (column.go).
//
// A block is written in the same transaction that deletes the log range it replaces, so a
// record is in exactly one layer, also across a crash.

const (
	blockMetaPrefix = "blockmeta/"
	blockColsPrefix = "blockcols/"
)

// BlockMeta describes a block: enough to skip it without reading a column.
type BlockMeta struct {
	ID   uint64 `json:"id"`
	Rows int    `json:"rows"`
	// TMin and TMax bound the block's record times (µs since the epoch): the model's
	// timestamp_field, or _received_at where that is missing.
	TMin int64 `json:"tmin"`
	TMax int64 `json:"tmax"`
	// First and Last are the log keys of the first and last record sealed into it.
	First []byte  `json:"first"`
	Last  []byte  `json:"last"`
	Cols  []Stats `json:"cols"`
	Bytes int     `json:"bytes"`
	// Sealed is false for a part read from the unsealed log.
	Sealed bool `json:"-"`
}

// Col returns the statistics of a column, nil when the block has none (a field added to
// the model after the block was sealed: every row is null).
func (m *BlockMeta) Col(name string) *Stats {
	for i := range m.Cols {
		if m.Cols[i].Name == name {
			return &m.Cols[i]
		}
	}
	return nil
}

func blockKey(id uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], id)
	return k[:]
}

// recordTimes returns each row's record time: the timestamp field where it has a value,
// else _received_at.
func recordTimes(m *store.Model, cols []*Column) []int64 {
	var ts, recv *Column
	for _, c := range cols {
		if c.Name == m.TimestampField && m.TimestampField != "" {
			ts = c
		}
		if c.Name == "_received_at" {
			recv = c
		}
	}
	if ts != nil && !ts.HasNulls() {
		return ts.Ints
	}
	if ts == nil {
		return recv.Ints
	}
	out := make([]int64, ts.N)
	for i := range out {
		if ts.Null(i) {
			out[i] = recv.Ints[i]
		} else {
			out[i] = ts.Ints[i]
		}
	}
	return out
}

func newMeta(m *store.Model, cols []*Column, rows int) *BlockMeta {
	meta := &BlockMeta{Rows: rows}
	times := recordTimes(m, cols)
	if rows > 0 {
		meta.TMin, meta.TMax = minMax(times[:rows])
	}
	for _, c := range cols {
		meta.Cols = append(meta.Cols, c.stats())
	}
	return meta
}

// Part is a sealed block or a chunk of the unsealed log, as the query engine sees it.
type Part struct {
	Meta *BlockMeta
	// for a sealed block
	tx    *bolt.Tx
	l     *RecordLog
	model string
	// for a chunk of the log: its columns, already built
	cols map[string]*Column
	// Times is filled by RecordTimes.
	times []int64
	m     *store.Model
}

// Column returns a column of the part, decoding it when the part is sealed. A field the
// block does not have (added to the model later) comes back all null.
func (p *Part) Column(name, typ string) (*Column, error) {
	if p.cols != nil {
		if c, ok := p.cols[name]; ok {
			return c, nil
		}
	} else if st := p.Meta.Col(name); st != nil && st.Type == typ {
		key := colKey{model: p.model, block: p.Meta.ID, name: name}
		if c := p.l.cols.get(key); c != nil {
			return c, nil
		}
		raw := p.tx.Bucket([]byte(blockColsPrefix + p.model)).Get(append(blockKey(p.Meta.ID), name...))
		if raw == nil {
			return nil, fmt.Errorf("block %d of model %s lacks column %s: %w", p.Meta.ID, p.model, name, errCorrupt)
		}
		c, err := decodeColumn(name, typ, p.Meta.Rows, raw)
		if err != nil {
			return nil, fmt.Errorf("block %d of model %s: %w", p.Meta.ID, p.model, err)
		}
		p.l.cols.put(key, c)
		return c, nil
	}
	c := &Column{Name: name, Type: typ, N: p.Meta.Rows, Nulls: make([]uint64, (p.Meta.Rows+63)/64)}
	for i := 0; i < c.N; i++ {
		c.Nulls[i>>6] |= 1 << (uint(i) & 63)
	}
	c.fillZero()
	return c, nil
}

// RecordTimes returns each row's record time (µs).
func (p *Part) RecordTimes() ([]int64, error) {
	if p.times != nil {
		return p.times, nil
	}
	var cols []*Column
	for _, name := range []string{p.m.TimestampField, "_received_at"} {
		if name == "" {
			continue
		}
		c, err := p.Column(name, store.TypeTimestamp)
		if err != nil {
			return nil, err
		}
		cols = append(cols, c)
		if !c.HasNulls() {
			break // the timestamp field has every row's time: _received_at is not needed
		}
	}
	p.times = recordTimes(p.m, cols)
	return p.times, nil
}

// ReadParts calls fn for every sealed block of the model, in order, then for the unsealed
// log in chunks of up to BlockRows records, all from one read transaction: every record
// is seen exactly once. A part and its columns are valid only during fn. ctx is checked
// between parts.
func (l *RecordLog) ReadParts(ctx context.Context, m *store.Model, fn func(p *Part) error) error {
	return l.view(func(tx *bolt.Tx) error {
		if mb := tx.Bucket([]byte(blockMetaPrefix + m.ID)); mb != nil {
			c := mb.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if err := ctxErr(ctx); err != nil {
					return err
				}
				meta, err := l.meta(m.ID, k, v)
				if err != nil {
					return err
				}
				if err := fn(&Part{Meta: meta, tx: tx, l: l, model: m.ID, m: m}); err != nil {
					return err
				}
			}
		}
		lb := tx.Bucket([]byte(logPrefix + m.ID))
		if lb == nil {
			return nil
		}
		fields := Schema(m)
		c := lb.Cursor()
		k, v := c.First()
		for k != nil {
			if err := ctxErr(ctx); err != nil {
				return err
			}
			b := newBuilder(fields, 1024)
			first := k
			var last []byte
			for size := 0; k != nil && size < BlockBytes; k, v = c.Next() {
				n, raw, err := entryHeader(v)
				if err != nil {
					b.release()
					return fmt.Errorf("log entry %x: %w", k, err)
				}
				if b.n > 0 && b.n+n > BlockRows { // parts hold whole entries
					break
				}
				if err := b.addEntry(k, v); err != nil {
					b.release()
					return err
				}
				last = lastRecordKey(k, n)
				size += raw
			}
			cols := b.finish()
			b.release()
			meta := newMeta(m, cols, b.n)
			meta.First, meta.Last = first, last
			p := &Part{Meta: meta, cols: make(map[string]*Column, len(cols)), m: m}
			for _, col := range cols {
				p.cols[col.Name] = col
			}
			if err := fn(p); err != nil {
				return err
			}
		}
		return nil
	})
}

// ctxErr is ctx.Err, and DeadlineExceeded as soon as ctx's deadline has passed: a
// context's timer fires from the scheduler, which on a busy machine may run it only after
// the whole query. A query past its deadline then stops at the next part instead of
// answering late as if it had been in time.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// meta returns a block's decoded metadata, from the cache when it was read before
// (blocks never change: a merged block gets a new id).
func (l *RecordLog) meta(modelID string, k, v []byte) (*BlockMeta, error) {
	id := binary.BigEndian.Uint64(k)
	key := metaKey{modelID, id}
	l.metaMu.Lock()
	m := l.metas[key]
	l.metaMu.Unlock()
	if m != nil {
		return m, nil
	}
	m = &BlockMeta{}
	if err := json.Unmarshal(v, m); err != nil {
		return nil, fmt.Errorf("block %d of model %s: %w", id, modelID, err)
	}
	m.Sealed = true
	l.metaMu.Lock()
	if l.metas == nil {
		l.metas = map[metaKey]*BlockMeta{}
	}
	l.metas[key] = m
	l.metaMu.Unlock()
	return m, nil
}

type metaKey struct {
	model string
	id    uint64
}

func (l *RecordLog) forgetMeta(modelID string, id uint64) {
	l.metaMu.Lock()
	delete(l.metas, metaKey{modelID, id})
	l.metaMu.Unlock()
}

// SealPolicy says when the sealer turns log records into a block.
type SealPolicy struct {
	// MinAge: fewer than BlockRows records are sealed once the oldest is this old.
	MinAge time.Duration
	// MergeBelow: a last block with fewer rows is rewritten together with the next
	// records, so a model that receives a trickle keeps one growing block instead of many
	// small ones.
	MergeBelow int
}

// DefaultSealPolicy seals within two seconds and merges blocks under half full.
var DefaultSealPolicy = SealPolicy{MinAge: 2 * time.Second, MergeBelow: BlockRows / 2}

// sealBuilt, when set (tests), runs between building a block and writing it.
var sealBuilt func()

// ErrStaleModel is returned by Seal when a record has a field the model it was given lacks:
// the model changed since it was read; seal again with the current one.
var ErrStaleModel = errors.New("the model changed while sealing")

// errSealRace means a record the block holds left the log between reading and sealing it
// (nothing but the sealer deletes log records, so this is a safeguard); the seal is simply
// tried again.
var errSealRace = errors.New("the log range changed while it was sealed")

// Seal turns the oldest records of the model's log into one block, when the policy says
// it is time, and returns how many records it sealed (0: nothing to do yet). The block is
// built from one read transaction, then written in one write transaction that deletes
// exactly the records it holds (and the small block it replaces, if merged): a record is
// never in both layers or in neither, whatever moment the process dies.
func (l *RecordLog) Seal(m *store.Model, now time.Time, policy SealPolicy) (int, error) {
	fields := Schema(m)
	var (
		cols     []*Column
		rows     int
		newRecs  int
		first    []byte
		last     []byte
		merged   *BlockMeta
		tooEarly bool
		keys     []byte // the sealed records' keys, RecordKeySize each
	)
	err := l.view(func(tx *bolt.Tx) error {
		lb := tx.Bucket([]byte(logPrefix + m.ID))
		if lb == nil {
			tooEarly = true
			return nil
		}
		c := lb.Cursor()
		k, v := c.First()
		if k == nil {
			tooEarly = true
			return nil
		}
		// Decide before building anything: a young, short tail waits.
		if now.Sub(RecordTime(k)) < policy.MinAge {
			n, size := 0, 0
			for ck, cv := c.First(); ck != nil && n < BlockRows && size < BlockBytes; ck, cv = c.Next() {
				en, raw, err := entryHeader(cv)
				if err != nil {
					return fmt.Errorf("log entry %x: %w", ck, err)
				}
				n += en
				size += raw
			}
			if n < BlockRows && size < BlockBytes {
				tooEarly = true
				return nil
			}
			k, v = c.First()
		}
		b := newBuilder(fields, 4096)
		if policy.MergeBelow > 0 {
			if mb := tx.Bucket([]byte(blockMetaPrefix + m.ID)); mb != nil {
				if mk, mv := mb.Cursor().Last(); mk != nil {
					meta, err := l.meta(m.ID, mk, mv)
					if err != nil {
						return err
					}
					if meta.Rows < policy.MergeBelow && meta.Bytes < BlockBytes/8 {
						p := &Part{Meta: meta, tx: tx, l: l, model: m.ID, m: m}
						old := make([]*Column, 0, len(fields))
						for _, f := range fields {
							col, err := p.Column(f.Name, f.Type)
							if err != nil {
								return err
							}
							old = append(old, col)
						}
						b.addColumns(meta.Rows, old)
						merged = meta
					}
				}
			}
		}
		start := b.n
		first = append([]byte(nil), k...)
		for size := 0; k != nil && size < BlockBytes; k, v = c.Next() {
			n, raw, err := entryHeader(v)
			if err != nil {
				return fmt.Errorf("log entry %x: %w", k, err)
			}
			if b.n > start && b.n+n > BlockRows { // a block holds whole entries
				break
			}
			if err := b.addEntry(k, v); err != nil {
				return err
			}
			size += raw
			keys = append(keys, k...)
			last = lastRecordKey(k, n)
		}
		newRecs = b.n - start
		if b.unknown != "" {
			// A record names a field the model did not have when the sealer read it (added
			// since): sealing it now would drop the value for good.
			return fmt.Errorf("%w: a record has field %q", ErrStaleModel, b.unknown)
		}
		cols, rows = b.finish(), b.n
		b.release()
		return nil
	})
	if err != nil || tooEarly {
		return 0, err
	}
	if sealBuilt != nil {
		sealBuilt()
	}
	meta := newMeta(m, cols, rows)
	meta.First, meta.Last = first, last
	if merged != nil {
		meta.First = merged.First
	}
	encoded := make([][]byte, len(cols))
	for i, c := range cols {
		encoded[i] = c.encode()
		meta.Cols[i].Bytes = len(encoded[i])
		meta.Bytes += len(encoded[i])
	}
	writeStart := time.Now()
	defer func() { l.sealWriteNanos.Add(time.Since(writeStart).Nanoseconds()) }()
	err = l.update(func(tx *bolt.Tx) error {
		lb := tx.Bucket([]byte(logPrefix + m.ID))
		// Exactly the block's records leave the log. A record that arrived meanwhile with an
		// earlier receive time (a stream stamps every chunk with its start) may sit among
		// them: it stays in the log and goes into a later block. Refusing the range instead
		// would let a long stream keep anything from being sealed.
		if err := deleteKeys(lb, keys); err != nil {
			return err
		}
		mb, err := tx.CreateBucketIfNotExists([]byte(blockMetaPrefix + m.ID))
		if err != nil {
			return err
		}
		cb, err := tx.CreateBucketIfNotExists([]byte(blockColsPrefix + m.ID))
		if err != nil {
			return err
		}
		mb.FillPercent, cb.FillPercent = 1.0, 1.0
		if merged != nil {
			if err := deleteBlock(mb, cb, merged.ID); err != nil {
				return err
			}
		}
		if meta.ID, err = mb.NextSequence(); err != nil {
			return err
		}
		key := blockKey(meta.ID)
		for i, c := range cols {
			if err := cb.Put(append(append([]byte(nil), key...), c.Name...), encoded[i]); err != nil {
				return err
			}
		}
		raw, err := json.Marshal(meta)
		if err != nil {
			return err
		}
		return mb.Put(key, raw)
	})
	if errors.Is(err, errSealRace) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if merged != nil {
		l.forgetMeta(m.ID, merged.ID)
	}
	return newRecs, nil
}

// deleteKeys deletes keys (RecordKeySize each, ascending) from b, last first: bbolt
// rebalances only at commit, so deleting from the front leaves emptied leaves that every
// later seek from the front walks again (quadratic); from the back, each delete lands on a
// leaf that still holds its key. A key that is gone means the log changed: errSealRace.
func deleteKeys(b *bolt.Bucket, keys []byte) error {
	if len(keys) == 0 {
		return nil
	}
	// One seek to the last key, then step back: each delete leaves the cursor on the
	// key after the deleted one, and Prev moves to the one before it.
	c := b.Cursor()
	k, _ := c.Seek(keys[len(keys)-RecordKeySize:])
	for end := len(keys); end > 0; end -= RecordKeySize {
		want := keys[end-RecordKeySize : end]
		if !bytes.Equal(k, want) {
			// A key that is not ours in between: find ours.
			if k, _ = c.Seek(want); !bytes.Equal(k, want) {
				return errSealRace // ours is gone: the log changed under the seal
			}
		}
		if err := c.Delete(); err != nil {
			return err
		}
		k, _ = c.Prev()
	}
	return nil
}

func deleteBlock(mb, cb *bolt.Bucket, id uint64) error {
	key := blockKey(id)
	if err := mb.Delete(key); err != nil {
		return err
	}
	c := cb.Cursor()
	for k, _ := c.Seek(key); k != nil && bytes.HasPrefix(k, key); k, _ = c.Seek(key) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// Backlog returns how many records of the model wait in the log, counting no further
// than atLeast (the sealer only asks whether the backlog is that long: counting stops
// there, so the answer costs a few entries' headers), and when the oldest was received.
func (l *RecordLog) Backlog(modelID string, atLeast int) (int, time.Time, error) {
	var n int
	var oldest time.Time
	err := l.view(func(tx *bolt.Tx) error {
		lb := tx.Bucket([]byte(logPrefix + modelID))
		if lb == nil {
			return nil
		}
		c := lb.Cursor()
		for k, v := c.First(); k != nil && n < atLeast; k, v = c.Next() {
			if oldest.IsZero() {
				oldest = RecordTime(k)
			}
			m, _, err := entryHeader(v)
			if err != nil {
				return fmt.Errorf("log entry %x: %w", k, err)
			}
			n += m
		}
		return nil
	})
	return n, oldest, err
}

// ModelStats are the figures the console shows per model.
type ModelStats struct {
	Records       int       `json:"records"`
	Bytes         int64     `json:"bytes"`
	SealedRecords int       `json:"sealed_records"`
	SealedBytes   int64     `json:"sealed_bytes"`
	Blocks        int       `json:"blocks"`
	LogRecords    int       `json:"log_records"`
	LogBytes      int64     `json:"log_bytes"`
	LastIngestAt  time.Time `json:"last_ingest_at,omitzero"`
}

// Stats counts a model's records and bytes in both layers.
func (l *RecordLog) Stats(modelID string) (ModelStats, error) {
	var s ModelStats
	err := l.view(func(tx *bolt.Tx) error {
		if mb := tx.Bucket([]byte(blockMetaPrefix + modelID)); mb != nil {
			c := mb.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				meta, err := l.meta(modelID, k, v)
				if err != nil {
					return err
				}
				s.Blocks++
				s.SealedRecords += meta.Rows
				s.SealedBytes += int64(meta.Bytes)
				if at := RecordTime(meta.Last); at.After(s.LastIngestAt) {
					s.LastIngestAt = at
				}
			}
		}
		if lb := tx.Bucket([]byte(logPrefix + modelID)); lb != nil {
			// Counted from the entries' headers (an entry holds a chunk of records), sized
			// as stored.
			c := lb.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				n, _, err := entryHeader(v)
				if err != nil {
					return fmt.Errorf("log entry %x: %w", k, err)
				}
				s.LogRecords += n
				s.LogBytes += int64(len(k) + len(v))
				if at := RecordTime(k); at.After(s.LastIngestAt) {
					s.LastIngestAt = at
				}
			}
		}
		return nil
	})
	s.Records = s.SealedRecords + s.LogRecords
	s.Bytes = s.SealedBytes + s.LogBytes
	return s, err
}

// DropBefore deletes the model's blocks whose every record time is before cutoff, and the
// log records received before it, at most limit records per call (bounded transactions).
// It returns how many records it dropped.
func (l *RecordLog) DropBefore(m *store.Model, cutoff time.Time, limit int) (int, error) {
	cut := cutoff.UnixMicro()
	dropped := 0
	var forget []uint64
	err := l.update(func(tx *bolt.Tx) error {
		mb, cb := tx.Bucket([]byte(blockMetaPrefix+m.ID)), tx.Bucket([]byte(blockColsPrefix+m.ID))
		if mb != nil && cb != nil {
			c := mb.Cursor()
			var ids []uint64
			for k, v := c.First(); k != nil && dropped < limit; k, v = c.Next() {
				meta, err := l.meta(m.ID, k, v)
				if err != nil {
					return err
				}
				if meta.TMax < cut {
					ids = append(ids, meta.ID)
					dropped += meta.Rows
				}
			}
			for _, id := range ids {
				if err := deleteBlock(mb, cb, id); err != nil {
					return err
				}
			}
			forget = ids
		}
		if lb := tx.Bucket([]byte(logPrefix + m.ID)); lb != nil {
			end := blockKey(uint64(cut))
			var keys []byte
			c := lb.Cursor()
			for k, v := c.First(); k != nil && bytes.Compare(k[:8], end) < 0 && dropped < limit; k, v = c.Next() {
				n, _, err := entryHeader(v)
				if err != nil {
					return fmt.Errorf("log entry %x: %w", k, err)
				}
				keys = append(keys, k...)
				dropped += n
			}
			if err := deleteKeys(lb, keys); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, id := range forget {
		l.forgetMeta(m.ID, id)
	}
	return dropped, nil
}

// Models lists the ids of the models with a log or blocks in this file.
func (l *RecordLog) Models() ([]string, error) {
	seen := map[string]bool{}
	var out []string
	err := l.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			for _, p := range []string{logPrefix, blockMetaPrefix} {
				if id, ok := bytes.CutPrefix(name, []byte(p)); ok && !seen[string(id)] {
					seen[string(id)] = true
					out = append(out, string(id))
				}
			}
			return nil
		})
	})
	return out, err
}
