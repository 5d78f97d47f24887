// Package query is the query runtime: it validates a query object (CONTRACTS §5) against a
// model, binds an Analytics API's parameters, ANDs in a client's required filters, plans
// which blocks and columns to read and runs the query over the embedded warehouse.
package query

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"lookout/cond"
	"lookout/store"
	"lookout/warehouse"
)

// Aggregation functions and the field types each applies to (count needs no field).
var aggFns = map[string][]string{
	"count":          store.FieldTypes,
	"count_distinct": {store.TypeString, store.TypeInteger, store.TypeNumber, store.TypeBoolean, store.TypeTimestamp},
	"sum":            {store.TypeInteger, store.TypeNumber},
	"avg":            {store.TypeInteger, store.TypeNumber},
	"min":            {store.TypeString, store.TypeInteger, store.TypeNumber, store.TypeTimestamp},
	"max":            {store.TypeString, store.TypeInteger, store.TypeNumber, store.TypeTimestamp},
}

var columnPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// fieldType returns the type of a model field or system field.
func fieldType(m *store.Model, name string) (string, bool) {
	if f, ok := m.Field(name); ok {
		return f.Type, true
	}
	for _, f := range warehouse.SystemFields {
		if f.Name == name {
			return f.Type, true
		}
	}
	return "", false
}

// Rules is the query package's store.QueryRules: the store checks the query objects it
// keeps with these, in its own transaction.
type Rules struct{}

var _ store.QueryRules = Rules{}

// ValidateQuery implements store.QueryRules.
func (Rules) ValidateQuery(m *store.Model, q *store.QuerySpec, params []store.Param) []store.FieldError {
	_, errs := Validate(m, q, params)
	return errs
}

// ValidateParams implements store.QueryRules.
func (Rules) ValidateParams(params []store.Param) []store.FieldError { return ValidateParams(params) }

// ValidateFilter implements store.QueryRules.
func (Rules) ValidateFilter(f store.Filter) []store.FieldError { return validateShape(f) }

// validateShape checks what can be checked of a filter without a model.
func validateShape(f store.Filter) fieldErrors {
	var e fieldErrors
	if !columnPattern.MatchString(f.Field) {
		e.add("field", "must be a field name")
	}
	if !cond.Known(f.Op) {
		e.add("op", "must be one of %s", strings.Join(cond.Operators(), ", "))
	} else if !cond.TakesValue(f.Op) {
		if f.Value != nil {
			e.add("value", "must be left out for %s", f.Op)
		}
	} else if f.Value == nil {
		e.add("value", "is required for %s", f.Op)
	} else if _, isRef := paramRef(f.Value); !isRef && cond.TakesString(f.Op) {
		// A string operand (a matches pattern above all) can be checked without the
		// model, so a stored required filter never holds a pattern that cannot compile.
		if _, err := cond.Compile(cond.TypeString, f.Op, f.Value); err != nil {
			e.addCond("", err)
		}
	}
	return e
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type fieldErrors []store.FieldError

func (f *fieldErrors) add(field, format string, args ...any) {
	*f = append(*f, store.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// addCond reports a cond.Compile error at prefix + its part ("query.filters[0]." +
// "value[3]"), so the user is pointed at the list element that is wrong.
func (f *fieldErrors) addCond(prefix string, err error) {
	var ce *cond.Error
	if !errors.As(err, &ce) {
		f.add(prefix+"value", "%s", err)
		return
	}
	f.add(prefix+ce.Part, "%s", ce.Message)
}

// paramRef returns the parameter name of a {"param": "name"} value.
func paramRef(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	name, ok := m["param"].(string)
	return name, ok
}

// ValidateQuery checks a query against a model and the declared parameters. Every problem
// is reported with its path ("query.filters[0].op"). It returns the output columns.
func Validate(m *store.Model, q *store.QuerySpec, params []store.Param) ([]string, []store.FieldError) {
	var e fieldErrors
	declared := map[string]store.Param{}
	for _, p := range params {
		declared[p.Name] = p
	}
	typeOf := func(at, name string) (string, bool) {
		t, ok := fieldType(m, name)
		if !ok {
			e.add(at, "%q is not a field of model %s", name, m.Key)
		}
		return t, ok
	}
	if len(q.Select) > 0 && (len(q.GroupBy) > 0 || len(q.Aggregations) > 0) {
		e.add("query.select", "cannot be combined with group_by or aggregations; list grouped fields in group_by")
	}
	var columns []string
	addColumn := func(at, name string) {
		for _, c := range columns {
			if c == name {
				e.add(at, "output column %q appears twice", name)
				return
			}
		}
		columns = append(columns, name)
	}
	for i, name := range q.Select {
		if _, ok := typeOf(fmt.Sprintf("query.select[%d]", i), name); ok {
			addColumn(fmt.Sprintf("query.select[%d]", i), name)
		}
	}
	for i, name := range q.GroupBy {
		at := fmt.Sprintf("query.group_by[%d]", i)
		if t, ok := typeOf(at, name); ok {
			if t == store.TypeObject || t == store.TypeArray {
				e.add(at, "cannot group by a field of type %s", t)
			}
			addColumn(at, name)
		}
	}
	for i, a := range q.Aggregations {
		at := fmt.Sprintf("query.aggregations[%d]", i)
		types, ok := aggFns[a.Fn]
		if !ok {
			e.add(at+".fn", "must be one of %s", strings.Join(sortedKeys(aggFns), ", "))
			continue
		}
		if a.Field == "" && a.Fn != "count" {
			e.add(at+".field", "is required for %s", a.Fn)
			continue
		}
		if a.Field != "" {
			if t, ok := typeOf(at+".field", a.Field); ok && !slices.Contains(types, t) {
				e.add(at+".field", "%s does not apply to %q of type %s", a.Fn, a.Field, t)
			}
		}
		name := a.As
		if name == "" {
			name = a.Fn
			if a.Field != "" {
				name += "_" + a.Field
			}
		} else if !columnPattern.MatchString(name) {
			e.add(at+".as", "must be a column name of letters, digits and _")
		}
		addColumn(at+".as", name)
	}
	if len(q.Select) == 0 && len(q.GroupBy) == 0 && len(q.Aggregations) == 0 {
		for _, f := range m.Fields {
			columns = append(columns, f.Name)
		}
	}
	for i, f := range q.Filters {
		at := fmt.Sprintf("query.filters[%d]", i)
		shape := validateShape(f)
		for _, se := range shape {
			e.add(at+"."+se.Field, "%s", se.Message)
		}
		if len(shape) > 0 {
			continue
		}
		t, ok := typeOf(at+".field", f.Field)
		if !ok {
			continue
		}
		if !cond.Applies(f.Op, t) {
			e.add(at+".op", "%s does not apply to %q of type %s", f.Op, f.Field, t)
			continue
		}
		if f.Value == nil {
			continue
		}
		if name, isRef := paramRef(f.Value); isRef {
			p, ok := declared[name]
			switch {
			case !ok:
				e.add(at+".value", "refers to undeclared param %q", name)
			case cond.TakesList(f.Op):
				if p.Type != store.TypeArray {
					e.add(at+".value", "param %q must be of type array for %s", name, f.Op)
				}
			case p.Type != t:
				e.add(at+".value", "param %q is of type %s but %q is %s", name, p.Type, f.Field, t)
			}
			continue
		}
		if _, err := cond.Compile(t, f.Op, f.Value); err != nil {
			e.addCond(at+".", err)
		}
	}
	for i, o := range q.OrderBy {
		if !slices.Contains(columns, o.Field) {
			e.add(fmt.Sprintf("query.order_by[%d].field", i), "%q is not an output column (%s)", o.Field, strings.Join(columns, ", "))
		}
	}
	if q.Limit < 0 || q.Limit > store.MaxQueryLimit {
		e.add("query.limit", "must be 1 to %d (0 means the default)", store.MaxQueryLimit)
	}
	if tr := q.TimeRange; tr != nil {
		from, okFrom := parseTimeBound(tr.From)
		to, okTo := parseTimeBound(tr.To)
		if !okFrom {
			e.add("query.time_range.from", "must be an RFC 3339 time or a duration before now such as -24h")
		}
		if !okTo {
			e.add("query.time_range.to", "must be an RFC 3339 time or a duration before now such as -1h")
		}
		if okFrom && okTo && !from.IsZero() && !to.IsZero() && !from.Before(to) {
			e.add("query.time_range", "from must be before to")
		}
	}
	return columns, e
}

// parseTimeBound parses a time-range end against a fixed reference, for validation:
// relative bounds are compared as offsets from the same instant.
func parseTimeBound(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, true
	}
	ref := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if strings.HasPrefix(s, "-") {
		d, err := time.ParseDuration(s)
		if err != nil {
			return time.Time{}, false
		}
		return ref.Add(d), true
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// ValidateParams checks an Analytics API's parameter declarations.
func ValidateParams(params []store.Param) []store.FieldError {
	var e fieldErrors
	seen := map[string]bool{}
	for i, p := range params {
		at := fmt.Sprintf("params[%d]", i)
		if !columnPattern.MatchString(p.Name) {
			e.add(at+".name", "must be a name of letters, digits and _")
		} else if seen[p.Name] {
			e.add(at+".name", "repeats %q", p.Name)
		}
		seen[p.Name] = true
		if p.Type == store.TypeObject || !slices.Contains(store.FieldTypes, p.Type) {
			e.add(at+".type", "must be string, integer, number, boolean, timestamp or array")
			continue
		}
		if p.Default != nil {
			if p.Required {
				e.add(at+".default", "makes no sense for a required param")
			} else if _, msg := store.CheckValue(p.Type, p.Default); msg != "" {
				e.add(at+".default", "%s", msg)
			}
		}
	}
	return e
}
