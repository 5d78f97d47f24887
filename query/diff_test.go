package query

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"lookout/store"
	"lookout/warehouse"
)

// The differential test: seeded random data sets and hundreds of random queries, each
// answered by the engine and by naive, written-here-independently evaluation over the
// decoded records, before any sealing, with part of the data sealed, and with all of it
// sealed. The answers must be identical, byte for byte once encoded.

var diffModel = &store.Model{
	Meta: store.Meta{ID: "mdl_diff", ProjectID: "prj_diff"}, Key: "events",
	Fields: []store.Field{
		{Name: "s", Type: store.TypeString},
		{Name: "u", Type: store.TypeString},
		{Name: "i", Type: store.TypeInteger},
		{Name: "n", Type: store.TypeNumber},
		{Name: "b", Type: store.TypeBoolean},
		{Name: "t", Type: store.TypeTimestamp},
		{Name: "o", Type: store.TypeObject},
	},
	TimestampField: "t", UnknownFields: store.UnknownReject, WarehouseID: "wh_diff",
}

var diffStrings = []string{"", "a", "ab", "b", "ba", "c", "Z", "é", "a\"q", "x y", "a\nb", "\n", "a\\b"}

var diffBase = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)

func genRecord(r *rand.Rand) map[string]any {
	rec := map[string]any{}
	maybe := func(name string, v func() any) {
		switch r.IntN(10) {
		case 0: // missing
		case 1:
			rec[name] = nil
		default:
			rec[name] = v()
		}
	}
	maybe("s", func() any { return diffStrings[r.IntN(len(diffStrings))] })
	maybe("u", func() any { return fmt.Sprintf("u%05d", r.IntN(5000)) })
	maybe("i", func() any { return int64(r.IntN(41) - 20) })
	maybe("n", func() any { return float64(r.IntN(2001)-1000) / 8 })
	maybe("b", func() any { return r.IntN(2) == 0 })
	maybe("t", func() any {
		at := diffBase.Add(time.Duration(r.IntN(3600*24)) * time.Second).Add(time.Duration(r.IntN(1000)) * time.Millisecond)
		if r.IntN(3) == 0 {
			return at.UnixMilli()
		}
		return at.Format(time.RFC3339Nano)
	})
	maybe("o", func() any { return map[string]any{"k": r.IntN(3)} })
	return rec
}

// loadDiff writes records through the real validator and record log, in batches, sealing
// after some of them when sealEvery > 0.
func loadDiff(t *testing.T, recs [][]byte, sealEvery int, sealAll bool) *warehouse.RecordLog {
	t.Helper()
	rs, err := warehouse.OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	l, err := rs.Log(diffModel.WarehouseID)
	if err != nil {
		t.Fatal(err)
	}
	appendDiff(t, l, recs, sealEvery, sealAll)
	return l
}

// appendDiff writes the records into a log as loadDiff describes.
func appendDiff(t *testing.T, l *warehouse.RecordLog, recs [][]byte, sealEvery int, sealAll bool) {
	t.Helper()
	v := warehouse.NewValidator(diffModel)
	at := diffBase.Add(-time.Hour)
	policy := warehouse.SealPolicy{MinAge: 0}
	for start := 0; start < len(recs); start += 97 {
		end := min(start+97, len(recs))
		var stored [][]byte
		for k := start; k < end; k++ {
			out, errs := v.Validate(recs[k], nil)
			if len(errs) > 0 {
				t.Fatalf("record %d: %v", k, errs)
			}
			stored = append(stored, out)
		}
		if err := l.Append([]*warehouse.AppendBatch{{ModelID: diffModel.ID, ReceivedAt: at, Records: stored, ClientID: "ic_1", IngestID: fmt.Sprintf("ing_%d", start)}}); err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Millisecond)
		if sealEvery > 0 && (start/97)%sealEvery == sealEvery-1 {
			if _, err := l.Seal(diffModel, at.Add(time.Hour), policy); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sealAll {
		for {
			n, err := l.Seal(diffModel, at.Add(time.Hour), policy)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		st, err := l.Stats(diffModel.ID)
		if err != nil || st.LogRecords != 0 || st.SealedRecords != len(recs) {
			t.Fatalf("after sealing everything: %+v %v", st, err)
		}
	}
}

var diffOps = map[string][]string{
	store.TypeString:    {"eq", "neq", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "not_contains", "starts_with", "ends_with", "matches", "exists", "not_exists"},
	store.TypeInteger:   {"eq", "neq", "gt", "gte", "lt", "lte", "in", "not_in", "exists", "not_exists"},
	store.TypeNumber:    {"eq", "neq", "gt", "gte", "lt", "lte", "in", "not_in", "exists", "not_exists"},
	store.TypeBoolean:   {"eq", "neq", "exists", "not_exists"},
	store.TypeTimestamp: {"eq", "neq", "gt", "gte", "lt", "lte", "exists", "not_exists"},
	store.TypeObject:    {"exists", "not_exists"},
}

func genValue(r *rand.Rand, typ, op string) any {
	one := func() any {
		switch typ {
		case store.TypeString:
			if op == "matches" {
				return []string{"^a", "b$", "a.", "^$", "[xy]", "a.b", "(?s)a.b", "^b", "(?m)^b"}[r.IntN(9)]
			}
			if op == "contains" || op == "not_contains" || op == "starts_with" || op == "ends_with" {
				return []string{"a", "b", "", "q", "u00"}[r.IntN(5)]
			}
			if r.IntN(3) == 0 {
				return fmt.Sprintf("u%05d", r.IntN(5000))
			}
			return diffStrings[r.IntN(len(diffStrings))]
		case store.TypeInteger:
			return json.Number(fmt.Sprint(r.IntN(45) - 22))
		case store.TypeNumber:
			return json.Number(fmt.Sprint(float64(r.IntN(2001)-1000) / 8))
		case store.TypeBoolean:
			return r.IntN(2) == 0
		case store.TypeTimestamp:
			return diffBase.Add(time.Duration(r.IntN(3600*24)) * time.Second).Format(time.RFC3339)
		}
		return nil
	}
	switch op {
	case "exists", "not_exists":
		return nil
	case "in", "not_in":
		n := 1 + r.IntN(4)
		out := make([]any, n)
		for i := range out {
			out[i] = one()
		}
		return out
	}
	return one()
}

func genQuery(r *rand.Rand) store.QuerySpec {
	var q store.QuerySpec
	fields := diffModel.Fields
	for k := r.IntN(3); k > 0; k-- {
		f := fields[r.IntN(len(fields))]
		ops := diffOps[f.Type]
		op := ops[r.IntN(len(ops))]
		q.Filters = append(q.Filters, store.Filter{Field: f.Name, Op: op, Value: genValue(r, f.Type, op)})
	}
	if r.IntN(4) == 0 {
		from := diffBase.Add(time.Duration(r.IntN(20)) * time.Hour)
		q.TimeRange = &store.TimeRange{From: from.Format(time.RFC3339), To: from.Add(time.Duration(1+r.IntN(6)) * time.Hour).Format(time.RFC3339)}
	}
	groupable := []string{"s", "i", "b", "t", "n", "u", "_client_id"}
	switch r.IntN(3) {
	case 0: // select
		for _, f := range []string{"s", "u", "i", "n", "b", "t", "o", "_received_at"} {
			if r.IntN(2) == 0 {
				q.Select = append(q.Select, f)
			}
		}
		if len(q.Select) > 0 && r.IntN(2) == 0 {
			q.OrderBy = []store.OrderBy{{Field: q.Select[r.IntN(len(q.Select))], Desc: r.IntN(2) == 0}}
		}
		q.Limit = 1 + r.IntN(300)
		return q
	case 1:
		for k := r.IntN(3); k > 0; k-- {
			g := groupable[r.IntN(len(groupable))]
			if !slices.Contains(q.GroupBy, g) {
				q.GroupBy = append(q.GroupBy, g)
			}
		}
	}
	aggs := []store.Aggregation{
		{Fn: "count"}, {Fn: "count", Field: "s"}, {Fn: "sum", Field: "i"}, {Fn: "sum", Field: "n"},
		{Fn: "avg", Field: "i"}, {Fn: "avg", Field: "n"}, {Fn: "min", Field: "n"}, {Fn: "max", Field: "i"},
		{Fn: "min", Field: "s"}, {Fn: "max", Field: "t"}, {Fn: "count_distinct", Field: "u"}, {Fn: "count_distinct", Field: "b"},
	}
	for k := 1 + r.IntN(3); k > 0; k-- {
		a := aggs[r.IntN(len(aggs))]
		a.As = fmt.Sprintf("a%d", len(q.Aggregations))
		q.Aggregations = append(q.Aggregations, a)
	}
	if r.IntN(2) == 0 {
		q.OrderBy = []store.OrderBy{{Field: q.Aggregations[0].As, Desc: r.IntN(2) == 0}}
	}
	if r.IntN(3) == 0 {
		q.Limit = 1 + r.IntN(20)
	}
	return q
}

// --- the naive evaluator: decoded maps, written without the engine or cond ---

type nval struct {
	null bool
	kind string // s, i, f, b, t, o
	s    string
	i    int64
	f    float64
}

func naiveValue(rec map[string]any, field, typ string) nval {
	v, ok := rec[field]
	if !ok || v == nil {
		return nval{null: true}
	}
	switch x := v.(type) {
	case json.Number:
		if typ == store.TypeTimestamp { // epoch milliseconds
			ms, _ := x.Int64()
			return nval{kind: "t", i: ms * 1000}
		}
	case map[string]any:
		b, _ := json.Marshal(x)
		return nval{kind: "o", s: string(b)}
	}
	return naiveOperand(typ, v)
}

func naiveOperand(typ string, v any) nval {
	switch typ {
	case store.TypeString:
		return nval{kind: "s", s: v.(string)}
	case store.TypeInteger:
		n, _ := v.(json.Number).Int64()
		return nval{kind: "i", i: n}
	case store.TypeNumber:
		f, _ := v.(json.Number).Float64()
		return nval{kind: "f", f: f}
	case store.TypeBoolean:
		if v.(bool) {
			return nval{kind: "b", i: 1}
		}
		return nval{kind: "b"}
	case store.TypeTimestamp:
		at, _ := time.Parse(time.RFC3339Nano, v.(string))
		return nval{kind: "t", i: at.UnixMicro()}
	}
	panic("operand of " + typ)
}

func ncmp(a, b nval) int {
	switch {
	case a.null && b.null:
		return 0
	case a.null:
		return -1
	case b.null:
		return 1
	}
	switch a.kind {
	case "s", "o":
		return strings.Compare(a.s, b.s)
	case "f":
		switch {
		case a.f < b.f:
			return -1
		case a.f > b.f:
			return 1
		}
		return 0
	}
	switch {
	case a.i < b.i:
		return -1
	case a.i > b.i:
		return 1
	}
	return 0
}

func naiveMatch(f store.Filter, typ string, v nval) bool {
	switch f.Op {
	case "exists":
		return !v.null
	case "not_exists":
		return v.null
	}
	if v.null {
		return false
	}
	switch f.Op {
	case "in", "not_in":
		found := false
		for _, x := range f.Value.([]any) {
			if ncmp(v, naiveOperand(typ, x)) == 0 {
				found = true
			}
		}
		return found == (f.Op == "in")
	case "contains":
		return strings.Contains(v.s, f.Value.(string))
	case "not_contains":
		return !strings.Contains(v.s, f.Value.(string))
	case "starts_with":
		return strings.HasPrefix(v.s, f.Value.(string))
	case "ends_with":
		return strings.HasSuffix(v.s, f.Value.(string))
	case "matches":
		return regexp.MustCompile(f.Value.(string)).MatchString(v.s)
	}
	c := ncmp(v, naiveOperand(typ, f.Value))
	switch f.Op {
	case "eq":
		return c == 0
	case "neq":
		return c != 0
	case "gt":
		return c > 0
	case "gte":
		return c >= 0
	case "lt":
		return c < 0
	case "lte":
		return c <= 0
	}
	panic(f.Op)
}

func naiveOut(v nval) any {
	if v.null {
		return nil
	}
	switch v.kind {
	case "s":
		return v.s
	case "o":
		return json.RawMessage(v.s)
	case "i":
		return v.i
	case "f":
		return v.f
	case "b":
		return v.i == 1
	}
	return Timestamp(v.i)
}

func naiveRun(recs []map[string]any, q store.QuerySpec) [][]any {
	types := map[string]string{"_received_at": store.TypeTimestamp, "_client_id": store.TypeString, "_ingest_id": store.TypeString}
	for _, f := range diffModel.Fields {
		types[f.Name] = f.Type
	}
	var rows []map[string]any
	for _, rec := range recs {
		ok := true
		if tr := q.TimeRange; tr != nil {
			tv := naiveValue(rec, "t", store.TypeTimestamp)
			if tv.null {
				tv = naiveValue(rec, "_received_at", store.TypeTimestamp)
			}
			from, _ := time.Parse(time.RFC3339, tr.From)
			to, _ := time.Parse(time.RFC3339, tr.To)
			ok = tv.i >= from.UnixMicro() && tv.i < to.UnixMicro()
		}
		for _, f := range q.Filters {
			if ok && !naiveMatch(f, types[f.Field], naiveValue(rec, f.Field, types[f.Field])) {
				ok = false
			}
		}
		if ok {
			rows = append(rows, rec)
		}
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	if len(q.GroupBy) == 0 && len(q.Aggregations) == 0 {
		type picked struct {
			vals []nval
			seq  int
		}
		sel := q.Select
		if len(sel) == 0 {
			for _, f := range diffModel.Fields {
				sel = append(sel, f.Name)
			}
		}
		var out []picked
		for k, rec := range rows {
			p := picked{seq: k}
			for _, s := range sel {
				p.vals = append(p.vals, naiveValue(rec, s, types[s]))
			}
			out = append(out, p)
		}
		if len(q.OrderBy) > 0 {
			col := slices.Index(q.Select, q.OrderBy[0].Field)
			sort.SliceStable(out, func(a, b int) bool {
				c := ncmp(out[a].vals[col], out[b].vals[col])
				if q.OrderBy[0].Desc {
					c = -c
				}
				return c < 0
			})
		}
		res := [][]any{}
		for _, p := range out {
			if len(res) == limit {
				break
			}
			var r []any
			for _, v := range p.vals {
				r = append(r, naiveOut(v))
			}
			res = append(res, r)
		}
		return res
	}
	type grp struct {
		key  []nval
		rows []map[string]any
	}
	var groups []*grp
	for _, rec := range rows {
		var key []nval
		for _, g := range q.GroupBy {
			key = append(key, naiveValue(rec, g, types[g]))
		}
		var found *grp
		for _, g := range groups {
			same := true
			for i := range key {
				if ncmp(key[i], g.key[i]) != 0 || key[i].null != g.key[i].null {
					same = false
				}
			}
			if same {
				found = g
				break
			}
		}
		if found == nil {
			found = &grp{key: key}
			groups = append(groups, found)
		}
		found.rows = append(found.rows, rec)
	}
	if len(q.GroupBy) == 0 && len(groups) == 0 {
		groups = append(groups, &grp{})
	}
	var res [][]any
	var keys [][]nval
	for _, g := range groups {
		var r []any
		for _, k := range g.key {
			r = append(r, naiveOut(k))
		}
		var sortVals []nval
		sortVals = append(sortVals, g.key...)
		for _, a := range q.Aggregations {
			v := naiveAgg(a, types[a.Field], g.rows)
			r = append(r, naiveOut(v))
			sortVals = append(sortVals, v)
		}
		res = append(res, r)
		keys = append(keys, sortVals)
	}
	idx := make([]int, len(res))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ka, kb := keys[idx[a]], keys[idx[b]]
		for _, o := range q.OrderBy {
			col := len(q.GroupBy)
			for i, ag := range q.Aggregations {
				if ag.As == o.Field {
					col += i
				}
			}
			c := ncmp(ka[col], kb[col])
			if o.Desc {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
		}
		for i := range q.GroupBy {
			if c := ncmp(ka[i], kb[i]); c != 0 {
				return c < 0
			}
		}
		return false
	})
	out := [][]any{}
	for _, i := range idx {
		if len(out) == limit {
			break
		}
		out = append(out, res[i])
	}
	return out
}

func naiveAgg(a store.Aggregation, typ string, rows []map[string]any) nval {
	var vals []nval
	for _, rec := range rows {
		if a.Field == "" {
			vals = append(vals, nval{kind: "i"})
			continue
		}
		if v := naiveValue(rec, a.Field, typ); !v.null {
			vals = append(vals, v)
		}
	}
	switch a.Fn {
	case "count":
		return nval{kind: "i", i: int64(len(vals))}
	case "count_distinct":
		seen := map[nval]bool{}
		for _, v := range vals {
			seen[v] = true
		}
		return nval{kind: "i", i: int64(len(seen))}
	}
	if len(vals) == 0 {
		return nval{null: true}
	}
	switch a.Fn {
	case "sum", "avg":
		var si int64
		var sf float64
		for _, v := range vals {
			si += v.i
			sf += v.f
		}
		total := sf
		if typ == store.TypeInteger {
			total = float64(si)
		}
		if a.Fn == "avg" {
			total /= float64(len(vals))
		}
		return nval{kind: "f", f: total}
	}
	best := vals[0]
	for _, v := range vals[1:] {
		c := ncmp(v, best)
		if (a.Fn == "min" && c < 0) || (a.Fn == "max" && c > 0) {
			best = v
		}
	}
	return best
}

// diffRunner answers the differential test's queries: one layout of the embedded engine,
// or an external engine.
type diffRunner struct {
	name string
	run  func(q *store.QuerySpec) (*Result, error)
}

func TestDifferential(t *testing.T) {
	differential(t, func(t *testing.T, raws [][]byte) []diffRunner {
		layouts := []struct {
			name      string
			sealEvery int
			sealAll   bool
		}{{"log only", 0, false}, {"partly sealed", 3, false}, {"all sealed", 2, true}}
		var out []diffRunner
		for _, ly := range layouts {
			l := loadDiff(t, raws, ly.sealEvery, ly.sealAll)
			out = append(out, diffRunner{ly.name, func(q *store.QuerySpec) (*Result, error) {
				return Run(context.Background(), l, &Request{Model: diffModel, Query: q, Now: diffBase, Caps: DefaultCaps})
			}})
		}
		return out
	})
}

// differential generates the data sets and queries, and checks every runner's answers
// against the naive evaluator's. runners loads one data set (as JSON records) and returns
// the runners over it.
func differential(t *testing.T, runners func(t *testing.T, raws [][]byte) []diffRunner) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			n := 1500 + r.IntN(1500)
			var raws [][]byte
			var decoded []map[string]any
			for k := 0; k < n; k++ {
				rec := genRecord(r)
				raw, _ := json.Marshal(rec)
				raws = append(raws, raw)
			}
			runs := runners(t, raws)
			// What was stored, decoded: the naive evaluator reads a log before sealing.
			err := loadDiff(t, raws, 0, false).Scan(diffModel.ID, time.Time{}, time.Time{}, func(_, v []byte) error {
				d := json.NewDecoder(bytes.NewReader(v))
				d.UseNumber()
				var m map[string]any
				if err := d.Decode(&m); err != nil {
					return err
				}
				decoded = append(decoded, m)
				return nil
			})
			if err != nil || len(decoded) != n {
				t.Fatalf("scan: %d of %d, %v", len(decoded), n, err)
			}
			for qn := 0; qn < 150; qn++ {
				q := genQuery(r)
				if _, errs := Validate(diffModel, &q, nil); len(errs) > 0 {
					t.Fatalf("generated an invalid query %+v: %v", q, errs)
				}
				want, _ := json.Marshal(naiveRun(decoded, q))
				for _, run := range runs {
					res, err := run.run(&q)
					if err != nil {
						t.Fatalf("%s: query %+v: %v", run.name, q, err)
					}
					got, _ := json.Marshal(res.Rows)
					if !bytes.Equal(got, want) {
						qj, _ := json.Marshal(q)
						t.Fatalf("%s: query %s\n got  %.600s\n want %.600s", run.name, qj, got, want)
					}
				}
			}
		})
	}
}

var _ = math.Inf
