package query

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"lookout/store"
)

// FuzzValidateQuery: any query object decoded from JSON is validated without panicking, and
// a query declared valid names only real columns in order_by.
func FuzzValidateQuery(f *testing.F) {
	for _, seed := range []string{
		`{"select":["id","amount"],"filters":[{"field":"amount","op":"gt","value":3}],"limit":10}`,
		`{"group_by":["country"],"aggregations":[{"fn":"sum","field":"amount","as":"revenue"}],"order_by":[{"field":"revenue","desc":true}]}`,
		`{"filters":[{"field":"country","op":"in","value":["NL","DE"]},{"field":"id","op":"eq","value":{"param":"id"}}]}`,
		`{"time_range":{"from":"-24h","to":"2026-01-01T00:00:00Z"}}`,
		`{"filters":[{"field":"id","op":"matches","value":"^ord_[0-9]+$"},{"field":"country","op":"not_contains","value":"X"}]}`,
		`{"filters":[{"field":"at","op":"in","value":["2026-01-01T00:00:00Z",1767225600000]},{"field":"tags","op":"exists"}]}`,
	} {
		f.Add([]byte(seed))
	}
	m := &store.Model{Key: "orders", Fields: []store.Field{{Name: "id", Type: store.TypeString, Required: true}, {Name: "amount", Type: store.TypeNumber},
		{Name: "country", Type: store.TypeString}, {Name: "at", Type: store.TypeTimestamp}, {Name: "tags", Type: store.TypeArray}}}
	params := []store.Param{{Name: "id", Type: store.TypeString}}
	f.Fuzz(func(t *testing.T, b []byte) {
		var q store.QuerySpec
		if json.Unmarshal(b, &q) != nil {
			return
		}
		cols, errs := Validate(m, &q, params)
		if len(errs) > 0 {
			return
		}
		for _, o := range q.OrderBy {
			if !slices.Contains(cols, o.Field) {
				t.Fatalf("valid query orders by %q, not among %v", o.Field, cols)
			}
		}
	})
}

// FuzzDecode: any bytes as a POST /query body give a decoded query or a clear error,
// never a panic; a decoded ad-hoc query then validates (or not) without panicking, and a
// valid one runs over no data to exactly one row or none.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"schema":"orders","group_by":["country"],"aggregations":[{"fn":"count","as":"n"}]}`,
		`{"api":"revenue","params":{"country":"NL"}}`,
		`{"schema":"orders","filters":[{"field":"amount","op":"gt","value":3}],"limit":10}`,
		`{"api":"x","filters":[]}`, `[]`, `{"schema":"orders","time_range":{"from":"-1h"}}`,
	} {
		f.Add([]byte(seed))
	}
	m := &store.Model{Key: "orders", Fields: []store.Field{{Name: "id", Type: store.TypeString}, {Name: "amount", Type: store.TypeNumber},
		{Name: "country", Type: store.TypeString}, {Name: "at", Type: store.TypeTimestamp}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		body, err := Decode(b)
		if err != nil || body.API != "" {
			return
		}
		if _, errs := Validate(m, &body.Query, nil); len(errs) > 0 {
			return
		}
		res, err := Run(context.Background(), nil, &Request{Model: m, Query: &body.Query, Now: time.Unix(1e9, 0)})
		if err == nil && len(res.Rows) > 1 {
			t.Fatalf("a query over no data returned %d rows", len(res.Rows))
		}
	})
}

func TestValidateFilters(t *testing.T) {
	m := &store.Model{Key: "orders", Fields: []store.Field{{Name: "id", Type: store.TypeString}, {Name: "amount", Type: store.TypeNumber},
		{Name: "n", Type: store.TypeInteger}, {Name: "at", Type: store.TypeTimestamp}, {Name: "paid", Type: store.TypeBoolean}, {Name: "tags", Type: store.TypeArray}}}
	params := []store.Param{{Name: "ids", Type: store.TypeArray}, {Name: "id", Type: store.TypeString}}
	for _, tc := range []struct {
		name   string
		filter store.Filter
		want   []store.FieldError // nil: valid
	}{
		{"matches", store.Filter{Field: "id", Op: "matches", Value: "^ord_[0-9]+$"}, nil},
		{"not_contains", store.Filter{Field: "id", Op: "not_contains", Value: "x"}, nil},
		{"bad pattern", store.Filter{Field: "id", Op: "matches", Value: "("},
			[]store.FieldError{{Field: "query.filters[0].value", Message: "must be a valid RE2 pattern of at most 256 characters: missing closing ): `(`"}}},
		{"matches on a number", store.Filter{Field: "amount", Op: "matches", Value: "1"},
			[]store.FieldError{{Field: "query.filters[0].op", Message: `matches does not apply to "amount" of type number`}}},
		{"boolean gt", store.Filter{Field: "paid", Op: "gt", Value: true},
			[]store.FieldError{{Field: "query.filters[0].op", Message: `gt does not apply to "paid" of type boolean`}}},
		{"bad list element", store.Filter{Field: "n", Op: "in", Value: []any{1.0, 2.5}},
			[]store.FieldError{{Field: "query.filters[0].value[1]", Message: "must be an integer"}}},
		{"empty list", store.Filter{Field: "n", Op: "not_in", Value: []any{}},
			[]store.FieldError{{Field: "query.filters[0].value", Message: "must be an array of 1 to 1000 values for not_in"}}},
		{"integral float", store.Filter{Field: "n", Op: "gte", Value: 3.0}, nil},
		{"timestamp both forms", store.Filter{Field: "at", Op: "in", Value: []any{"2026-01-01T00:00:00.5+01:00", 0.0}}, nil},
		{"bad timestamp", store.Filter{Field: "at", Op: "lt", Value: "tomorrow"},
			[]store.FieldError{{Field: "query.filters[0].value", Message: "must be an RFC 3339 timestamp or epoch milliseconds"}}},
		{"exists with a value", store.Filter{Field: "tags", Op: "exists", Value: true},
			[]store.FieldError{{Field: "query.filters[0].value", Message: "must be left out for exists"}}},
		{"param list", store.Filter{Field: "id", Op: "in", Value: map[string]any{"param": "ids"}}, nil},
		{"param list of the wrong type", store.Filter{Field: "id", Op: "not_in", Value: map[string]any{"param": "id"}},
			[]store.FieldError{{Field: "query.filters[0].value", Message: `param "id" must be of type array for not_in`}}},
		{"param pattern", store.Filter{Field: "id", Op: "matches", Value: map[string]any{"param": "id"}}, nil},
		{"param of another type", store.Filter{Field: "n", Op: "eq", Value: map[string]any{"param": "id"}},
			[]store.FieldError{{Field: "query.filters[0].value", Message: `param "id" is of type string but "n" is integer`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Validate(m, &store.QuerySpec{Filters: []store.Filter{tc.filter}}, params)
			if !slices.Equal(errs, tc.want) {
				t.Errorf("got %+v\nwant %+v", errs, tc.want)
			}
		})
	}
}

// TestValidateRequiredFilter: a required filter is checked without a model, so operands
// that do not depend on the field's type (patterns above all) are checked there.
func TestValidateRequiredFilter(t *testing.T) {
	for _, tc := range []struct {
		filter store.Filter
		want   []store.FieldError
	}{
		{store.Filter{Field: "id", Op: "matches", Value: "^a"}, nil},
		{store.Filter{Field: "id", Op: "not_contains", Value: "a"}, nil},
		{store.Filter{Field: "id", Op: "matches", Value: map[string]any{"param": "p"}}, nil},
		{store.Filter{Field: "id", Op: "matches", Value: "a{2,1}"},
			[]store.FieldError{{Field: "value", Message: "must be a valid RE2 pattern of at most 256 characters: invalid repeat count: `{2,1}`"}}},
		{store.Filter{Field: "id", Op: "not_contains", Value: 3.0}, []store.FieldError{{Field: "value", Message: "must be a string"}}},
		{store.Filter{Field: "id", Op: "like", Value: "a"}, []store.FieldError{{Field: "op",
			Message: "must be one of contains, ends_with, eq, exists, gt, gte, in, lt, lte, matches, neq, not_contains, not_exists, not_in, starts_with"}}},
	} {
		if got := (Rules{}).ValidateFilter(tc.filter); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: got %+v, want %+v", tc.filter, got, tc.want)
		}
	}
}
