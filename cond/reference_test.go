package cond

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The reference evaluator below is written from CONTRACTS §6 and §7 alone, the slow and
// obvious way (strconv, time.Parse, linear scans, a regexp compiled per call), sharing no
// code with the package, so the differential test catches a fast path that drifts.

var refTypes = map[string][]string{
	"eq": {"string", "integer", "number", "boolean", "timestamp"}, "neq": {"string", "integer", "number", "boolean", "timestamp"},
	"gt": {"string", "integer", "number", "timestamp"}, "gte": {"string", "integer", "number", "timestamp"},
	"lt": {"string", "integer", "number", "timestamp"}, "lte": {"string", "integer", "number", "timestamp"},
	"in": {"string", "integer", "number", "timestamp"}, "not_in": {"string", "integer", "number", "timestamp"},
	"contains": {"string"}, "not_contains": {"string"}, "starts_with": {"string"}, "ends_with": {"string"}, "matches": {"string"},
	"exists":     {"string", "integer", "number", "boolean", "timestamp", "object", "array"},
	"not_exists": {"string", "integer", "number", "boolean", "timestamp", "object", "array"},
}

// refTime is an instant as (seconds, microseconds) since the epoch.
type refTime struct{ sec, usec int64 }

// refValue reads v as a value of typ: string, int64, float64, bool, refTime, or true for
// object and array.
func refValue(typ string, v any) (any, bool) {
	switch typ {
	case "string":
		s, ok := v.(string)
		return s, ok
	case "boolean":
		b, ok := v.(bool)
		return b, ok
	case "integer":
		return refInt(v)
	case "number":
		var f float64
		switch n := v.(type) {
		case float64:
			f = n
		case int64:
			f = float64(n)
		case int:
			f = float64(n)
		case json.Number:
			var err error
			if f, err = strconv.ParseFloat(string(n), 64); err != nil {
				return nil, false
			}
		default:
			return nil, false
		}
		return f, true
	case "timestamp":
		if s, ok := v.(string); ok {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return nil, false
			}
			return refTime{t.Unix(), int64(t.Nanosecond()) / 1000}, true
		}
		if _, ok := v.(bool); ok {
			return nil, false
		}
		n, ok := refInt(v)
		if !ok || n.(int64) < 0 || n.(int64) > math.MaxInt64/1000 {
			return nil, false
		}
		t := time.UnixMilli(n.(int64))
		return refTime{t.Unix(), int64(t.Nanosecond()) / 1000}, true
	case "object":
		_, ok := v.(map[string]any)
		return true, ok
	case "array":
		_, ok := v.([]any)
		return true, ok
	}
	return nil, false
}

func refInt(v any) (any, bool) {
	fromFloat := func(f float64) (any, bool) {
		if math.Floor(f) != f || f >= 1<<53 || f <= -(1<<53) {
			return nil, false
		}
		return int64(f), true
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return fromFloat(n)
	case json.Number:
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return i, true
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return nil, false
		}
		return fromFloat(f)
	}
	return nil, false
}

// refCompare returns -1, 0 or 1; NaN compares as "not equal and unordered" (2).
func refCompare(a, b any) int {
	switch a := a.(type) {
	case string:
		return strings.Compare(a, b.(string))
	case int64:
		b := b.(int64)
		if a < b {
			return -1
		} else if a > b {
			return 1
		}
		return 0
	case float64:
		b := b.(float64)
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		case a == b:
			return 0
		}
		return 2
	case refTime:
		b := b.(refTime)
		if a.sec != b.sec {
			return refCompare(a.sec, b.sec)
		}
		return refCompare(a.usec, b.usec)
	case bool:
		if a == b.(bool) {
			return 0
		}
		return 1 // unequal; only eq and neq apply to booleans
	}
	panic(fmt.Sprintf("refCompare %T", a))
}

// refValid reports whether a condition is valid.
func refValid(typ, op string, value any) bool {
	types, ok := refTypes[op]
	if !ok {
		return false
	}
	applies := false
	for _, t := range types {
		applies = applies || t == typ
	}
	if !applies {
		return false
	}
	switch op {
	case "exists", "not_exists":
		return value == nil
	case "in", "not_in":
		list, ok := value.([]any)
		if !ok || len(list) < 1 || len(list) > 1000 {
			return false
		}
		for _, v := range list {
			if _, ok := refValue(typ, v); !ok {
				return false
			}
		}
		return true
	case "contains", "not_contains", "starts_with", "ends_with":
		_, ok := value.(string)
		return ok
	case "matches":
		s, ok := value.(string)
		if !ok || utf8.RuneCountInString(s) > 256 {
			return false
		}
		_, err := regexp.Compile(s)
		return err == nil
	}
	if value == nil {
		return false
	}
	x, ok := refValue(typ, value)
	if f, isFloat := x.(float64); isFloat && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return false
	}
	return ok
}

// refMatch evaluates a valid condition on actual.
func refMatch(typ, op string, value, actual any) bool {
	if actual == nil {
		return op == "not_exists"
	}
	a, ok := refValue(typ, actual)
	if !ok {
		return false
	}
	switch op {
	case "exists":
		return true
	case "not_exists":
		return false
	case "in", "not_in":
		found := false
		for _, v := range value.([]any) {
			w, _ := refValue(typ, v)
			found = found || refCompare(a, w) == 0
		}
		return found == (op == "in")
	case "contains":
		return strings.Contains(a.(string), value.(string))
	case "not_contains":
		return !strings.Contains(a.(string), value.(string))
	case "starts_with":
		return strings.HasPrefix(a.(string), value.(string))
	case "ends_with":
		return strings.HasSuffix(a.(string), value.(string))
	case "matches":
		return regexp.MustCompile(value.(string)).MatchString(a.(string))
	}
	w, _ := refValue(typ, value)
	c := refCompare(a, w)
	switch op {
	case "eq":
		return c == 0
	case "neq":
		return c == -1 || c == 1
	case "gt":
		return c == 1
	case "gte":
		return c == 1 || c == 0
	case "lt":
		return c == -1
	case "lte":
		return c == -1 || c == 0
	}
	panic(op)
}

// Pools of values likely to collide, so random conditions both match and fail often.
var (
	poolStrings = []any{"", "a", "ab", "b", "ba", "abc", "B", "NL", "é", "a+", "(", "^a", "b$", "[ab]+c",
		"2026-01-02T03:04:05Z", "2026-01-02T05:04:05+02:00", "2026-01-02T03:04:05.000001Z", "1970-01-01T00:00:01Z",
		"2024-02-29T12:00:00.5-00:30", "2026-01-02T03:04:05,5Z", "2026-02-30T00:00:00Z"}
	poolNumbers = []any{0.0, 1.0, -1.0, 1.5, 3.0, 1000.0, 1001.0, float64(ts), float64(1<<53 - 1), float64(1 << 53), 1e300, -0.5,
		jn("0"), jn("3"), jn("3.0"), jn("1.5"), jn("1000"), jn("1767323045000"), jn("9007199254740993"),
		jn("9223372036854775807"), jn("-9223372036854775808"), jn("9223372036854775808"), jn("1e3"), jn("-1"),
		int64(3), int64(-1), 3}
	poolOther = []any{true, false, nil, map[string]any{}, map[string]any{"a": 1.0}, []any{}, []any{"a"}}
)

func randomValue(r *rand.Rand) any {
	switch r.IntN(10) {
	case 0, 1, 2, 3:
		return poolStrings[r.IntN(len(poolStrings))]
	case 4, 5, 6, 7:
		return poolNumbers[r.IntN(len(poolNumbers))]
	}
	return poolOther[r.IntN(len(poolOther))]
}

func randomList(r *rand.Rand, typ string) []any {
	list := make([]any, 1+r.IntN(4))
	for i := range list {
		for {
			list[i] = randomValue(r)
			if _, ok := refValue(typ, list[i]); ok || r.IntN(20) == 0 {
				break
			}
		}
	}
	return list
}

// TestDifferential checks Compile's verdict and Match against the reference evaluator over
// seeded random conditions and values.
func TestDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 2026))
	types := append(Types(), "money")
	ops := append(Operators(), "like")
	compiled := 0
	for range 20000 {
		typ, op := types[r.IntN(len(types))], ops[r.IntN(len(ops))]
		var value any
		switch {
		case TakesList(op) && r.IntN(10) > 0:
			value = randomList(r, typ)
		case !TakesValue(op) && r.IntN(4) > 0:
			value = nil
		default:
			value = randomValue(r)
		}
		c, err := Compile(typ, op, value)
		if want := refValid(typ, op, value); (err == nil) != want {
			t.Fatalf("Compile(%s, %s, %#v) = %v; reference says valid %v", typ, op, value, err, want)
		}
		if err != nil {
			continue
		}
		compiled++
		for range 8 {
			actual := randomValue(r)
			want := refMatch(typ, op, value, actual)
			if got := c.Match(actual); got != want {
				t.Fatalf("%s %s %#v: Match(%#v) = %v, reference %v", typ, op, value, actual, got, want)
			}
			if typed, ok := typedMatch(c, actual); ok && typed != want {
				t.Fatalf("%s %s %#v: typed match of %#v = %v, reference %v", typ, op, value, actual, typed, want)
			}
			if c.Explain(actual, want) == "" {
				t.Fatal("empty explanation")
			}
		}
	}
	if compiled < 2000 {
		t.Errorf("only %d random conditions compiled; the generator drifted", compiled)
	}
}
