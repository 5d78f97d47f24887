package warehouse

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/klauspost/compress/zstd"

	"lookout/store"
)

// Column blocks (design/warehouse.md §2): the sealer turns the oldest part of a model's
// record log into immutable blocks of up to BlockRows records, one value per column.
//
// A Column is one column of a block, decoded: the form the sealer builds, the query engine
// reads, and the unsealed tail of the log is turned into, so a record gives the same
// values whichever layer it is in.
//
// Encodings, by field type (a column's bytes: a kind byte, the null bitmap when there are
// nulls, then the payload, compressed with zstd when that saves a tenth):
//
//	string     dictionary: the sorted distinct values, then one code per row (1 or 2
//	           bytes): code order is value order, so min/max are the ends of the
//	           dictionary and grouping runs over codes. A column with more distinct values
//	           than a quarter of its rows (ids, URLs) is stored plain instead: the values
//	           in row order, which compresses better than a dictionary that repeats the rows.
//	integer,   frame of reference: a base and fixed-width (0, 1, 2, 4 or 8 byte)
//	timestamp  offsets, over the values or over their successive differences, whichever
//	boolean    is narrower (timestamps, in µs since the epoch, rise: their differences fit
//	           a byte or two). Booleans are 0 and 1.
//	number     the same over the values scaled by 10^k (k ≤ 6) when every value is exactly
//	           such a decimal (prices), else raw float64.
//	object,    the compact JSON of each value.
//	array
//
// A null row holds the zero value; the bitmap says it is null.

// BlockRows is the most records a block holds.
const BlockRows = 65536

// BlockBytes bounds the stored records one block (or one chunk of the unsealed log read by
// a query) is built from, so the memory of building it stays bounded however large the
// records (up to 10 MB each), and string offsets stay far from their 4 GiB limit.
const BlockBytes = 64 << 20

// Column is one decoded column of a block.
type Column struct {
	Name string
	Type string // a store field type
	N    int    // rows
	// Nulls has bit i set when row i is null; nil when no row is.
	Nulls []uint64
	// Dict and Codes hold a dictionary-encoded string column: row i is Dict[Codes[i]].
	Dict  []string
	Codes []uint32
	// Strs holds a plain string column, and the JSON of object and array columns.
	Strs []string
	// Ints holds integer, timestamp (µs since the epoch) and boolean (0, 1) columns.
	Ints []int64
	// Floats holds number columns.
	Floats []float64
}

// Null reports whether row i is null.
func (c *Column) Null(i int) bool {
	return c.Nulls != nil && c.Nulls[i>>6]&(1<<(uint(i)&63)) != 0
}

// HasNulls reports whether any row is null.
func (c *Column) HasNulls() bool { return c.Nulls != nil }

// Str returns row i of a string column (dictionary or plain) or the JSON of an object or
// array column.
func (c *Column) Str(i int) string {
	if c.Codes != nil {
		return c.Dict[c.Codes[i]]
	}
	return c.Strs[i]
}

// Stats are what a block's metadata keeps of a column, so a query can skip the block
// without reading the column: how many rows are null, and the least and greatest value
// (Min/Max for strings, IMin/IMax for integers, timestamps and booleans, FMin/FMax for
// numbers; unset when every row is null).
type Stats struct {
	Name  string  `json:"name"`
	Type  string  `json:"type"`
	Nulls int     `json:"nulls,omitempty"`
	Dict  int     `json:"dict,omitempty"` // dictionary size; 0 for a plain column
	Min   string  `json:"min,omitempty"`
	Max   string  `json:"max,omitempty"`
	IMin  int64   `json:"imin,omitempty"`
	IMax  int64   `json:"imax,omitempty"`
	FMin  float64 `json:"fmin,omitempty"`
	FMax  float64 `json:"fmax,omitempty"`
	Bytes int     `json:"bytes"` // encoded size
}

// AllNull reports whether the column has no value in the block.
func (s *Stats) AllNull(rows int) bool { return s.Nulls == rows }

const (
	kindDict    = 1
	kindPlain   = 2
	kindInt     = 3
	kindFloat   = 4
	kindRaw     = 5
	kindNullCol = 6 // every row null: no payload
	kindUUID    = 7 // plain strings that are all lowercase UUIDs: 16 bytes a row

	flagNulls      = 0x10
	flagCompressed = 0x20
)

var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
)

// stats computes a column's statistics.
func (c *Column) stats() Stats {
	s := Stats{Name: c.Name, Type: c.Type}
	first := true
	for i := 0; i < c.N; i++ {
		if c.Null(i) {
			s.Nulls++
			continue
		}
		switch {
		case c.Codes != nil:
			// sorted dictionary: the ends are known below
		case c.Type == store.TypeString:
			widen(first, c.Strs[i], &s.Min, &s.Max)
		case c.Ints != nil:
			widen(first, c.Ints[i], &s.IMin, &s.IMax)
		case c.Floats != nil:
			widen(first, c.Floats[i], &s.FMin, &s.FMax)
		}
		first = false
	}
	if c.Codes != nil && len(c.Dict) > 0 {
		s.Dict = len(c.Dict)
		s.Min, s.Max = c.Dict[0], c.Dict[len(c.Dict)-1]
	}
	return s
}

// widen stretches [lo, hi] to hold v (first: they hold nothing yet).
func widen[T cmp.Ordered](first bool, v T, lo, hi *T) {
	if first || v < *lo {
		*lo = v
	}
	if first || v > *hi {
		*hi = v
	}
}

// encode returns the column's bytes.
func (c *Column) encode() []byte {
	nullCount := 0
	for _, w := range c.Nulls {
		nullCount += bits.OnesCount64(w)
	}
	if nullCount == c.N {
		return []byte{kindNullCol}
	}
	var kind byte
	var p []byte
	switch {
	case c.Codes != nil:
		kind = kindDict
		p = binary.AppendUvarint(p, uint64(len(c.Dict)))
		for _, s := range c.Dict {
			p = binary.AppendUvarint(p, uint64(len(s)))
			p = append(p, s...)
		}
		width := byte(1)
		if len(c.Dict) > 256 {
			width = 2
		}
		p = append(p, width)
		for _, code := range c.Codes[:c.N] {
			if width == 1 {
				p = append(p, byte(code))
			} else {
				p = binary.LittleEndian.AppendUint16(p, uint16(code))
			}
		}
	case c.Type == store.TypeString && c.N > 0 && c.Strs != nil:
		if p = packUUIDs(c); p == nil {
			kind = kindPlain
			p = appendStrings(p, c.Strs[:c.N])
			break
		}
		// Random ids do not compress (zstd gets hex to about half, at a real CPU cost);
		// their 16 bytes are smaller still and cost nothing to write.
		out := []byte{kindUUID}
		if c.Nulls != nil {
			out[0] |= flagNulls
			for _, w := range c.Nulls[:(c.N+63)/64] {
				out = binary.LittleEndian.AppendUint64(out, w)
			}
		}
		return append(out, p...)
	case c.Type == store.TypeString:
		kind = kindPlain
		p = appendStrings(p, c.Strs[:c.N])
	case c.Type == store.TypeObject || c.Type == store.TypeArray:
		kind = kindRaw
		p = appendStrings(p, c.Strs[:c.N])
	case c.Ints != nil:
		kind = kindInt
		p = appendInts(p, c.Ints[:c.N])
	case c.Floats != nil:
		kind = kindFloat
		p = appendFloats(p, c.Floats[:c.N])
	}
	out := []byte{kind}
	if c.Nulls != nil {
		out[0] |= flagNulls
		for _, w := range c.Nulls[:(c.N+63)/64] {
			out = binary.LittleEndian.AppendUint64(out, w)
		}
	}
	if len(p) >= 256 {
		if z := zenc.EncodeAll(p, nil); len(z) < len(p)-len(p)/10 {
			out[0] |= flagCompressed
			out = binary.AppendUvarint(out, uint64(len(p)))
			return append(out, z...)
		}
	}
	return append(out, p...)
}

func appendStrings(p []byte, vals []string) []byte {
	total := len(p) + 2*len(vals)
	for _, s := range vals {
		total += len(s)
	}
	p = slices.Grow(p, total-len(p))
	for _, s := range vals {
		p = binary.AppendUvarint(p, uint64(len(s)))
	}
	for _, s := range vals {
		p = append(p, s...)
	}
	return p
}

// appendInts writes a frame of reference over the values or over their differences.
func appendInts(p []byte, vals []int64) []byte {
	lo, hi := minMax(vals)
	width := forWidth(lo, hi)
	delta := false
	if len(vals) > 1 {
		dlo, dhi := int64(math.MaxInt64), int64(math.MinInt64)
		ok := true
		for i := 1; i < len(vals); i++ {
			d, o := subOverflows(vals[i], vals[i-1])
			if o {
				ok = false
				break
			}
			dlo, dhi = min(dlo, d), max(dhi, d)
		}
		if ok && forWidth(dlo, dhi) < width {
			delta, lo, width = true, dlo, forWidth(dlo, dhi)
		}
	}
	if delta {
		p = append(p, 1)
		p = binary.AppendVarint(p, vals[0])
	} else {
		p = append(p, 0)
	}
	p = binary.AppendVarint(p, lo)
	p = append(p, width)
	start := 0
	if delta {
		start = 1
	}
	for i := start; i < len(vals); i++ {
		v := vals[i]
		if delta {
			v = vals[i] - vals[i-1]
		}
		u := uint64(v - lo)
		switch width {
		case 1:
			p = append(p, byte(u))
		case 2:
			p = binary.LittleEndian.AppendUint16(p, uint16(u))
		case 4:
			p = binary.LittleEndian.AppendUint32(p, uint32(u))
		case 8:
			p = binary.LittleEndian.AppendUint64(p, u)
		}
	}
	return p
}

func subOverflows(a, b int64) (int64, bool) {
	d := a - b
	return d, (a >= 0) != (b >= 0) && (d >= 0) != (a >= 0)
}

func minMax(vals []int64) (int64, int64) {
	if len(vals) == 0 {
		return 0, 0
	}
	lo, hi := vals[0], vals[0]
	for _, v := range vals[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// forWidth is the byte width of offsets from lo that reach hi.
func forWidth(lo, hi int64) byte {
	span := uint64(hi) - uint64(lo)
	switch {
	case span == 0:
		return 0
	case span <= math.MaxUint8:
		return 1
	case span <= math.MaxUint16:
		return 2
	case span <= math.MaxUint32:
		return 4
	}
	return 8
}

var pow10 = [...]float64{1, 10, 100, 1000, 10000, 100000, 1000000}

// appendFloats stores exact decimals as scaled integers, anything else raw.
func appendFloats(p []byte, vals []float64) []byte {
	for k, scale := range pow10 {
		ints := make([]int64, len(vals))
		ok := true
		for i, v := range vals {
			s := v * scale
			if s != math.Trunc(s) || math.Abs(s) >= 1<<53 || float64(int64(s))/scale != v || (v == 0 && math.Signbit(v)) {
				ok = false
				break
			}
			ints[i] = int64(s)
		}
		if ok {
			p = append(p, byte(k))
			return appendInts(p, ints)
		}
	}
	p = append(p, 0xff)
	for _, v := range vals {
		p = binary.LittleEndian.AppendUint64(p, math.Float64bits(v))
	}
	return p
}

var errCorrupt = errors.New("corrupt column")

// decodeColumn decodes a column's bytes. The strings it returns point into a buffer of its
// own, never into b (b is bbolt's memory, valid only during the transaction).
func decodeColumn(name, typ string, rows int, b []byte) (*Column, error) {
	c := &Column{Name: name, Type: typ, N: rows}
	if len(b) == 0 {
		return nil, fmt.Errorf("column %s: %w", name, errCorrupt)
	}
	kind := b[0]
	b = b[1:]
	if kind == kindNullCol && kindsOf(typ)[0] != 0xff {
		c.Nulls = make([]uint64, (rows+63)/64)
		for i := 0; i < rows; i++ {
			c.Nulls[i>>6] |= 1 << (uint(i) & 63)
		}
		c.fillZero()
		return c, nil
	}
	if kind&flagNulls != 0 {
		words := (rows + 63) / 64
		if len(b) < words*8 {
			return nil, fmt.Errorf("column %s: %w", name, errCorrupt)
		}
		c.Nulls = make([]uint64, words)
		for i := range c.Nulls {
			c.Nulls[i] = binary.LittleEndian.Uint64(b[i*8:])
		}
		b = b[words*8:]
	}
	if kind&flagCompressed != 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > 1<<31 {
			return nil, fmt.Errorf("column %s: %w", name, errCorrupt)
		}
		out, err := zdec.DecodeAll(b[k:], make([]byte, 0, min(n, 16<<20)))
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", name, err)
		}
		if uint64(len(out)) != n {
			return nil, fmt.Errorf("column %s: %w", name, errCorrupt)
		}
		b = out
	} else {
		b = slices.Clone(b)
	}
	if want := kindsOf(typ); kind&0x0f != want[0] && kind&0x0f != want[1] && kind&0x0f != want[2] {
		return nil, fmt.Errorf("column %s: encoded as kind %d, not a %s column: %w", name, kind&0x0f, typ, errCorrupt)
	}
	r := reader{b: b}
	switch kind & 0x0f {
	case kindDict:
		n := int(r.uvarint())
		if n < 0 || n > rows || r.err {
			return nil, fmt.Errorf("column %s: %w", name, errCorrupt)
		}
		c.Dict = make([]string, n)
		for i := range c.Dict {
			c.Dict[i] = r.str(int(r.uvarint()))
		}
		width := r.byte()
		c.Codes = make([]uint32, rows)
		raw := r.take(rows * int(width))
		if r.err || (width != 1 && width != 2) {
			return nil, fmt.Errorf("column %s: %w", name, errCorrupt)
		}
		if width == 1 {
			for i := range c.Codes {
				c.Codes[i] = uint32(raw[i])
			}
		} else {
			for i := range c.Codes {
				c.Codes[i] = uint32(binary.LittleEndian.Uint16(raw[2*i:]))
			}
		}
		if n == 0 {
			c.Dict = []string{""}
		}
		for _, code := range c.Codes {
			if int(code) >= len(c.Dict) {
				return nil, fmt.Errorf("column %s: %w", name, errCorrupt)
			}
		}
	case kindPlain, kindRaw:
		c.Strs = make([]string, rows)
		lens := make([]int, rows)
		for i := range lens {
			lens[i] = int(r.uvarint())
		}
		for i := range c.Strs {
			c.Strs[i] = r.str(lens[i])
		}
	case kindUUID:
		raw := r.take(16 * rows)
		if r.err {
			break
		}
		buf := make([]byte, 36*rows)
		c.Strs = make([]string, rows)
		for i := range c.Strs {
			if c.Null(i) {
				continue
			}
			dst := buf[36*i : 36*i+36]
			formatUUID(dst, raw[16*i:16*i+16])
			c.Strs[i] = unsafe.String(&dst[0], 36)
		}
	case kindInt:
		c.Ints = r.ints(rows)
	case kindFloat:
		k := r.byte()
		c.Floats = make([]float64, rows)
		if k == 0xff {
			raw := r.take(rows * 8)
			for i := range c.Floats {
				if !r.err {
					c.Floats[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
				}
			}
		} else if int(k) < len(pow10) {
			ints := r.ints(rows)
			for i, v := range ints {
				c.Floats[i] = float64(v) / pow10[k]
			}
		} else {
			r.err = true
		}
	default:
		r.err = true
	}
	if r.err {
		return nil, fmt.Errorf("column %s: %w", name, errCorrupt)
	}
	return c, nil
}

const hexDigits = "0123456789abcdef"

// hexValue maps a lowercase hex digit to its value and every other byte to 0xff.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range hexDigits {
		t[c] = byte(i)
	}
	return t
}()

// packUUIDs returns the column's values as 16 bytes each (zeros for a null) when every
// non-null value is a lowercase 8-4-4-4-12 hex UUID (so that formatting the 16 bytes gives
// back exactly the same string), and nil otherwise. One pass checks and packs.
func packUUIDs(c *Column) []byte {
	var p []byte
	for i, s := range c.Strs[:c.N] {
		if c.Null(i) {
			continue
		}
		if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return nil
		}
		if p == nil { // only once a value looks like one: most string columns fail at once
			p = make([]byte, 16*c.N)
		}
		b := p[16*i : 16*i+16]
		k, bad := 0, byte(0)
		for j := 0; j < 36; j += 2 {
			if j == 8 || j == 13 || j == 18 || j == 23 {
				j-- // the dash: the next pair starts one later
				continue
			}
			hi, lo := hexValue[s[j]], hexValue[s[j+1]]
			bad |= hi | lo
			b[k] = hi<<4 | lo&0x0f
			k++
		}
		if bad&0xf0 != 0 {
			return nil
		}
	}
	return p
}

func formatUUID(dst, b []byte) {
	k := 0
	for _, x := range b {
		if k == 8 || k == 13 || k == 18 || k == 23 {
			dst[k] = '-'
			k++
		}
		dst[k], dst[k+1] = hexDigits[x>>4], hexDigits[x&0x0f]
		k += 2
	}
}

// kindsOf returns the encodings a column of type typ may have.
func kindsOf(typ string) [3]byte {
	switch typ {
	case store.TypeString:
		return [3]byte{kindDict, kindPlain, kindUUID}
	case store.TypeObject, store.TypeArray:
		return [3]byte{kindRaw, kindRaw, kindRaw}
	case store.TypeNumber:
		return [3]byte{kindFloat, kindFloat, kindFloat}
	case store.TypeInteger, store.TypeTimestamp, store.TypeBoolean:
		return [3]byte{kindInt, kindInt, kindInt}
	}
	return [3]byte{0xff, 0xff, 0xff}
}

// fillZero gives an all-null column the zero values of its type.
func (c *Column) fillZero() {
	switch c.Type {
	case store.TypeString:
		c.Dict, c.Codes = []string{""}, make([]uint32, c.N)
	case store.TypeNumber:
		c.Floats = make([]float64, c.N)
	case store.TypeObject, store.TypeArray:
		c.Strs = make([]string, c.N)
	default:
		c.Ints = make([]int64, c.N)
	}
}

type reader struct {
	b   []byte
	err bool
}

func (r *reader) uvarint() uint64 {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *reader) varint() int64 {
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) take(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.err = true // callers check err before using what they took
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// str returns the next n bytes as a string sharing the reader's buffer (which the reader
// owns and never changes).
func (r *reader) str(n int) string {
	b := r.take(n)
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func (r *reader) ints(rows int) []int64 {
	out := make([]int64, rows)
	delta := r.byte() == 1
	var first int64
	if delta {
		first = r.varint()
	}
	lo := r.varint()
	width := int(r.byte())
	n := rows
	if delta && rows > 0 {
		n = rows - 1
	}
	if width != 0 && width != 1 && width != 2 && width != 4 && width != 8 {
		r.err = true
		return out
	}
	raw := r.take(n * width)
	if r.err {
		return out
	}
	vals := out
	if delta && rows > 0 {
		out[0] = first
		vals = out[1:]
	}
	switch width {
	case 0:
		for i := range vals {
			vals[i] = lo
		}
	case 1:
		for i := range vals {
			vals[i] = lo + int64(raw[i])
		}
	case 2:
		for i := range vals {
			vals[i] = lo + int64(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case 4:
		for i := range vals {
			vals[i] = lo + int64(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case 8:
		for i := range vals {
			vals[i] = lo + int64(binary.LittleEndian.Uint64(raw[8*i:]))
		}
	}
	if delta {
		for i := 1; i < rows; i++ {
			out[i] += out[i-1]
		}
	}
	return out
}
