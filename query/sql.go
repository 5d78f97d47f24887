package query

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"lookout/cond"
	"lookout/store"
	"lookout/warehouse/external"
)

// Queries on external engines: the same plan as the embedded engine (compile), written as
// one SQL statement for the engine's dialect, with the semantics of CONTRACTS §7:
//
//   - every operator but not_exists fails on a missing or null value: each condition is
//     "col IS NOT NULL AND …", so no engine's own null rules (NOT IN, <>) decide;
//   - groups are ordered by order_by, then by their values ascending, nulls first;
//     selected rows by order_by, then in receive order (_received_at, _seq), as the
//     record log is;
//   - sum and avg are doubles and null over no values; count(field) counts non-nulls;
//   - record time is the timestamp field when set, else _received_at.
//
// Values are never written into the SQL by hand: each goes through Dialect.Value (a bind
// parameter on PostgreSQL, the one fuzzed literal function on ClickHouse), and identifiers
// through Dialect.Ident.

// CompileSQL writes a request as a statement for an engine's dialect.
func CompileSQL(d external.Dialect, table string, req *Request) (*external.Statement, error) {
	p, err := compile(req)
	if err != nil {
		return nil, err
	}
	return compileSQL(d, table, p), nil
}

func compileSQL(d external.Dialect, table string, p *plan) *external.Statement {
	st := &external.Statement{}
	col := func(name string) string { return d.Ident(name) }
	var where []string
	for _, f := range p.filters {
		where = append(where, sqlCondition(d, &st.Args, f, col(f.field)))
	}
	if p.hasFrom || p.hasTo {
		t := col("_received_at")
		if tf := p.m.TimestampField; tf != "" {
			t = "coalesce(" + col(tf) + ", " + t + ")"
		}
		if p.hasFrom {
			where = append(where, t+" >= "+d.Value(&st.Args, p.from))
		}
		if p.hasTo {
			where = append(where, t+" < "+d.Value(&st.Args, p.to))
		}
	}
	var sel, order []string
	alias := func(i int) string { return d.Ident("__c" + strconv.Itoa(i)) }
	nullOrder := func(desc bool) string {
		if desc {
			return " DESC NULLS LAST"
		}
		return " ASC NULLS FIRST"
	}
	if p.grouping {
		for i, g := range p.group {
			sel = append(sel, col(g)+" AS "+alias(i))
		}
		for i, a := range p.aggs {
			sel = append(sel, sqlAggregate(d, a)+" AS "+alias(len(p.group)+i))
		}
		for _, o := range p.order {
			for i, c := range p.columns {
				if c.Name == o.Field {
					order = append(order, alias(i)+nullOrder(o.Desc))
					break
				}
			}
		}
		for i := range p.group {
			order = append(order, alias(i)+nullOrder(false))
		}
	} else {
		for i, s := range p.selects {
			sel = append(sel, col(s)+" AS "+alias(i))
		}
		for _, o := range p.order {
			order = append(order, col(o.Field)+nullOrder(o.Desc))
		}
		order = append(order, col("_received_at")+" ASC", col(external.ColSeq)+" ASC")
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(strings.Join(sel, ", "))
	b.WriteString(" FROM ")
	b.WriteString(d.Table(table))
	if len(where) > 0 {
		b.WriteString(" WHERE ")
		b.WriteString(strings.Join(where, " AND "))
	}
	if len(p.group) > 0 {
		b.WriteString(" GROUP BY ")
		for i, g := range p.group {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(col(g))
		}
	}
	if len(order) > 0 {
		b.WriteString(" ORDER BY ")
		b.WriteString(strings.Join(order, ", "))
	}
	b.WriteString(" LIMIT ")
	b.WriteString(strconv.Itoa(p.limit))
	st.SQL = b.String()
	for _, c := range p.columns {
		st.Types = append(st.Types, c.Type)
	}
	return st
}

// sqlCondition writes one filter. A required filter that cannot apply to the model
// matches nothing.
func sqlCondition(d external.Dialect, args *[]any, f filter, c string) string {
	if f.never {
		return "1 = 0"
	}
	op := f.c.Op()
	switch op {
	case cond.OpExists:
		return c + " IS NOT NULL"
	case cond.OpNotExists:
		return c + " IS NULL"
	}
	v := f.c.Operand() // a boolean is 1 or 0 on ClickHouse, a boolean on PostgreSQL: Value knows
	var test string
	switch op {
	case cond.OpIn, cond.OpNotIn:
		var list []string
		switch xs := v.(type) {
		case []string:
			for _, x := range xs {
				list = append(list, d.Value(args, x))
			}
		case []int64:
			for _, x := range xs {
				list = append(list, d.Value(args, x))
			}
		case []float64:
			for _, x := range xs {
				list = append(list, d.Value(args, x))
			}
		}
		test = c + " IN (" + strings.Join(list, ", ") + ")"
		if op == cond.OpNotIn {
			test = "NOT (" + test + ")"
		}
	case cond.OpContains:
		test = d.Contains(c, d.Value(args, v))
	case cond.OpNotContains:
		test = "NOT (" + d.Contains(c, d.Value(args, v)) + ")"
	case cond.OpStartsWith:
		test = d.StartsWith(c, d.Value(args, v))
	case cond.OpEndsWith:
		test = d.EndsWith(c, d.Value(args, v))
	case cond.OpMatches:
		test = d.Matches(c, d.Value(args, d.Pattern(v.(string))))
	default:
		sym := map[string]string{cond.OpEq: "=", cond.OpNeq: "<>", cond.OpGt: ">", cond.OpGte: ">=", cond.OpLt: "<", cond.OpLte: "<="}[op]
		test = c + " " + sym + " " + d.Value(args, v)
	}
	return "(" + c + " IS NOT NULL AND " + test + ")"
}

// sqlAggregate writes one aggregation.
func sqlAggregate(d external.Dialect, a agg) string {
	c := d.Ident(a.field)
	switch a.fn {
	case "count":
		if a.field == "" {
			return "count(*)"
		}
		return "count(" + c + ")"
	case "count_distinct":
		return d.CountDistinct(c)
	case "sum":
		return d.Sum(c, a.typ)
	case "avg":
		return d.Avg(c, a.typ)
	case "min":
		return d.Min(c, a.typ)
	}
	return d.Max(c, a.typ)
}

// RunExternal runs a query on an external engine: compiled, sent, and its rows turned into
// the values the embedded engine answers with (Timestamp, json.RawMessage). Engine errors
// are a 503 carrying the engine's message.
func RunExternal(ctx context.Context, eng external.Engine, req *Request) (*Result, error) {
	start := time.Now()
	p, err := compile(req)
	if err != nil {
		return nil, err
	}
	st := compileSQL(eng.Dialect(), external.TableFor(req.Model).Name, p)
	rows, err := eng.Query(ctx, st)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, ErrDeadline
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ee *external.Error
		if errors.As(err, &ee) && ee.Invalid {
			return nil, store.Errorf(store.CodeValidation, "the warehouse refused the query: %s", ee.Error())
		}
		return nil, store.Errorf(store.CodeUnavailable, "the warehouse could not answer: %s", external.Message(err))
	}
	for _, r := range rows {
		for i, v := range r {
			if v == nil {
				continue
			}
			switch p.columns[i].Type {
			case store.TypeTimestamp:
				r[i] = Timestamp(v.(int64))
			case store.TypeObject, store.TypeArray:
				r[i] = json.RawMessage(v.(string))
			}
		}
	}
	return &Result{Columns: p.columns, Rows: rows, Stats: Stats{Returned: len(rows), ElapsedMS: float64(time.Since(start).Microseconds()) / 1000}}, nil
}
