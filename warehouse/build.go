package warehouse

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"lookout/cond"
	"lookout/store"
)

// SystemFields are the fields every stored record carries besides the model's own, in
// the order blocks keep them after the model's fields.
var SystemFields = []store.Field{
	{Name: "_received_at", Type: store.TypeTimestamp, Description: "when Lookout received the record"},
	{Name: "_client_id", Type: store.TypeString, Description: "the ingest client that sent it"},
	{Name: "_ingest_id", Type: store.TypeString, Description: "the ingest request that stored it"},
}

// Schema is the column set of a model's blocks: its fields, then the system fields.
func Schema(m *store.Model) []store.Field {
	out := make([]store.Field, 0, len(m.Fields)+len(SystemFields))
	out = append(out, m.Fields...)
	return append(out, SystemFields...)
}

// builder turns stored records (compact JSON, validated at ingest) into columns. The
// sealer and the reader of the unsealed tail both use it, so a record has the same values
// in either layer.
type builder struct {
	cols  []*colBuilder
	index map[string]int
	n     int
	seen  []bool
	next  int // the column the next key probably names
	// unknown is a key of an added record that no column has (the schema is stale).
	unknown string
	// sys are the columns of _received_at, _client_id and _ingest_id (-1: none), which a
	// log entry gives once for all its records.
	sys    [3]int
	reader entryReader
}

type colBuilder struct {
	name, typ string
	nulls     []uint64
	arena     []byte   // strings, objects, arrays: the bytes of every row
	ends      []uint32 // end of row i in arena
	ints      []int64
	floats    []float64
}

// colBuilders recycles column builders: their buffers grow to a block's size once and are
// reused, instead of growing (and being copied) again for every block. A free list, not a
// sync.Pool: a pool is emptied by every other GC, which under ingest is several times per
// block, so the buffers were grown again for nearly every block (a tenth of the sealer's
// CPU in growslice). The free list keeps at most maxFreeBuilderBytes of buffers.
var colBuilders struct {
	sync.Mutex
	free  []*colBuilder
	bytes int
}

const maxFreeBuilderBytes = 64 << 20

func (c *colBuilder) size() int {
	return cap(c.arena) + 4*cap(c.ends) + 8*(cap(c.ints)+cap(c.floats)+cap(c.nulls))
}

func getColBuilder() *colBuilder {
	colBuilders.Lock()
	defer colBuilders.Unlock()
	if n := len(colBuilders.free); n > 0 {
		c := colBuilders.free[n-1]
		colBuilders.free = colBuilders.free[:n-1]
		colBuilders.bytes -= c.size()
		return c
	}
	return new(colBuilder)
}

func putColBuilder(c *colBuilder) {
	colBuilders.Lock()
	defer colBuilders.Unlock()
	if n := c.size(); colBuilders.bytes+n <= maxFreeBuilderBytes {
		colBuilders.free = append(colBuilders.free, c)
		colBuilders.bytes += n
	}
}

func newBuilder(fields []store.Field, capacity int) *builder {
	b := &builder{index: make(map[string]int, len(fields)), seen: make([]bool, len(fields)), sys: [3]int{-1, -1, -1}}
	for i, f := range fields {
		b.index[f.Name] = i
		for j, sf := range SystemFields {
			if f.Name == sf.Name && f.Type == sf.Type {
				b.sys[j] = i
			}
		}
		c := getColBuilder()
		c.name, c.typ = f.Name, f.Type
		c.nulls, c.arena, c.ends, c.ints, c.floats = c.nulls[:0], c.arena[:0], c.ends[:0], c.ints[:0], c.floats[:0]
		switch f.Type {
		case store.TypeString, store.TypeObject, store.TypeArray:
			if c.ends == nil {
				c.ends = make([]uint32, 0, capacity)
			}
		case store.TypeNumber:
			if c.floats == nil {
				c.floats = make([]float64, 0, capacity)
			}
		default:
			if c.ints == nil {
				c.ints = make([]int64, 0, capacity)
			}
		}
		b.cols = append(b.cols, c)
	}
	return b
}

// release gives the column builders back for the next block; finish copied what it kept.
func (b *builder) release() {
	for _, c := range b.cols {
		putColBuilder(c)
	}
	b.cols = nil
}

// addEntry appends the records of one log value (entry.go); key is its log key.
func (b *builder) addEntry(key, v []byte) error {
	d := &b.reader
	if err := d.decode(v); err != nil {
		return fmt.Errorf("log entry %x: %w", key, err)
	}
	us := int64(binary.BigEndian.Uint64(key[:8]))
	for {
		rec, err := d.next()
		if err != nil {
			return fmt.Errorf("log entry %x: %w", key, err)
		}
		if rec == nil {
			return nil
		}
		if d.legacy { // a record of format 3 or older: its system fields are inline
			b.add(rec, false)
			continue
		}
		b.add(rec, true)
		row := b.n - 1
		for j, id := range [3]string{"", d.clientID, d.ingestID} {
			c := b.sys[j]
			switch {
			case c < 0:
			case j == 0:
				b.cols[c].ints = append(b.cols[c].ints, us)
			case id == "":
				b.cols[c].setNull(row)
			default:
				b.cols[c].appendStr(id)
			}
		}
	}
}

// add appends one stored record. Fields the builder does not know are ignored (a record
// never has one: records are validated against the model, and models only grow). With
// sysLater, the system columns are left for the caller to fill.
func (b *builder) add(rec []byte, sysLater bool) {
	clear(b.seen)
	b.next = 0
	i := 1 // past '{'
	for i < len(rec) && rec[i] == '"' {
		key, val, next := nextField(rec, i)
		// Records mostly keep one key order: try the column after the last one first.
		c, ok := b.next, false
		if c < len(b.cols) && b.cols[c].name == key {
			ok = true
		} else {
			c, ok = b.index[key]
		}
		if ok && !b.seen[c] {
			b.seen[c] = true
			b.cols[c].set(b.n, val)
			b.next = c + 1
		} else if !ok && b.unknown == "" {
			b.unknown = strings.Clone(key)
		}
		i = next
	}
	for c, ok := range b.seen {
		if !ok && !(sysLater && (c == b.sys[0] || c == b.sys[1] || c == b.sys[2])) {
			b.cols[c].setNull(b.n)
		}
	}
	b.n++
}

// addColumns appends the rows of decoded columns (a small block being merged with newer
// records), matched by name; a column the block lacks is null.
func (b *builder) addColumns(rows int, cols []*Column) {
	byName := make(map[string]*Column, len(cols))
	for _, c := range cols {
		byName[c.Name] = c
	}
	for _, cb := range b.cols {
		src := byName[cb.name]
		for r := 0; r < rows; r++ {
			row := b.n + r
			if src == nil || src.Null(r) || src.Type != cb.typ {
				cb.setNull(row)
				continue
			}
			switch cb.typ { // by type: a recycled builder keeps the buffers of other types
			case store.TypeString, store.TypeObject, store.TypeArray:
				cb.appendStr(src.Str(r))
			case store.TypeNumber:
				cb.floats = append(cb.floats, src.Floats[r])
			default:
				cb.ints = append(cb.ints, src.Ints[r])
			}
		}
	}
	b.n += rows
}

func (c *colBuilder) setNull(row int) {
	for len(c.nulls) <= row>>6 {
		c.nulls = append(c.nulls, 0)
	}
	c.nulls[row>>6] |= 1 << (uint(row) & 63)
	switch c.typ {
	case store.TypeString, store.TypeObject, store.TypeArray:
		c.ends = append(c.ends, uint32(len(c.arena)))
	case store.TypeNumber:
		c.floats = append(c.floats, 0)
	default:
		c.ints = append(c.ints, 0)
	}
}

func (c *colBuilder) appendStr(s string) {
	c.arena = append(c.arena, s...)
	c.ends = append(c.ends, uint32(len(c.arena)))
}

// set stores one JSON value (already validated against the field's type).
func (c *colBuilder) set(row int, v []byte) {
	if len(v) == 0 || v[0] == 'n' {
		c.setNull(row)
		return
	}
	switch c.typ {
	case store.TypeString:
		if s, ok := plainString(v); ok {
			c.arena = append(c.arena, s...)
		} else {
			c.arena = append(c.arena, unescape(v)...)
		}
		c.ends = append(c.ends, uint32(len(c.arena)))
	case store.TypeObject, store.TypeArray:
		c.arena = append(c.arena, v...)
		c.ends = append(c.ends, uint32(len(c.arena)))
	case store.TypeNumber:
		f, err := strconv.ParseFloat(unsafe.String(&v[0], len(v)), 64)
		if err != nil {
			c.setNull(row)
			return
		}
		if f == 0 {
			f = 0 // -0 is 0: one group, one distinct value, whichever layer
		}
		c.floats = append(c.floats, f)
	case store.TypeBoolean:
		if v[0] == 't' {
			c.ints = append(c.ints, 1)
		} else {
			c.ints = append(c.ints, 0)
		}
	case store.TypeInteger:
		n, ok := parseInt(v)
		if !ok {
			c.setNull(row)
			return
		}
		c.ints = append(c.ints, n)
	case store.TypeTimestamp:
		us, ok := ParseTimestamp(v)
		if !ok {
			c.setNull(row)
			return
		}
		c.ints = append(c.ints, us)
	default:
		c.setNull(row)
	}
}

func parseInt(v []byte) (int64, bool) {
	s := unsafe.String(&v[0], len(v))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}

// ParseTimestamp reads a stored timestamp value, the JSON of an RFC 3339 string or of
// epoch milliseconds, as µs since the epoch (finer digits are cut; a time past year 292277
// saturates). It is the one reading of timestamps: blocks, the unsealed tail and record
// time all use it.
func ParseTimestamp(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	if v[0] == '"' {
		s, ok := plainString(v)
		if !ok {
			s = unescape(v)
		}
		return cond.ParseTime(s)
	}
	ms, ok := parseInt(v)
	if !ok {
		return 0, false
	}
	if ms > math.MaxInt64/1000 {
		return math.MaxInt64, true
	}
	if ms < math.MinInt64/1000 {
		return math.MinInt64, true
	}
	return ms * 1000, true
}

// FormatTimestamp writes µs since the epoch as RFC 3339 in UTC, as queries return
// timestamps.
func FormatTimestamp(us int64) string {
	return time.UnixMicro(us).UTC().Format(time.RFC3339Nano)
}

// unescape decodes a JSON string with escapes (rare: kept out of the loops above, so their
// variables stay on the stack).
func unescape(v []byte) string {
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

// plainString returns the contents of a JSON string without escapes.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 {
		return "", false
	}
	in := v[1 : len(v)-1]
	for _, c := range in {
		if c == '\\' {
			return "", false
		}
	}
	if len(in) == 0 {
		return "", true
	}
	return unsafe.String(&in[0], len(in)), true
}

// skipString returns the index after the JSON string starting at i, and whether it has
// escapes.
func skipString(b []byte, i int) (int, bool) {
	// Fast path: the next quote with no backslash before it (both searches vectorised).
	if q := bytes.IndexByte(b[i+1:], '"'); q >= 0 && bytes.IndexByte(b[i+1:i+1+q], '\\') < 0 {
		return i + 2 + q, false
	}
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return len(b), escaped
}

// skipValue returns the index after the compact JSON value starting at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := skipString(b, j)
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	return j
}

// finish returns the built columns. Strings with few distinct values become dictionary
// columns (sorted, so codes order like values); the rest stay plain.
func (b *builder) finish() []*Column {
	out := make([]*Column, len(b.cols))
	for i, cb := range b.cols {
		c := &Column{Name: cb.name, Type: cb.typ, N: b.n}
		if cb.nulls != nil {
			c.Nulls = make([]uint64, (b.n+63)/64)
			copy(c.Nulls, cb.nulls)
		}
		switch cb.typ {
		case store.TypeString, store.TypeObject, store.TypeArray:
			arena := slices.Clone(cb.arena)
			strs := make([]string, b.n)
			start := uint32(0)
			for r, end := range cb.ends {
				if end > start {
					strs[r] = unsafe.String(&arena[start], int(end-start))
				}
				start = end
			}
			if cb.typ == store.TypeString {
				c.Dict, c.Codes = dictionary(strs, b.n)
			}
			if c.Codes == nil {
				c.Strs = strs
			}
		case store.TypeNumber:
			c.Floats = slices.Clone(cb.floats)
		default:
			c.Ints = slices.Clone(cb.ints)
		}
		out[i] = c
	}
	return out
}

// dictionary encodes strs when they have at most a quarter as many distinct values as
// rows (and at most 65,536); nil, nil otherwise.
func dictionary(strs []string, rows int) ([]string, []uint32) {
	limit := min(rows/4+1, BlockRows)
	seen := make(map[string]uint32, min(limit, 1024))
	codes := make([]uint32, len(strs))
	var dict []string
	for i, s := range strs {
		code, ok := seen[s]
		if !ok {
			if len(dict) == limit {
				return nil, nil
			}
			code = uint32(len(dict))
			seen[s] = code
			dict = append(dict, s)
		}
		codes[i] = code
	}
	order := make([]uint32, len(dict))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int {
		switch {
		case dict[a] < dict[b]:
			return -1
		case dict[a] > dict[b]:
			return 1
		}
		return 0
	})
	remap := make([]uint32, len(dict))
	sorted := make([]string, len(dict))
	for newCode, old := range order {
		remap[old] = uint32(newCode)
		sorted[newCode] = dict[old]
	}
	for i, c := range codes {
		codes[i] = remap[c]
	}
	if len(sorted) == 0 {
		sorted = []string{""}
	}
	return sorted, codes
}

// EachField calls fn with each top-level key of a stored record (compact JSON, validated at
// ingest) and its raw value, in order, until fn returns false. key aliases rec: fn must not
// keep it.
func EachField(rec []byte, fn func(key string, raw []byte) bool) {
	i := 1 // past '{'
	for i < len(rec) && rec[i] == '"' {
		key, val, next := nextField(rec, i)
		if !fn(key, val) {
			return
		}
		i = next
	}
}

// nextField reads the field of a stored record whose key starts at i: its key (aliasing
// rec unless escaped), its raw value, and where the next key starts.
func nextField(rec []byte, i int) (key string, val []byte, next int) {
	keyEnd, escaped := skipString(rec, i)
	if escaped {
		key = unescape(rec[i:keyEnd])
	} else if keyEnd-i > 2 {
		key = unsafe.String(&rec[i+1], keyEnd-i-2)
	}
	i = keyEnd + 1 // past ':'
	end := skipValue(rec, i)
	next = end
	if next < len(rec) && rec[next] == ',' {
		next++
	}
	return key, rec[i:end], next
}

// StringValue returns the string a raw JSON string value holds, and false for any other
// value. Without escapes the string aliases raw.
func StringValue(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return unsafe.String(unsafe.SliceData(raw[1:]), len(raw)-2), true
	}
	return unescape(raw), true
}

// FieldValue reads one stored JSON value of a field as the column engine reads it, for
// an external engine's row: nil (missing, null or unreadable), string (string fields; the
// raw JSON of object and array fields), int64 (integer fields, and timestamps in µs since
// the epoch), float64 (number, -0 as 0) or bool. One reading, so a record has the same
// values in every engine.
func FieldValue(typ string, v []byte) any {
	if len(v) == 0 || v[0] == 'n' {
		return nil
	}
	switch typ {
	case store.TypeString:
		if s, ok := plainString(v); ok {
			return strings.Clone(s)
		}
		return unescape(v)
	case store.TypeObject, store.TypeArray:
		return string(v)
	case store.TypeNumber:
		f, err := strconv.ParseFloat(unsafe.String(&v[0], len(v)), 64)
		if err != nil {
			return nil
		}
		if f == 0 {
			f = 0
		}
		return f
	case store.TypeBoolean:
		return v[0] == 't'
	case store.TypeInteger:
		if n, ok := parseInt(v); ok {
			return n
		}
	case store.TypeTimestamp:
		if us, ok := ParseTimestamp(v); ok {
			return us
		}
	}
	return nil
}
