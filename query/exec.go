package query

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"strings"
	"time"

	"lookout/cond"
	"lookout/store"
	"lookout/warehouse"
)

// Caps bound what one query may hold in memory (CONTRACTS §7: a 400 naming the cap,
// never an out-of-memory).
type Caps struct {
	// Groups is the most groups a query may make.
	Groups int
	// Distinct is the most values count_distinct may remember, over all groups.
	Distinct int
}

// DefaultCaps are the caps serve uses.
var DefaultCaps = Caps{Groups: 100_000, Distinct: 1_000_000}

// MaxResultBytes caps the rows a select holds (strings and JSON counted by length).
const MaxResultBytes = 64 << 20

// rowBytes approximates the memory of a picked row.
func rowBytes(vals []any) int64 {
	n := int64(16 * len(vals))
	for _, v := range vals {
		switch x := v.(type) {
		case string:
			n += int64(len(x))
		case json.RawMessage:
			n += int64(len(x))
		}
	}
	return n
}

// DefaultLimit is the limit of a query that gives none.
const DefaultLimit = 1000

// Request is one query to run: a model, a validated query with its parameters bound, and
// the client's required filters.
type Request struct {
	Model    *store.Model
	Query    *store.QuerySpec
	Required []store.Filter
	Now      time.Time
	Caps     Caps
}

// Column names and types one output column.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Stats says what a query read.
type Stats struct {
	Scanned       int     `json:"scanned"`
	Returned      int     `json:"returned"`
	ElapsedMS     float64 `json:"elapsed_ms"`
	BlocksScanned int     `json:"blocks_scanned"`
	BlocksSkipped int     `json:"blocks_skipped"`
}

// Result is a query's answer (CONTRACTS §5).
type Result struct {
	Columns []Column `json:"columns"`
	Rows    [][]any  `json:"rows"`
	Stats   Stats    `json:"stats"`
}

// ErrDeadline is returned when a query outlives its context's deadline.
var ErrDeadline = store.Errorf(store.CodeUnavailable, "the query ran past its deadline (--query-timeout): narrow its time_range or filters")

// filter is one compiled condition on one field.
type filter struct {
	field, typ string
	c          *cond.Condition
	never      bool // the field is not in the model, or the value cannot be of its type
}

// agg is one compiled aggregation.
type agg struct {
	fn, field, typ, name string
}

// plan is a query ready to run.
type plan struct {
	m        *store.Model
	types    map[string]string
	filters  []filter
	from, to int64 // record time bounds, µs; to exclusive
	hasFrom  bool
	hasTo    bool
	group    []string
	aggs     []agg
	selects  []string
	order    []store.OrderBy
	limit    int
	columns  []Column
	caps     Caps
	grouping bool
}

// fieldTypes maps every queryable field (the model's and the system fields) to its type.
func fieldTypes(m *store.Model) map[string]string {
	out := make(map[string]string, len(m.Fields)+3)
	for _, f := range warehouse.Schema(m) {
		out[f.Name] = f.Type
	}
	return out
}

// compile builds the plan. The query has been validated against the model; required
// filters are compiled here, and one that cannot apply to the model matches nothing
// (never widens the query).
func compile(req *Request) (*plan, error) {
	q := req.Query
	p := &plan{m: req.Model, types: fieldTypes(req.Model), group: q.GroupBy, selects: q.Select, order: q.OrderBy, limit: q.Limit, caps: req.Caps}
	if p.caps.Groups <= 0 {
		p.caps.Groups = DefaultCaps.Groups
	}
	if p.caps.Distinct <= 0 { // each cap on its own: Caps{Groups: 10} must not mean "no distinct values"
		p.caps.Distinct = DefaultCaps.Distinct
	}
	if p.limit == 0 {
		p.limit = DefaultLimit
	}
	all := make([]store.Filter, 0, len(req.Required)+len(q.Filters))
	all = append(all, req.Required...)
	all = append(all, q.Filters...)
	for i, f := range all {
		typ, ok := p.types[f.Field]
		if !ok {
			if i < len(req.Required) {
				p.filters = append(p.filters, filter{field: f.Field, never: true})
				continue
			}
			return nil, store.Invalid(store.FieldError{Field: fmt.Sprintf("query.filters[%d].field", i-len(req.Required)), Message: fmt.Sprintf("%q is not a field of model %s", f.Field, req.Model.Key)})
		}
		c, err := cond.Compile(typ, f.Op, f.Value)
		if err != nil {
			if i < len(req.Required) {
				p.filters = append(p.filters, filter{field: f.Field, typ: typ, never: true})
				continue
			}
			return nil, store.Invalid(store.FieldError{Field: fmt.Sprintf("query.filters[%d]", i-len(req.Required)), Message: err.Error()})
		}
		p.filters = append(p.filters, filter{field: f.Field, typ: typ, c: c})
	}
	if tr := q.TimeRange; tr != nil {
		var err error
		if p.from, p.hasFrom, err = bound(tr.From, req.Now); err != nil {
			return nil, store.Invalid(store.FieldError{Field: "query.time_range.from", Message: err.Error()})
		}
		if p.to, p.hasTo, err = bound(tr.To, req.Now); err != nil {
			return nil, store.Invalid(store.FieldError{Field: "query.time_range.to", Message: err.Error()})
		}
	}
	p.grouping = len(q.GroupBy) > 0 || len(q.Aggregations) > 0
	if p.grouping {
		for _, g := range q.GroupBy {
			p.columns = append(p.columns, Column{Name: g, Type: p.types[g]})
		}
		for _, a := range q.Aggregations {
			name := a.As
			if name == "" {
				name = a.Fn
				if a.Field != "" {
					name += "_" + a.Field
				}
			}
			typ := p.types[a.Field]
			p.aggs = append(p.aggs, agg{fn: a.Fn, field: a.Field, typ: typ, name: name})
			switch a.Fn {
			case "count", "count_distinct":
				typ = store.TypeInteger
			case "sum", "avg":
				typ = store.TypeNumber
			}
			p.columns = append(p.columns, Column{Name: name, Type: typ})
		}
	} else {
		if len(p.selects) == 0 {
			for _, f := range req.Model.Fields {
				p.selects = append(p.selects, f.Name)
			}
		}
		for _, s := range p.selects {
			p.columns = append(p.columns, Column{Name: s, Type: p.types[s]})
		}
	}
	return p, nil
}

// bound reads one end of a time range in µs since the epoch; ok is false for an open end.
func bound(s string, now time.Time) (int64, bool, error) {
	t, err := ParseTimeBound(s, now)
	if err != nil || t.IsZero() {
		return 0, false, err
	}
	return t.UnixMicro(), true, nil
}

// ParseTimeBound reads one end of a time range: an RFC 3339 time, or a negative duration
// from now such as -24h; "" is an open end (the zero time). Queries' time_range and
// exports read their bounds with it.
func ParseTimeBound(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if strings.HasPrefix(s, "-") {
		if d, err := time.ParseDuration(s); err == nil {
			return now.Add(d), nil
		}
	} else if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, errors.New("must be an RFC 3339 time or a duration before now such as -24h")
}

// Run runs a query over a model's data in an embedded warehouse file (nil: the model has
// no data yet). Returns validation_failed (a cap), unavailable (the deadline), or the
// context's error when the caller went away.
func Run(ctx context.Context, data *warehouse.RecordLog, req *Request) (*Result, error) {
	start := time.Now()
	p, err := compile(req)
	if err != nil {
		return nil, err
	}
	ex := newExec(p)
	if data != nil {
		err = data.ReadParts(ctx, req.Model, ex.part)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, ErrDeadline
		}
		return nil, err
	}
	res := &Result{Columns: p.columns, Rows: ex.rows()}
	if res.Columns == nil {
		res.Columns = []Column{}
	}
	res.Stats = ex.stats
	res.Stats.Returned = len(res.Rows)
	res.Stats.ElapsedMS = float64(time.Since(start).Microseconds()) / 1000
	return res, nil
}

// exec holds a running query's state.
type exec struct {
	p     *plan
	stats Stats
	// grouping
	groups   map[string]*group
	distinct int
	// selecting
	picked      []pickedRow
	seq         int
	done        bool
	pickedBytes int64
	stateBytes  int64    // group keys and distinct strings held
	sel         []int32  // selection scratch, reused part after part
	local       []uint32 // local group ids scratch, likewise
}

type group struct {
	key  []any // group values
	aggs []aggState
}

type aggState struct {
	n    int64 // values seen (rows for count())
	sumF float64
	sumI i128 // integer sums are exact: the answer does not depend on the order
	minI int64
	maxI int64
	minF float64
	maxF float64
	minS string
	maxS string
	set  map[any]struct{}
}

type pickedRow struct {
	vals []any
	seq  int
}

// scratch returns the part's selection buffer, empty, with room for n rows. One buffer
// serves every part in turn: a selection never outlives its part.
func (e *exec) scratch(n int) []int32 {
	if cap(e.sel) < n {
		e.sel = make([]int32, 0, n)
	}
	return e.sel[:0]
}

func newExec(p *plan) *exec {
	return &exec{p: p, groups: map[string]*group{}}
}

// part processes one block or log chunk.
func (e *exec) part(pt *warehouse.Part) error {
	if e.done {
		return nil
	}
	meta := pt.Meta
	p := e.p
	if meta.Rows == 0 {
		return nil
	}
	if (p.hasFrom && meta.TMax < p.from) || (p.hasTo && meta.TMin >= p.to) || e.skipByStats(meta) {
		e.stats.BlocksSkipped++
		return nil
	}
	e.stats.BlocksScanned++
	e.stats.Scanned += meta.Rows
	partialTime := (p.hasFrom && meta.TMin < p.from) || (p.hasTo && meta.TMax >= p.to)
	// count(*) over a whole part: its metadata has the answer.
	if p.grouping && !partialTime && len(p.filters) == 0 && len(p.group) == 0 && onlyCountRows(p.aggs) {
		g, err := e.groupFor(nil)
		if err != nil {
			return err
		}
		for i := range g.aggs {
			g.aggs[i].n += int64(meta.Rows)
		}
		return nil
	}
	cols := map[string]*warehouse.Column{}
	load := func(name string) (*warehouse.Column, error) {
		if c, ok := cols[name]; ok {
			return c, nil
		}
		c, err := pt.Column(name, p.types[name])
		if err != nil {
			return nil, err
		}
		cols[name] = c
		return c, nil
	}
	var sel []int32 // nil: every row
	if partialTime {
		times, err := pt.RecordTimes()
		if err != nil {
			return err
		}
		sel = e.scratch(meta.Rows)
		for i, t := range times {
			if (!p.hasFrom || t >= p.from) && (!p.hasTo || t < p.to) {
				sel = append(sel, int32(i))
			}
		}
	}
	for _, f := range p.filters {
		if f.never {
			return nil
		}
		c, err := load(f.field)
		if err != nil {
			return err
		}
		sel = applyFilter(f, c, sel, e)
		if len(sel) == 0 {
			return nil
		}
	}
	if p.grouping && len(p.group) == 0 && onlyCountRows(p.aggs) {
		n := meta.Rows
		if sel != nil {
			n = len(sel)
		}
		g, err := e.groupFor(nil)
		if err != nil {
			return err
		}
		for i := range g.aggs {
			g.aggs[i].n += int64(n)
		}
		return nil
	}
	if p.grouping {
		return e.aggregate(meta.Rows, sel, load)
	}
	return e.pick(meta.Rows, sel, load)
}

func onlyCountRows(aggs []agg) bool {
	for _, a := range aggs {
		if a.fn != "count" || a.field != "" {
			return false
		}
	}
	return true
}

// skipByStats reports whether a block's statistics show no row can pass the filters.
func (e *exec) skipByStats(meta *warehouse.BlockMeta) bool {
	for _, f := range e.p.filters {
		if f.never {
			return true
		}
		st := meta.Col(f.field)
		op := f.c.Op()
		if st == nil || st.AllNull(meta.Rows) {
			if op != "not_exists" {
				return true
			}
			continue
		}
		if op == "not_exists" && st.Nulls == 0 {
			return true
		}
		if !meta.Sealed {
			continue
		}
		switch f.typ {
		case store.TypeString:
			if want := f.c.Strings(); want != nil && !anyWithin(want, st.Min, st.Max) {
				return true
			}
		case store.TypeInteger, store.TypeTimestamp:
			if r, ok := f.c.Bounds(); ok && !r.Overlaps(float64(st.IMin), float64(st.IMax)) {
				return true
			}
		case store.TypeNumber:
			if r, ok := f.c.Bounds(); ok && !r.Overlaps(st.FMin, st.FMax) {
				return true
			}
		}
	}
	return false
}

// anyWithin reports whether any of the wanted strings lies in [lo, hi].
func anyWithin(want []string, lo, hi string) bool {
	for _, w := range want {
		if w >= lo && w <= hi {
			return true
		}
	}
	return false
}

// applyFilter narrows sel (nil: every row of c) to the rows where f holds.
func applyFilter(f filter, c *warehouse.Column, sel []int32, e *exec) []int32 {
	var out []int32
	if sel == nil {
		out = e.scratch(c.N)
	} else {
		out = sel[:0]
	}
	var test func(i int) bool
	cc := f.c
	switch {
	case c.Codes != nil:
		table := make([]bool, len(c.Dict))
		any := false
		for i, s := range c.Dict {
			table[i] = cc.MatchString(s)
			any = any || table[i]
		}
		nullOK := cc.MatchNull()
		if !any && !nullOK {
			return out[:0]
		}
		if c.Nulls == nil {
			if sel == nil {
				for i, code := range c.Codes[:c.N] {
					if table[code] {
						out = append(out, int32(i))
					}
				}
				return out
			}
			for _, i := range sel {
				if table[c.Codes[i]] {
					out = append(out, i)
				}
			}
			return out
		}
		test = func(i int) bool {
			if c.Null(i) {
				return nullOK
			}
			return table[c.Codes[i]]
		}
	case f.typ == store.TypeString:
		test = func(i int) bool {
			if c.Null(i) {
				return cc.MatchNull()
			}
			return cc.MatchString(c.Strs[i])
		}
	case f.typ == store.TypeObject || f.typ == store.TypeArray:
		test = func(i int) bool {
			if c.Null(i) {
				return cc.MatchNull()
			}
			return cc.MatchPresent()
		}
	case f.typ == store.TypeNumber:
		test = func(i int) bool {
			if c.Null(i) {
				return cc.MatchNull()
			}
			return cc.MatchFloat(c.Floats[i])
		}
	case f.typ == store.TypeBoolean:
		test = func(i int) bool {
			if c.Null(i) {
				return cc.MatchNull()
			}
			return cc.MatchBool(c.Ints[i] != 0)
		}
	case f.typ == store.TypeTimestamp:
		test = func(i int) bool {
			if c.Null(i) {
				return cc.MatchNull()
			}
			return cc.MatchTime(c.Ints[i])
		}
	default:
		test = func(i int) bool {
			if c.Null(i) {
				return cc.MatchNull()
			}
			return cc.MatchInt(c.Ints[i])
		}
	}
	if sel == nil {
		for i := 0; i < c.N; i++ {
			if test(i) {
				out = append(out, int32(i))
			}
		}
		return out
	}
	for _, i := range sel {
		if test(int(i)) {
			out = append(out, i)
		}
	}
	return out
}

// value returns row i of c as the query answers it (nil for null).
func value(c *warehouse.Column, i int) any {
	if c.Null(i) {
		return nil
	}
	switch c.Type {
	case store.TypeString:
		return c.Str(i)
	case store.TypeObject, store.TypeArray:
		return json.RawMessage(c.Strs[i])
	case store.TypeNumber:
		return c.Floats[i]
	case store.TypeBoolean:
		return c.Ints[i] != 0
	case store.TypeTimestamp:
		return Timestamp(c.Ints[i])
	}
	return c.Ints[i]
}

// Timestamp is a timestamp value in a result: µs since the epoch, ordered as a number,
// written as RFC 3339 in UTC.
type Timestamp int64

// MarshalJSON writes the timestamp as an RFC 3339 string.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return json.Marshal(warehouse.FormatTimestamp(int64(t)))
}

// groupFor returns the group of a tuple of values, making it when new.
func (e *exec) groupFor(key []any) (*group, error) {
	k := groupKey(key)
	if g, ok := e.groups[k]; ok {
		return g, nil
	}
	if len(e.groups) >= e.p.caps.Groups {
		return nil, store.Invalid(store.FieldError{Field: "query.group_by", Message: fmt.Sprintf(
			"the query makes more than %d groups (the group cap): group by fewer or coarser fields, or narrow it with filters or a shorter time_range", e.p.caps.Groups)})
	}
	if err := e.hold(2 * int64(len(k))); err != nil {
		return nil, err
	}
	g := &group{key: make([]any, len(key)), aggs: make([]aggState, len(e.p.aggs))}
	for i, v := range key {
		if s, ok := v.(string); ok {
			v = strings.Clone(s) // column strings live only as long as their part
		}
		g.key[i] = v
	}
	e.groups[k] = g
	return g, nil
}

// MaxStateBytes caps the memory a query's groups and count_distinct values may hold, beside
// their counts: long strings would otherwise make the count caps meaningless.
const MaxStateBytes = 256 << 20

// hold accounts n more bytes of group and distinct state.
func (e *exec) hold(n int64) error {
	e.stateBytes += n
	if e.stateBytes > MaxStateBytes {
		return store.Invalid(store.FieldError{Field: "query.group_by", Message: fmt.Sprintf(
			"the query's groups and distinct values would hold more than %d MiB (the memory cap): group by shorter or fewer fields, or narrow it with filters or a shorter time_range", MaxStateBytes>>20)})
	}
	return nil
}

// groupKey encodes a tuple of values unambiguously (types tagged, strings length-prefixed).
func groupKey(key []any) string {
	var b []byte
	for _, v := range key {
		switch x := v.(type) {
		case nil:
			b = append(b, 'n')
		case string:
			b = fmt.Appendf(b, "s%d:%s", len(x), x)
		case int64:
			b = fmt.Appendf(b, "i%d;", x)
		case Timestamp:
			b = fmt.Appendf(b, "t%d;", x)
		case float64:
			b = fmt.Appendf(b, "f%x;", math.Float64bits(x))
		case bool:
			if x {
				b = append(b, 'T')
			} else {
				b = append(b, 'F')
			}
		default:
			b = fmt.Appendf(b, "o%v;", x)
		}
	}
	return string(b)
}

// aggregate folds the selected rows of a part into the groups. Rows are visited in
// record order, so sums come out the same whichever layer a record is in.
func (e *exec) aggregate(rows int, sel []int32, load func(string) (*warehouse.Column, error)) error {
	p := e.p
	gcols := make([]*warehouse.Column, len(p.group))
	for i, name := range p.group {
		c, err := load(name)
		if err != nil {
			return err
		}
		gcols[i] = c
	}
	acols := make([]*warehouse.Column, len(p.aggs))
	for i, a := range p.aggs {
		if a.field == "" {
			continue
		}
		c, err := load(a.field)
		if err != nil {
			return err
		}
		acols[i] = c
	}
	// Local group ids: per group column, a small id per distinct value in this part
	// (dictionary code + 1 where there is a dictionary, 0 for null), combined in mixed
	// radix into one number per row.
	n := rows
	if sel != nil {
		n = len(sel)
	}
	row := func(k int) int {
		if sel == nil {
			return k
		}
		return int(sel[k])
	}
	radix := uint64(1)
	for _, c := range gcols {
		card := cardinality(c)
		if radix > (math.MaxUint32/card)/2 {
			return e.aggregateByValue(n, row, gcols, acols) // too many combinations for arrays
		}
		radix *= card
	}
	var local []uint32
	if len(gcols) == 1 && gcols[0].Codes != nil && !gcols[0].HasNulls() && sel == nil {
		local = gcols[0].Codes[:n] // the codes are the local ids (shifted by one: no null)
	} else {
		if cap(e.local) < n {
			e.local = make([]uint32, n)
		}
		local = e.local[:n]
		clear(local)
		mult := uint32(1)
		for _, c := range gcols {
			addLocalIDs(local, mult, c, sel)
			mult *= uint32(cardinality(c))
		}
	}
	key := make([]any, len(gcols))
	resolve := func(k int) (*group, error) {
		r := row(k)
		for i, c := range gcols {
			key[i] = value(c, r)
		}
		return e.groupFor(key)
	}
	if radix <= denseGroups {
		// Few combinations: plain arrays indexed by the local id, no hashing per row.
		counts := make([]int64, radix)
		first := make([]int32, radix)
		for k, lk := range local {
			if counts[lk] == 0 {
				first[lk] = int32(k)
			}
			counts[lk]++
		}
		dense := make([]*group, radix)
		for lk, cnt := range counts {
			if cnt == 0 {
				continue
			}
			g, err := resolve(int(first[lk]))
			if err != nil {
				return err
			}
			dense[lk] = g
			for ai, a := range p.aggs {
				if a.fn == "count" && a.field == "" {
					g.aggs[ai].n += cnt
				}
			}
		}
		// Integer sums and averages: exact in any order, so summed per local id in arrays.
		folded := make([]bool, len(p.aggs))
		for ai, a := range p.aggs {
			c := acols[ai]
			if (a.fn != "sum" && a.fn != "avg") || c == nil || c.Ints == nil || c.Type != store.TypeInteger {
				continue
			}
			sums := make([]i128, radix)
			cnts := make([]int64, radix)
			nulls := c.HasNulls()
			for k, lk := range local {
				r := k
				if sel != nil {
					r = int(sel[k])
				}
				if nulls && c.Null(r) {
					continue
				}
				sums[lk].add(c.Ints[r])
				cnts[lk]++
			}
			folded[ai] = true
			for lk, g := range dense {
				if g == nil || cnts[lk] == 0 {
					continue
				}
				st := &g.aggs[ai]
				st.n += cnts[lk]
				st.sumI.addI(sums[lk])
			}
		}
		rest := false
		for ai, a := range p.aggs {
			if !folded[ai] && !(a.fn == "count" && a.field == "") {
				rest = true
			}
		}
		if !rest {
			return nil
		}
		rowGroup := make([]*group, n)
		for k, lk := range local {
			rowGroup[k] = dense[lk]
		}
		return e.fold(n, row, rowGroup, acols, true, folded)
	}
	byLocal := map[uint32]*group{}
	rowGroup := make([]*group, n)
	for k, lk := range local {
		g := byLocal[lk]
		if g == nil {
			var err error
			if g, err = resolve(k); err != nil {
				return err
			}
			byLocal[lk] = g
		}
		rowGroup[k] = g
	}
	return e.fold(n, row, rowGroup, acols, false, nil)
}

// denseGroups is the most local group combinations aggregated through arrays.
const denseGroups = 1 << 16

func (e *exec) aggregateByValue(n int, row func(int) int, gcols, acols []*warehouse.Column) error {
	rowGroup := make([]*group, n)
	key := make([]any, len(gcols))
	for k := 0; k < n; k++ {
		r := row(k)
		for i, c := range gcols {
			key[i] = value(c, r)
		}
		g, err := e.groupFor(key)
		if err != nil {
			return err
		}
		rowGroup[k] = g
	}
	return e.fold(n, row, rowGroup, acols, false, nil)
}

// cardinality bounds the local ids of a column in a part: one more than the largest.
func cardinality(c *warehouse.Column) uint64 {
	switch {
	case c.Codes != nil:
		return uint64(len(c.Dict)) + 1
	case c.Type == store.TypeBoolean:
		return 3
	}
	return uint64(c.N) + 1 // at most one id per row
}

// addLocalIDs adds mult times each selected row's local id of c to local: 0 for null,
// dictionary code + 1, boolean + 1, or an id per distinct value in order of appearance.
func addLocalIDs(local []uint32, mult uint32, c *warehouse.Column, sel []int32) {
	nulls := c.HasNulls()
	switch {
	case c.Codes != nil && !nulls && sel == nil:
		for k, code := range c.Codes[:c.N] {
			local[k] += (code + 1) * mult
		}
		return
	case c.Codes != nil && !nulls:
		for k, r := range sel {
			local[k] += (c.Codes[r] + 1) * mult
		}
		return
	}
	var ints map[int64]uint32
	var strs map[string]uint32
	for k := range local {
		r := k
		if sel != nil {
			r = int(sel[k])
		}
		if nulls && c.Null(r) {
			continue
		}
		var id uint32
		switch {
		case c.Codes != nil:
			id = c.Codes[r] + 1
		case c.Type == store.TypeBoolean:
			id = uint32(c.Ints[r]) + 1
		case c.Ints != nil || c.Floats != nil:
			if ints == nil {
				ints = map[int64]uint32{}
			}
			v := int64(0)
			if c.Ints != nil {
				v = c.Ints[r]
			} else {
				v = int64(math.Float64bits(c.Floats[r]))
			}
			var ok bool
			if id, ok = ints[v]; !ok {
				id = uint32(len(ints)) + 1
				ints[v] = id
			}
		default:
			if strs == nil {
				strs = map[string]uint32{}
			}
			var ok bool
			if id, ok = strs[c.Strs[r]]; !ok {
				id = uint32(len(strs)) + 1
				strs[c.Strs[r]] = id
			}
		}
		local[k] += id * mult
	}
}

// fold applies the aggregations row by row.
func (e *exec) fold(n int, row func(int) int, rowGroup []*group, acols []*warehouse.Column, rowsCounted bool, folded []bool) error {
	for ai, a := range e.p.aggs {
		if folded != nil && folded[ai] {
			continue
		}
		c := acols[ai]
		if c == nil { // count()
			if !rowsCounted {
				for k := 0; k < n; k++ {
					rowGroup[k].aggs[ai].n++
				}
			}
			continue
		}
		if a.fn == "sum" || a.fn == "avg" {
			// The common case, kept tight: no per-row switch.
			nulls := c.HasNulls()
			for k := 0; k < n; k++ {
				r := row(k)
				if nulls && c.Null(r) {
					continue
				}
				st := &rowGroup[k].aggs[ai]
				st.n++
				if c.Floats != nil {
					st.sumF += c.Floats[r]
					continue
				}
				st.sumI.add(c.Ints[r])
			}
			continue
		}
		for k := 0; k < n; k++ {
			r := row(k)
			if c.Null(r) {
				continue
			}
			st := &rowGroup[k].aggs[ai]
			first := st.n == 0
			st.n++
			switch a.fn {
			case "count":
			case "sum", "avg":
				if c.Floats != nil {
					st.sumF += c.Floats[r]
				} else {
					st.sumI.add(c.Ints[r])
				}
			case "min", "max":
				switch {
				case c.Floats != nil:
					widen(first, c.Floats[r], &st.minF, &st.maxF)
				case c.Ints != nil:
					widen(first, c.Ints[r], &st.minI, &st.maxI)
				default:
					v := c.Str(r)
					if first || v < st.minS {
						st.minS = strings.Clone(v) // column strings live only as long as the part
					}
					if first || v > st.maxS {
						st.maxS = strings.Clone(v)
					}
				}
			case "count_distinct":
				if st.set == nil {
					st.set = map[any]struct{}{}
				}
				var v any
				switch {
				case c.Floats != nil:
					v = c.Floats[r]
				case c.Ints != nil:
					v = c.Ints[r]
				default:
					v = c.Str(r)
				}
				if _, ok := st.set[v]; !ok {
					if e.distinct >= e.p.caps.Distinct {
						return store.Invalid(store.FieldError{Field: "query.aggregations", Message: fmt.Sprintf(
							"count_distinct would remember more than %d values (the distinct cap): narrow the query with filters or a shorter time_range, or group by fewer values", e.p.caps.Distinct)})
					}
					if s, ok := v.(string); ok {
						if err := e.hold(int64(len(s)) + 32); err != nil {
							return err
						}
						v = strings.Clone(s)
					}
					st.set[v] = struct{}{}
					e.distinct++
				}
			}
		}
	}
	return nil
}

// pick collects selected rows (no grouping).
func (e *exec) pick(rows int, sel []int32, load func(string) (*warehouse.Column, error)) error {
	p := e.p
	cols := make([]*warehouse.Column, len(p.selects))
	for i, name := range p.selects {
		c, err := load(name)
		if err != nil {
			return err
		}
		cols[i] = c
	}
	n := rows
	if sel != nil {
		n = len(sel)
	}
	for k := 0; k < n; k++ {
		r := k
		if sel != nil {
			r = int(sel[k])
		}
		vals := make([]any, len(cols))
		for i, c := range cols {
			v := value(c, r)
			if s, ok := v.(string); ok {
				v = strings.Clone(s)
			} else if raw, ok := v.(json.RawMessage); ok {
				v = json.RawMessage(slices.Clone(raw))
			}
			vals[i] = v
		}
		e.pickedBytes += rowBytes(vals)
		if e.pickedBytes > MaxResultBytes {
			return store.Invalid(store.FieldError{Field: "query.select", Message: fmt.Sprintf(
				"the rows would hold more than %d MiB (the result cap): select fewer or smaller fields, or lower the limit", MaxResultBytes>>20)})
		}
		e.picked = append(e.picked, pickedRow{vals: vals, seq: e.seq})
		e.seq++
		if len(p.order) == 0 && len(e.picked) >= p.limit {
			e.done = true
			return nil
		}
		if len(p.order) > 0 && len(e.picked) >= 2*p.limit+1024 {
			e.sortPicked()
			for _, dropped := range e.picked[p.limit:] {
				e.pickedBytes -= rowBytes(dropped.vals)
			}
			e.picked = e.picked[:p.limit]
		}
	}
	return nil
}

func (e *exec) sortPicked() {
	idx := map[string]int{}
	for i, c := range e.p.columns {
		idx[c.Name] = i
	}
	slices.SortStableFunc(e.picked, func(a, b pickedRow) int {
		for _, o := range e.p.order {
			i := idx[o.Field]
			c := compareValues(a.vals[i], b.vals[i])
			if o.Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return a.seq - b.seq
	})
}

// rows returns the answer's rows, ordered and limited.
func (e *exec) rows() [][]any {
	p := e.p
	if !p.grouping {
		if len(p.order) > 0 {
			e.sortPicked()
		}
		out := make([][]any, 0, min(len(e.picked), p.limit))
		for _, r := range e.picked {
			if len(out) == p.limit {
				break
			}
			out = append(out, r.vals)
		}
		return out
	}
	if len(p.group) == 0 && len(e.groups) == 0 {
		g, _ := e.groupFor(nil) // exactly one row, also over no records
		_ = g
	}
	out := make([][]any, 0, len(e.groups))
	for _, g := range e.groups {
		r := make([]any, 0, len(p.columns))
		r = append(r, g.key...)
		for i, a := range p.aggs {
			r = append(r, finalValue(a, &g.aggs[i]))
		}
		out = append(out, r)
	}
	ng := len(p.group)
	byGroup := func(a, b []any) int {
		for i := 0; i < ng; i++ {
			if c := compareValues(a[i], b[i]); c != 0 {
				return c
			}
		}
		return 0
	}
	idx := map[string]int{}
	for i, c := range p.columns {
		idx[c.Name] = i
	}
	slices.SortFunc(out, func(a, b []any) int {
		for _, o := range p.order {
			i := idx[o.Field]
			c := compareValues(a[i], b[i])
			if o.Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return byGroup(a, b)
	})
	if len(out) > p.limit {
		out = out[:p.limit]
	}
	return out
}

// finalValue is an aggregation's output.
func finalValue(a agg, st *aggState) any {
	switch a.fn {
	case "count":
		return st.n
	case "count_distinct":
		return int64(len(st.set))
	}
	if st.n == 0 {
		return nil
	}
	switch a.fn {
	case "sum":
		if a.typ == store.TypeInteger {
			return st.sumI.float()
		}
		return st.sumF
	case "avg":
		if a.typ == store.TypeInteger {
			return st.sumI.float() / float64(st.n)
		}
		return st.sumF / float64(st.n)
	case "min", "max":
		switch a.typ {
		case store.TypeNumber:
			if a.fn == "min" {
				return st.minF
			}
			return st.maxF
		case store.TypeString:
			if a.fn == "min" {
				return st.minS
			}
			return st.maxS
		case store.TypeTimestamp:
			if a.fn == "min" {
				return Timestamp(st.minI)
			}
			return Timestamp(st.maxI)
		}
		if a.fn == "min" {
			return st.minI
		}
		return st.maxI
	}
	return nil
}

// i128 is a signed 128-bit integer: a sum of int64 values that cannot overflow (2^63 values
// of any size fit), so an integer sum is exact and the same in any order.
type i128 struct {
	hi int64
	lo uint64
}

func (x *i128) add(v int64) {
	var carry uint64
	x.lo, carry = bits.Add64(x.lo, uint64(v), 0)
	x.hi += int64(carry) + v>>63 // v>>63 is v's sign extended into the high word
}

func (x *i128) addI(y i128) {
	var carry uint64
	x.lo, carry = bits.Add64(x.lo, y.lo, 0)
	x.hi += y.hi + int64(carry)
}

// float rounds the sum to the nearest float64, once.
func (x i128) float() float64 {
	if (x.hi == 0 && x.lo < 1<<63) || (x.hi == -1 && x.lo >= 1<<63) {
		return float64(int64(x.lo))
	}
	b := new(big.Int).Lsh(big.NewInt(x.hi), 64)
	b.Add(b, new(big.Int).SetUint64(x.lo))
	f, _ := new(big.Float).SetInt(b).Float64()
	return f
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

// compareValues orders output values: null first, false before true, numbers and
// timestamps by value, strings byte-wise.
func compareValues(a, b any) int {
	if a == nil || b == nil {
		switch {
		case a == nil && b == nil:
			return 0
		case a == nil:
			return -1
		}
		return 1
	}
	switch x := a.(type) {
	case string:
		y, _ := b.(string)
		return strings.Compare(x, y)
	case Timestamp:
		y, _ := b.(Timestamp)
		return cmp.Compare(x, y)
	case int64:
		y, _ := b.(int64)
		return cmp.Compare(x, y)
	case float64:
		y, _ := b.(float64)
		return cmp.Compare(x, y)
	case bool:
		y, _ := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case json.RawMessage:
		y, _ := b.(json.RawMessage)
		return strings.Compare(string(x), string(y))
	}
	return 0
}
