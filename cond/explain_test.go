package cond

import (
	"strings"
	"testing"
)

func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		field, typ, op string
		value          any
		actual         any
		want           string
	}{
		{"amount", "number", "gt", 10.0, 12.5, "amount is 12.5, greater than 10: matched"},
		{"amount", "number", "gt", 10.0, 10.0, "amount is 10, equal to 10: not matched"},
		{"amount", "number", "lte", jn("10.50"), jn("9"), "amount is 9, less than 10.50: matched"},
		{"amount", "number", "gt", 10.0, "big", `amount is "big", not a number, so gt fails`},
		{"id", "integer", "lt", 3.0, 3.5, "id is 3.5, not an integer, so lt fails"},
		{"country", "string", "eq", "NL", nil, "country is missing, so eq fails"},
		{"country", "string", "eq", "NL", "NL", `country is "NL", equal to "NL": matched`},
		{"country", "string", "neq", "NL", "NL", `country is "NL", equal to "NL": not matched`},
		{"country", "string", "neq", "NL", nil, "country is missing, so neq fails"},
		{"event", "string", "in", []any{"purchase", "checkout"}, "click", `event is "click", not one of ["purchase","checkout"]: not matched`},
		{"event", "string", "not_in", []any{"purchase", "checkout"}, "click", `event is "click", not one of ["purchase","checkout"]: matched`},
		{"event", "string", "contains", "ick", "click", `event is "click", contains "ick": matched`},
		{"event", "string", "not_contains", "ick", "click", `event is "click", contains "ick": not matched`},
		{"event", "string", "starts_with", "x", "click", `event is "click", does not start with "x": not matched`},
		{"event", "string", "ends_with", "ck", "click", `event is "click", ends with "ck": matched`},
		{"event", "string", "matches", "^c.i", "click", `event is "click", matches the pattern "^c.i": matched`},
		{"event", "string", "matches", "^x", "click", `event is "click", does not match the pattern "^x": not matched`},
		{"paid", "boolean", "eq", true, false, "paid is false, not equal to true: not matched"},
		{"at", "timestamp", "gte", "2026-01-01T00:00:00Z", float64(ts), `at is 1767323045000 (2026-01-02T03:04:05Z), after "2026-01-01T00:00:00Z": matched`},
		{"at", "timestamp", "lt", "2026-01-01T00:00:00Z", "2025-12-31T23:00:00-01:00", `at is "2025-12-31T23:00:00-01:00", equal to "2026-01-01T00:00:00Z": not matched`},
		{"at", "timestamp", "lt", 1.0, 0.0, `at is 0 (1970-01-01T00:00:00Z), before 1 (1970-01-01T00:00:00.001Z): matched`},
		{"meta", "object", "exists", nil, map[string]any{"b": 1.0, "a": "x"}, `meta is {"a":"x","b":1}, present: matched`},
		{"meta", "object", "exists", nil, nil, "meta is missing, so exists fails"},
		{"meta", "object", "not_exists", nil, nil, "meta is missing: matched"},
		{"tags", "array", "not_exists", nil, []any{"a"}, `tags is ["a"], so not_exists fails`},
		{"tags", "array", "exists", nil, "a", `tags is "a", not an array, so exists fails`},
		{"n", "integer", "in", []any{1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0}, 12.0,
			"n is 12, one of [1,2,3,4,5,6,7,8,9,10,… 2 more]: matched"},
		{"s", "string", "eq", "x", strings.Repeat("a", 150), `s is "` + strings.Repeat("a", 100) + `…", not equal to "x": not matched`},
	} {
		c, err := Compile(tc.typ, tc.op, tc.value)
		if err != nil {
			t.Fatal(err)
		}
		got := tc.field + " " + c.Explain(tc.actual, c.Match(tc.actual))
		if got != tc.want {
			t.Errorf("%s %s %v on %#v:\n got %s\nwant %s", tc.typ, tc.op, tc.value, tc.actual, got, tc.want)
		}
	}
}
