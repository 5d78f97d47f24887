package warehouse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/s2"
)

// Log entries (format 4). One entry holds the records of one chunk of one ingest request:
//
//	key:   receive time (µs, big-endian uint64), then the sequence number of its first
//	       record (big-endian uint64). The bucket's sequence moves on by the entry's record
//	       count, so record i of the entry has the record key (µs, first+i): blocks, Scan
//	       and stats still speak of records, one key each.
//	value: entryV1 (one byte), the record count (uvarint), the payload's length (uvarint),
//	       the CRC-32C of what follows (4 bytes, little-endian: s2's block format has no
//	       check of its own, and check must find a damaged entry), then the payload
//	       compressed with s2:
//	         client id and ingest id (each a uvarint length and its bytes), then per record
//	         its length (uvarint) and its compact JSON, model fields only.
//
// Why: the writer is the one goroutine every ingest request waits for, and each commit
// costs two fdatasyncs plus a write of every dirty page. One Put per chunk instead of one
// per record, the system fields once per chunk instead of once per record, and s2 (about
// 3x on JSON at ~2 GB/s, run by the request's own goroutine before it queues) cut what the
// writer does per record to a small fraction, and sealing deletes one key per chunk.
//
// A value that starts with '{' is a single record written before format 4, with its
// system fields inline; both kinds are read everywhere, so nothing is rewritten.

const entryV1 = 1

// MaxEntryRecords bounds the records of one entry, so a block (at most BlockRows records)
// always holds whole entries; maxEntryBytes bounds its uncompressed payload.
const (
	MaxEntryRecords = 4096
	maxEntryBytes   = 4 << 20
)

// Entry is an encoded log entry, ready for Append.
type Entry struct {
	value []byte
	n     int
}

// Records returns how many records the entry holds.
func (e Entry) Records() int { return e.n }

// Size returns the entry's encoded size.
func (e Entry) Size() int { return len(e.value) }

var payloads = sync.Pool{New: func() any { return new([]byte) }}

// EncodeEntries encodes records (compact JSON from RecordValidator.Validate) and the system
// values they share into log entries of at most MaxEntryRecords records each, in order.
func EncodeEntries(recs [][]byte, clientID, ingestID string) []Entry {
	var out []Entry
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && n < MaxEntryRecords && (n == 0 || size+len(recs[n]) <= maxEntryBytes) {
			size += len(recs[n])
			n++
		}
		out = append(out, encodeEntry(recs[:n], clientID, ingestID))
		recs = recs[n:]
	}
	return out
}

func encodeEntry(recs [][]byte, clientID, ingestID string) Entry {
	pp := payloads.Get().(*[]byte)
	p := (*pp)[:0]
	p = binary.AppendUvarint(p, uint64(len(clientID)))
	p = append(p, clientID...)
	p = binary.AppendUvarint(p, uint64(len(ingestID)))
	p = append(p, ingestID...)
	for _, r := range recs {
		p = binary.AppendUvarint(p, uint64(len(r)))
		p = append(p, r...)
	}
	v := make([]byte, 0, 1+2*binary.MaxVarintLen64+4+s2.MaxEncodedLen(len(p)))
	v = append(v, entryV1)
	v = binary.AppendUvarint(v, uint64(len(recs)))
	v = binary.AppendUvarint(v, uint64(len(p)))
	v = append(v, 0, 0, 0, 0)
	z := s2.Encode(v[len(v):cap(v)], p)
	binary.LittleEndian.PutUint32(v[len(v)-4:], crc32.Checksum(z, castagnoli))
	v = v[:len(v)+len(z)]
	*pp = p
	payloads.Put(pp)
	return Entry{value: v, n: len(recs)}
}

var errBadEntry = errors.New("malformed log entry")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entryHeader returns how many records a log value holds and the size of its records
// uncompressed, without decompressing it.
func entryHeader(v []byte) (n, size int, err error) {
	if len(v) == 0 {
		return 0, 0, errBadEntry
	}
	if v[0] == '{' {
		return 1, len(v), nil
	}
	if v[0] != entryV1 {
		return 0, 0, fmt.Errorf("%w: unknown kind %d", errBadEntry, v[0])
	}
	c, k := binary.Uvarint(v[1:])
	if k <= 0 || c == 0 || c > MaxEntryRecords {
		return 0, 0, fmt.Errorf("%w: bad record count", errBadEntry)
	}
	s, k2 := binary.Uvarint(v[1+k:])
	if k2 <= 0 || s > 2*BlockBytes { // a sanity bound: one record is at most 10 MB
		return 0, 0, fmt.Errorf("%w: bad payload size", errBadEntry)
	}
	return int(c), int(s), nil
}

// entryReader decodes log values, reusing one buffer for the payloads.
type entryReader struct {
	buf []byte
	// What the last decoded entry holds.
	legacy             bool
	clientID, ingestID string
	rest               []byte
	left               int
}

// decode reads a log value; then next returns its records one by one.
func (d *entryReader) decode(v []byte) error {
	n, size, err := entryHeader(v)
	if err != nil {
		return err
	}
	if v[0] == '{' {
		d.legacy, d.rest, d.left = true, v, 1
		d.clientID, d.ingestID = "", ""
		return nil
	}
	_, k := binary.Uvarint(v[1:])
	_, k2 := binary.Uvarint(v[1+k:])
	z := v[1+k+k2:]
	if len(z) < 4 || binary.LittleEndian.Uint32(z) != crc32.Checksum(z[4:], castagnoli) {
		return fmt.Errorf("%w: checksum mismatch", errBadEntry)
	}
	z = z[4:]
	if dl, err := s2.DecodedLen(z); err != nil || dl != size {
		return fmt.Errorf("%w: payload size", errBadEntry)
	}
	if cap(d.buf) < size {
		d.buf = make([]byte, size)
	}
	p, err := s2.Decode(d.buf[:cap(d.buf)], z)
	if err != nil {
		return fmt.Errorf("%w: %v", errBadEntry, err)
	}
	d.legacy, d.left = false, n
	var ids [2]string
	for i := range ids {
		l, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < l {
			return fmt.Errorf("%w: bad ids", errBadEntry)
		}
		ids[i] = string(p[k : k+int(l)])
		p = p[k+int(l):]
	}
	d.clientID, d.ingestID, d.rest = ids[0], ids[1], p
	return nil
}

// next returns the next record of the decoded entry, or nil at its end.
func (d *entryReader) next() ([]byte, error) {
	if d.left == 0 {
		if len(d.rest) > 0 && !d.legacy {
			return nil, fmt.Errorf("%w: data after the last record", errBadEntry)
		}
		return nil, nil
	}
	d.left--
	if d.legacy {
		r := d.rest
		d.rest = nil
		return r, nil
	}
	l, k := binary.Uvarint(d.rest)
	if k <= 0 || l == 0 || uint64(len(d.rest)-k) < l {
		return nil, fmt.Errorf("%w: bad record length", errBadEntry)
	}
	r := d.rest[k : k+int(l)]
	d.rest = d.rest[k+int(l):]
	return r, nil
}

// lastRecordKey returns the record key of an entry's last record.
func lastRecordKey(key []byte, n int) []byte {
	out := make([]byte, RecordKeySize)
	putKey(out, binary.BigEndian.Uint64(key[:8]), binary.BigEndian.Uint64(key[8:])+uint64(n-1))
	return out
}
