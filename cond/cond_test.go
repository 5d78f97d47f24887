package cond

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

type jn = json.Number

// ts is 2026-01-02T03:04:05Z in epoch milliseconds.
const ts = 1767323045000

type matchCase struct {
	typ, op string
	value   any
	actual  any
	want    bool
}

// matchCases covers every operator on every type it applies to, with null, wrong types,
// boundaries and both number and timestamp representations.
var matchCases = []matchCase{
	// string
	{"string", "eq", "NL", "NL", true},
	{"string", "eq", "NL", "nl", false},
	{"string", "eq", "NL", nil, false},
	{"string", "eq", "3", 3.0, false},
	{"string", "eq", "", "", true},
	{"string", "neq", "NL", "DE", true},
	{"string", "neq", "NL", "NL", false},
	{"string", "neq", "NL", nil, false},
	{"string", "neq", "NL", true, false},
	{"string", "gt", "b", "c", true},
	{"string", "gt", "b", "b", false},
	{"string", "gt", "b", "a", false},
	{"string", "gt", "b", "ba", true},
	{"string", "gt", "b", "B", false}, // byte-wise: upper case sorts first
	{"string", "gt", "b", nil, false},
	{"string", "gte", "b", "b", true},
	{"string", "gte", "b", "a", false},
	{"string", "lt", "b", "a", true},
	{"string", "lt", "b", "", true},
	{"string", "lt", "b", "b", false},
	{"string", "lte", "b", "b", true},
	{"string", "lte", "b", "c", false},
	{"string", "lte", "b", nil, false},
	{"string", "contains", "ell", "hello", true},
	{"string", "contains", "ell", "HELLO", false},
	{"string", "contains", "ell", nil, false},
	{"string", "contains", "", "x", true},
	{"string", "not_contains", "ell", "hello", false},
	{"string", "not_contains", "ell", "world", true},
	{"string", "not_contains", "ell", nil, false},
	{"string", "not_contains", "ell", 1.0, false},
	{"string", "starts_with", "he", "hello", true},
	{"string", "starts_with", "he", "the", false},
	{"string", "starts_with", "he", "He", false},
	{"string", "starts_with", "he", nil, false},
	{"string", "ends_with", "lo", "hello", true},
	{"string", "ends_with", "lo", "lot", false},
	{"string", "ends_with", "lo", nil, false},
	{"string", "matches", "^a.c$", "abc", true},
	{"string", "matches", "^a.c$", "xabc", false},
	{"string", "matches", "b+", "xbx", true}, // unanchored search
	{"string", "matches", "b+", "xyz", false},
	{"string", "matches", "(?i)ABC", "xabcx", true},
	{"string", "matches", "b+", nil, false},
	{"string", "in", []any{"a", "b"}, "a", true},
	{"string", "in", []any{"a", "b"}, "c", false},
	{"string", "in", []any{"a", "b"}, nil, false},
	{"string", "not_in", []any{"a", "b"}, "c", true},
	{"string", "not_in", []any{"a", "b"}, "b", false},
	{"string", "not_in", []any{"a", "b"}, nil, false},
	{"string", "not_in", []any{"a", "b"}, 1.0, false},
	{"string", "exists", nil, "", true},
	{"string", "exists", nil, nil, false},
	{"string", "exists", nil, 3.0, false},
	{"string", "not_exists", nil, nil, true},
	{"string", "not_exists", nil, "", false},
	{"string", "not_exists", nil, 3.0, false},

	// integer
	{"integer", "eq", 3.0, int64(3), true},
	{"integer", "eq", 3.0, 3.0, true},
	{"integer", "eq", 3.0, jn("3"), true},
	{"integer", "eq", 3.0, jn("3.0"), true},
	{"integer", "eq", 3.0, jn("3e0"), true},
	{"integer", "eq", jn("3"), 3, true},
	{"integer", "eq", 3.0, 3.5, false},
	{"integer", "eq", 3.0, jn("3.5"), false},
	{"integer", "eq", 3.0, "3", false},
	{"integer", "eq", 3.0, nil, false},
	{"integer", "eq", jn("9007199254740993"), jn("9007199254740993"), true},
	{"integer", "eq", jn("9007199254740993"), jn("9007199254740992"), false},
	{"integer", "eq", jn("9007199254740992"), float64(1 << 53), false}, // a float this big is not exact
	{"integer", "eq", jn("9223372036854775807"), int64(math.MaxInt64), true},
	{"integer", "eq", jn("-9223372036854775808"), int64(math.MinInt64), true},
	{"integer", "neq", 3.0, 4.0, true},
	{"integer", "neq", 3.0, 3.0, false},
	{"integer", "neq", 3.0, nil, false},
	{"integer", "neq", 3.0, 3.5, false},
	{"integer", "gt", 10.0, 11.0, true},
	{"integer", "gt", 10.0, 10.0, false},
	{"integer", "gt", 10.0, -11.0, false},
	{"integer", "gt", 10.0, nil, false},
	{"integer", "gte", 10.0, 10.0, true},
	{"integer", "gte", 10.0, 9.0, false},
	{"integer", "lt", -10.0, -11.0, true},
	{"integer", "lt", -10.0, -10.0, false},
	{"integer", "lte", -10.0, -10.0, true},
	{"integer", "lte", -10.0, jn("-9"), false},
	{"integer", "in", []any{1.0, 2.0, jn("3.0")}, 3.0, true},
	{"integer", "in", []any{1.0, 2.0, 3.0}, 4.0, false},
	{"integer", "in", []any{1.0}, nil, false},
	{"integer", "not_in", []any{1.0, 2.0}, 4.0, true},
	{"integer", "not_in", []any{1.0, 2.0}, 2.0, false},
	{"integer", "not_in", []any{1.0, 2.0}, nil, false},
	{"integer", "exists", nil, 0.0, true},
	{"integer", "exists", nil, nil, false},
	{"integer", "not_exists", nil, nil, true},
	{"integer", "not_exists", nil, 0.0, false},

	// number
	{"number", "eq", 0.1, 0.1, true},
	{"number", "eq", 0.1, jn("0.1"), true},
	{"number", "eq", jn("0.1"), 0.1, true},
	{"number", "eq", 2.0, int64(2), true},
	{"number", "eq", 0.0, math.Copysign(0, -1), true},
	{"number", "eq", 0.1, "0.1", false},
	{"number", "eq", 0.1, nil, false},
	{"number", "neq", 0.1, 0.2, true},
	{"number", "neq", 0.1, nil, false},
	{"number", "gt", 10.0, 12.5, true},
	{"number", "gt", 10.0, jn("10"), false},
	{"number", "gt", 10.0, int64(11), true},
	{"number", "gt", 10.0, true, false},
	{"number", "gte", 10.0, 10.0, true},
	{"number", "gte", 10.0, 9.999, false},
	{"number", "lt", -1.5, -1.6, true},
	{"number", "lt", -1.5, -1.5, false},
	{"number", "lte", -1.5, -1.5, true},
	{"number", "lte", -1.5, nil, false},
	{"number", "in", []any{1.5, 2.0}, jn("2.0"), true},
	{"number", "in", []any{1.5, 2.0}, 2.5, false},
	{"number", "not_in", []any{1.5, 2.0}, 2.5, true},
	{"number", "not_in", []any{1.5, 2.0}, 1.5, false},
	{"number", "not_in", []any{1.5, 2.0}, nil, false},
	{"number", "exists", nil, 1e300, true},
	{"number", "not_exists", nil, nil, true},

	// boolean
	{"boolean", "eq", true, true, true},
	{"boolean", "eq", true, false, false},
	{"boolean", "eq", true, nil, false},
	{"boolean", "eq", true, "true", false},
	{"boolean", "eq", false, false, true},
	{"boolean", "neq", true, false, true},
	{"boolean", "neq", true, true, false},
	{"boolean", "neq", true, nil, false},
	{"boolean", "exists", nil, false, true},
	{"boolean", "exists", nil, nil, false},
	{"boolean", "not_exists", nil, nil, true},
	{"boolean", "not_exists", nil, false, false},

	// timestamp
	{"timestamp", "eq", "2026-01-02T03:04:05Z", float64(ts), true},
	{"timestamp", "eq", "2026-01-02T03:04:05Z", jn("1767323045000"), true},
	{"timestamp", "eq", float64(ts), "2026-01-02T03:04:05Z", true},
	{"timestamp", "eq", "2026-01-02T03:04:05Z", "2026-01-02T05:04:05+02:00", true},
	{"timestamp", "eq", "2026-01-02T03:04:05Z", "2026-01-01T21:34:05-05:30", true},
	{"timestamp", "eq", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.0000009Z", true}, // below µs is dropped
	{"timestamp", "eq", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.000001Z", false},
	{"timestamp", "eq", "2026-01-02T03:04:05.123456Z", "2026-01-02T03:04:05.123456789Z", true},
	{"timestamp", "eq", "2026-01-02T03:04:05Z", "2026-01-02 03:04:05Z", false},
	{"timestamp", "eq", "2026-01-02T03:04:05Z", nil, false},
	{"timestamp", "eq", "2026-01-02T03:04:05Z", true, false},
	{"timestamp", "neq", "2026-01-02T03:04:05Z", 0.0, true},
	{"timestamp", "neq", "2026-01-02T03:04:05Z", float64(ts), false},
	{"timestamp", "neq", "2026-01-02T03:04:05Z", nil, false},
	{"timestamp", "gt", 1000.0, "1970-01-01T00:00:01.000001Z", true},
	{"timestamp", "gt", 1000.0, jn("1000"), false},
	{"timestamp", "gt", 1000.0, 1001.0, true},
	{"timestamp", "gt", 1000.0, "garbage", false},
	{"timestamp", "gt", 1000.0, -5.0, false}, // negative epoch ms is not a timestamp
	{"timestamp", "gt", 1000.0, 1000.5, false},
	{"timestamp", "gte", 1000.0, "1970-01-01T00:00:01Z", true},
	{"timestamp", "lt", "1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999999Z", true},
	{"timestamp", "lt", "1970-01-01T00:00:00Z", 0.0, false},
	{"timestamp", "lte", "2024-02-29T00:00:00Z", "2024-02-28T23:59:59Z", true},
	{"timestamp", "lte", "2024-02-29T00:00:00Z", nil, false},
	{"timestamp", "in", []any{"2026-01-01T00:00:00Z", 0.0}, 0.0, true},
	{"timestamp", "in", []any{"2026-01-01T00:00:00Z", 0.0}, "1970-01-01T00:00:00Z", true},
	{"timestamp", "in", []any{"2026-01-01T00:00:00Z", 0.0}, 1.0, false},
	{"timestamp", "not_in", []any{"2026-01-01T00:00:00Z"}, 1.0, true},
	{"timestamp", "not_in", []any{"2026-01-01T00:00:00Z"}, nil, false},
	{"timestamp", "exists", nil, 0.0, true},
	{"timestamp", "not_exists", nil, nil, true},

	// object and array
	{"object", "exists", nil, map[string]any{}, true},
	{"object", "exists", nil, nil, false},
	{"object", "exists", nil, "x", false},
	{"object", "not_exists", nil, nil, true},
	{"object", "not_exists", nil, map[string]any{"a": 1.0}, false},
	{"array", "exists", nil, []any{}, true},
	{"array", "exists", nil, map[string]any{}, false},
	{"array", "not_exists", nil, nil, true},
	{"array", "not_exists", nil, []any{1.0}, false},
}

func TestMatch(t *testing.T) {
	for _, tc := range matchCases {
		c, err := Compile(tc.typ, tc.op, tc.value)
		if err != nil {
			t.Errorf("Compile(%s, %s, %#v): %v", tc.typ, tc.op, tc.value, err)
			continue
		}
		if got := c.Match(tc.actual); got != tc.want {
			t.Errorf("%s %s %#v: Match(%#v) = %v, want %v", tc.typ, tc.op, tc.value, tc.actual, got, tc.want)
		}
		if got := c.Match(nil); got != (tc.op == OpNotExists) {
			t.Errorf("%s %s %#v: Match(nil) = %v; null fails all but not_exists", tc.typ, tc.op, tc.value, got)
		}
		if c.Op() != tc.op || c.FieldType() != tc.typ {
			t.Errorf("Op, FieldType = %s, %s; want %s, %s", c.Op(), c.FieldType(), tc.op, tc.typ)
		}
	}
}

// TestEveryOperatorCovered keeps matchCases honest: each operator on each type it applies
// to has a case (TestMatch checks null for each of them).
func TestEveryOperatorCovered(t *testing.T) {
	for _, typ := range Types() {
		for _, op := range OperatorsFor(typ) {
			if !slices.ContainsFunc(matchCases, func(tc matchCase) bool { return tc.typ == typ && tc.op == op }) {
				t.Errorf("no case for %s on %s", op, typ)
			}
		}
	}
}

// typedMatch evaluates through the typed method the column engine would call for v, which
// must be a value of the field's type.
func typedMatch(c *Condition, v any) (bool, bool) {
	if v == nil {
		return c.MatchNull(), true
	}
	switch c.FieldType() {
	case TypeString:
		s, ok := v.(string)
		return c.MatchString(s), ok
	case TypeInteger:
		n, ok := toInt(v)
		return c.MatchInt(n), ok
	case TypeNumber:
		f, ok := toFloat(v)
		return c.MatchFloat(f), ok
	case TypeBoolean:
		b, ok := v.(bool)
		return c.MatchBool(b), ok
	case TypeTimestamp:
		us, ok := toTime(v)
		return c.MatchTime(us), ok
	case TypeObject:
		_, ok := v.(map[string]any)
		return c.MatchPresent(), ok
	case TypeArray:
		_, ok := v.([]any)
		return c.MatchPresent(), ok
	}
	return false, false
}

// forms returns v in every representation Match accepts for the same value.
func forms(typ string, v any) []any {
	out := []any{v}
	switch typ {
	case TypeInteger:
		if n, ok := toInt(v); ok {
			out = append(out, n, json.Number(jsonInt(n)))
			if n > -maxExactFloat && n < maxExactFloat {
				out = append(out, float64(n), json.Number(jsonInt(n)+".0"))
			}
		}
	case TypeNumber:
		if f, ok := toFloat(v); ok && finite(f) {
			b, _ := json.Marshal(f)
			out = append(out, f, json.Number(b))
		}
	case TypeTimestamp:
		if us, ok := toTime(v); ok && us >= 0 && us%1000 == 0 {
			out = append(out, float64(us/1000), json.Number(jsonInt(us/1000)))
		}
	}
	return out
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestTypedAgreesWithMatch(t *testing.T) {
	for _, tc := range matchCases {
		c, err := Compile(tc.typ, tc.op, tc.value)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range forms(tc.typ, tc.actual) {
			if got := c.Match(v); got != tc.want {
				t.Errorf("%s %s %#v: Match(%#v) = %v, want %v (same value as %#v)", tc.typ, tc.op, tc.value, v, got, tc.want, tc.actual)
			}
			if typed, ok := typedMatch(c, v); ok && typed != tc.want {
				t.Errorf("%s %s %#v: typed match of %#v = %v, want %v", tc.typ, tc.op, tc.value, v, typed, tc.want)
			}
		}
	}
}

// TestTypedMethodsRefuseOtherTypes: a typed method called for the wrong field type fails
// closed instead of reading a zero operand.
func TestTypedMethodsRefuseOtherTypes(t *testing.T) {
	c, _ := Compile(TypeString, OpNeq, "x")
	if c.MatchInt(1) || c.MatchFloat(1) || c.MatchBool(true) || c.MatchTime(1) || c.MatchPresent() {
		t.Error("a string condition matched a value of another type")
	}
	n, _ := Compile(TypeInteger, OpNeq, 1.0)
	if n.MatchString("x") || n.MatchTime(2) || n.MatchFloat(2) {
		t.Error("an integer condition matched a value of another type")
	}
	if !n.MatchInt(2) || n.MatchNull() {
		t.Error("integer neq 1 on 2, or on null")
	}
}

func TestCompileErrors(t *testing.T) {
	long := make([]any, 1001)
	for i := range long {
		long[i] = "x"
	}
	for _, tc := range []struct {
		typ, op string
		value   any
		part    string
		message string
	}{
		{"boolean", "gt", true, "op", "gt does not apply to a field of type boolean"},
		{"object", "eq", map[string]any{}, "op", "eq does not apply to a field of type object"},
		{"integer", "contains", "1", "op", "contains does not apply to a field of type integer"},
		{"number", "matches", "1", "op", "matches does not apply to a field of type number"},
		{"string", "like", "x", "op", "must be one of contains, ends_with, eq, exists, gt, gte, in, lt, lte, matches, neq, not_contains, not_exists, not_in, starts_with"},
		{"money", "eq", 1.0, "type", "must be one of string, integer, number, boolean, timestamp, object, array"},
		{"integer", "eq", 3.5, "value", "must be an integer"},
		{"integer", "eq", float64(1 << 53), "value", "must be an integer"},
		{"integer", "eq", jn("9223372036854775808"), "value", "must be an integer"},
		{"integer", "eq", jn("3.5"), "value", "must be an integer"},
		{"integer", "eq", "3", "value", "must be an integer"},
		{"integer", "eq", true, "value", "must be an integer"},
		{"number", "eq", "1", "value", "must be a number"},
		{"number", "eq", jn("1e400"), "value", "must be a number"},
		{"number", "eq", math.Inf(1), "value", "must be a number"},
		{"number", "eq", math.NaN(), "value", "must be a number"},
		{"number", "eq", jn("abc"), "value", "must be a number"},
		{"timestamp", "eq", "2026-13-01T00:00:00Z", "value", "must be an RFC 3339 timestamp or epoch milliseconds"},
		{"timestamp", "eq", "2026-02-29T00:00:00Z", "value", "must be an RFC 3339 timestamp or epoch milliseconds"},
		{"timestamp", "eq", "yesterday", "value", "must be an RFC 3339 timestamp or epoch milliseconds"},
		{"timestamp", "eq", -1.0, "value", "must be an RFC 3339 timestamp or epoch milliseconds"},
		{"timestamp", "eq", 1.5, "value", "must be an RFC 3339 timestamp or epoch milliseconds"},
		{"timestamp", "eq", jn("9223372036854775807"), "value", "must be an RFC 3339 timestamp or epoch milliseconds"},
		{"timestamp", "eq", true, "value", "must be an RFC 3339 timestamp or epoch milliseconds"},
		{"string", "gt", true, "value", "must be a string"},
		{"string", "contains", 3.0, "value", "must be a string"},
		{"string", "not_contains", nil, "value", "is required for not_contains"},
		{"boolean", "eq", "true", "value", "must be a boolean"},
		{"string", "eq", nil, "value", "is required for eq"},
		{"string", "exists", "x", "value", "must be left out for exists"},
		{"array", "not_exists", false, "value", "must be left out for not_exists"},
		{"string", "in", []any{}, "value", "must be an array of 1 to 1000 values for in"},
		{"string", "not_in", "a", "value", "must be an array of 1 to 1000 values for not_in"},
		{"string", "in", long, "value", "must be an array of 1 to 1000 values for in"},
		{"integer", "in", []any{1.0, 2.0, 3.0, "x"}, "value[3]", "must be an integer"},
		{"timestamp", "not_in", []any{nil}, "value[0]", "must be an RFC 3339 timestamp or epoch milliseconds"},
		{"string", "matches", "(", "value", "must be a valid RE2 pattern of at most 256 characters: missing closing ): `(`"},
		{"string", "matches", `\8`, "value", "must be a valid RE2 pattern of at most 256 characters: invalid escape sequence: `\\8`"},
		{"string", "matches", strings.Repeat("é", 257), "value", "must be a valid RE2 pattern of at most 256 characters: it has 257"},
		{"string", "matches", 3.0, "value", "must be a string holding an RE2 pattern of at most 256 characters"},
	} {
		c, err := Compile(tc.typ, tc.op, tc.value)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Compile(%s, %s, %v) = %v, %v; want an *Error", tc.typ, tc.op, tc.value, c, err)
			continue
		}
		if e.Part != tc.part || e.Message != tc.message {
			t.Errorf("Compile(%s, %s, %v):\n got %s: %s\nwant %s: %s", tc.typ, tc.op, tc.value, e.Part, e.Message, tc.part, tc.message)
		}
		if c != nil {
			t.Errorf("Compile returned a condition with an error")
		}
	}
}

func TestCompileLimits(t *testing.T) {
	list := make([]any, MaxList)
	for i := range list {
		list[i] = float64(i % 7)
	}
	c, err := Compile(TypeInteger, OpIn, list)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Operand(); !slices.Equal(got.([]int64), []int64{0, 1, 2, 3, 4, 5, 6}) {
		t.Errorf("Operand = %v, want the list sorted without repeats", got)
	}
	if _, err := Compile(TypeString, OpMatches, strings.Repeat("é", MaxPattern)); err != nil {
		t.Errorf("a pattern of 256 characters (512 bytes): %v", err)
	}
	if _, err := Compile(TypeInteger, OpEq, float64(1<<53-1)); err != nil {
		t.Errorf("2^53-1 as a float: %v", err)
	}
	if _, err := Compile(TypeTimestamp, OpEq, jn("9223372036854775")); err != nil {
		t.Errorf("the largest epoch ms: %v", err)
	}
}

func TestOperand(t *testing.T) {
	for _, tc := range []struct {
		typ, op string
		value   any
		want    any
	}{
		{"string", "eq", "a", "a"},
		{"string", "matches", "^a", "^a"},
		{"integer", "gt", jn("9007199254740993"), int64(9007199254740993)},
		{"number", "lt", jn("2.5"), 2.5},
		{"boolean", "neq", false, false},
		{"timestamp", "gte", "2026-01-02T03:04:05.1234567+00:00", int64(ts*1000 + 123456)},
		{"timestamp", "gte", float64(ts), int64(ts * 1000)},
		{"object", "exists", nil, nil},
	} {
		c, err := Compile(tc.typ, tc.op, tc.value)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Operand(); got != tc.want {
			t.Errorf("%s %s %v: Operand = %#v, want %#v", tc.typ, tc.op, tc.value, got, tc.want)
		}
	}
	c, _ := Compile(TypeString, OpIn, []any{"b", "a", "b"})
	if got := c.Operand().([]string); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("in Operand = %v", got)
	}
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct {
		typ, op string
		value   any
		want    []string
	}{
		{"string", "eq", "NL", []string{"NL"}},
		{"string", "in", []any{"NL", "DE", "NL"}, []string{"DE", "NL"}},
		{"string", "neq", "NL", nil},
		{"string", "not_in", []any{"NL"}, nil},
		{"string", "contains", "NL", nil},
		{"string", "exists", nil, nil},
		{"integer", "eq", 1.0, nil},
	} {
		c, err := Compile(tc.typ, tc.op, tc.value)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Strings(); !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s %s %v: Strings = %#v, want %#v", tc.typ, tc.op, tc.value, got, tc.want)
		}
	}
}

func TestBounds(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		typ, op string
		value   any
		want    Range
		ok      bool
	}{
		{"number", "gt", 10.0, Range{10, inf, false, true}, true},
		{"number", "gte", 10.0, Range{10, inf, true, true}, true},
		{"number", "lt", 10.0, Range{-inf, 10, true, false}, true},
		{"number", "lte", 10.0, Range{-inf, 10, true, true}, true},
		{"number", "eq", 2.5, Range{2.5, 2.5, true, true}, true},
		{"number", "in", []any{3.0, -1.0, 2.0}, Range{-1, 3, true, true}, true},
		{"number", "neq", 1.0, Range{}, false},
		{"number", "not_in", []any{1.0}, Range{}, false},
		{"number", "exists", nil, Range{}, false},
		{"integer", "gt", 10.0, Range{11, inf, true, true}, true},
		{"integer", "lt", 10.0, Range{-inf, 9, true, true}, true},
		{"integer", "lte", jn("-3"), Range{-inf, -3, true, true}, true},
		{"integer", "gt", jn("9223372036854775807"), Range{inf, -inf, false, false}, true},
		{"integer", "lt", jn("-9223372036854775808"), Range{inf, -inf, false, false}, true},
		{"integer", "gte", jn("-9223372036854775808"), Range{-inf, inf, true, true}, true},
		{"timestamp", "gte", 1.0, Range{1000, inf, true, true}, true},
		{"timestamp", "in", []any{2.0, 1.0}, Range{1000, 2000, true, true}, true},
		{"string", "gt", "a", Range{}, false},
		{"boolean", "eq", true, Range{}, false},
	} {
		c, err := Compile(tc.typ, tc.op, tc.value)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := c.Bounds()
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s %s %v: Bounds = %+v, %v; want %+v, %v", tc.typ, tc.op, tc.value, got, ok, tc.want, tc.ok)
		}
	}
}

// TestBoundsNeverSkipAMatch: near and beyond 2^53, where int64 to float64 rounds, a block
// skipped by Overlaps holds no matching value.
func TestBoundsNeverSkipAMatch(t *testing.T) {
	var edges []int64
	for _, base := range []int64{0, 1 << 53, -(1 << 53), 1 << 60, math.MaxInt64 - 8, math.MinInt64 + 8} {
		for d := int64(-8); d <= 8; d++ {
			edges = append(edges, base+d)
		}
	}
	for _, op := range []string{OpEq, OpGt, OpGte, OpLt, OpLte} {
		for _, operand := range edges {
			c, err := Compile(TypeInteger, op, json.Number(jsonInt(operand)))
			if err != nil {
				t.Fatal(err)
			}
			r, _ := c.Bounds()
			for i, lo := range edges {
				for _, hi := range edges[i:] {
					if hi < lo || uint64(hi)-uint64(lo) > 16 {
						continue
					}
					if r.Overlaps(float64(lo), float64(hi)) {
						continue
					}
					for v := lo; ; v++ {
						if c.MatchInt(v) {
							t.Fatalf("%s %d: block [%d, %d] skipped but holds %d", op, operand, lo, hi, v)
						}
						if v == hi {
							break
						}
					}
				}
			}
		}
	}
}

func TestOperatorTables(t *testing.T) {
	if got := OperatorsFor(TypeBoolean); !slices.Equal(got, []string{"eq", "exists", "neq", "not_exists"}) {
		t.Errorf("boolean: %v", got)
	}
	if got := OperatorsFor(TypeArray); !slices.Equal(got, []string{"exists", "not_exists"}) {
		t.Errorf("array: %v", got)
	}
	if got := OperatorsFor(TypeString); len(got) != 15 {
		t.Errorf("string takes every operator, got %v", got)
	}
	if got := OperatorsFor("money"); len(got) != 0 {
		t.Errorf("unknown type: %v", got)
	}
	if !Known("not_contains") || !Known("matches") || Known("like") {
		t.Error("Known")
	}
	if !Applies("matches", TypeString) || Applies("matches", TypeInteger) || Applies("like", TypeString) {
		t.Error("Applies")
	}
	if !TakesString("matches") || !TakesString("not_contains") || TakesString("eq") {
		t.Error("TakesString")
	}
	if TakesValue("exists") || !TakesValue("matches") || !TakesList("not_in") || TakesList("eq") {
		t.Error("TakesValue, TakesList")
	}
}

// TestMatchDoesNotAllocate: the per-record path allocates nothing, for decoded JSON values
// as well as typed ones.
func TestMatchDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, tc := range matchCases {
		c, err := Compile(tc.typ, tc.op, tc.value)
		if err != nil {
			t.Fatal(err)
		}
		actual := tc.actual
		if n := testing.AllocsPerRun(20, func() {
			c.Match(actual)
			typedMatch(c, actual)
		}); n != 0 {
			t.Errorf("%s %s %v on %#v: %v allocations", tc.typ, tc.op, tc.value, actual, n)
		}
	}
}
