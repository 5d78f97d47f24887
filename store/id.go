package store

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

// Crockford's base32 alphabet, as used by ULID: sortable as plain bytes.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ids makes type-prefixed ULIDs (prefix + 26 chars): 48 bits of milliseconds, then a 16-bit
// sequence, then 64 fresh random bits.
//
// The sequence keeps ids made by one process in creation order within a millisecond, so
// "created_at then id" order is key order in every bucket. It starts at a random value in
// each millisecond and is the only part that counts; the 64 random bits are drawn anew for
// every id, so knowing one id tells nothing about its neighbours (ULID's own "monotonic"
// mode increments the random part, which makes the next id guessable).
type ids struct {
	mu   sync.Mutex
	ms   uint64
	seq  uint16
	init bool
}

func (g *ids) next(prefix string, now time.Time) string {
	var r [10]byte
	_, _ = rand.Read(r[:]) // crypto/rand never fails on supported platforms
	ms := uint64(now.UnixMilli())
	g.mu.Lock()
	switch {
	case !g.init || ms > g.ms:
		// A random start below 2^15 hides how many ids a millisecond saw and leaves at
		// least 2^15 steps before the sequence runs out.
		g.ms, g.seq, g.init = ms, binary.BigEndian.Uint16(r[8:10])&0x7fff, true
	case g.seq == 0xffff:
		// The sequence ran out (or the clock went back): borrow the next millisecond
		// rather than break the order.
		g.ms++
		g.seq = binary.BigEndian.Uint16(r[8:10]) & 0x7fff
	default:
		g.seq++
	}
	var u [16]byte
	binary.BigEndian.PutUint16(u[0:2], uint16(g.ms>>32))
	binary.BigEndian.PutUint32(u[2:6], uint32(g.ms))
	binary.BigEndian.PutUint16(u[6:8], g.seq)
	copy(u[8:16], r[:8])
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
