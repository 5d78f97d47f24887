package store

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

// Crockford's base32 alphabet, as used by ULID: sortable as plain bytes.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ids makes type-prefixed ULIDs (prefix + 26 chars). Within one millisecond the random part
// is incremented, so ids made by one process sort in creation order, which makes "created_at
// then id" order identical to key order in every bucket.
type ids struct {
	mu   sync.Mutex
	ms   uint64
	hi   uint16 // top 16 bits of the 80-bit random part
	lo   uint64 // low 64 bits
	init bool
}

func (g *ids) next(prefix string, now time.Time) string {
	ms := uint64(now.UnixMilli())
	g.mu.Lock()
	if !g.init || ms > g.ms {
		var b [10]byte
		_, _ = rand.Read(b[:])
		g.ms, g.hi, g.lo, g.init = ms, binary.BigEndian.Uint16(b[:2]), binary.BigEndian.Uint64(b[2:]), true
		// Leave room to increment within the millisecond without overflowing.
		g.hi &= 0x7fff
	} else {
		g.lo++
		if g.lo == 0 {
			g.hi++
		}
	}
	var u [16]byte
	binary.BigEndian.PutUint16(u[0:2], uint16(g.ms>>32))
	binary.BigEndian.PutUint32(u[2:6], uint32(g.ms))
	binary.BigEndian.PutUint16(u[6:8], g.hi)
	binary.BigEndian.PutUint64(u[8:16], g.lo)
	g.mu.Unlock()
	return prefix + encodeULID(u)
}

func encodeULID(u [16]byte) string {
	var out [26]byte
	// 128 bits into 26 base32 chars: the first char carries the top 3 bits.
	hi := binary.BigEndian.Uint64(u[0:8])
	lo := binary.BigEndian.Uint64(u[8:16])
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}
