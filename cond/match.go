package cond

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Evaluation follows SQL null semantics (CONTRACTS §7): a missing or null value fails every
// operator except not_exists, so neq, not_in and not_contains fail on null as well. A
// present value of the wrong type (a string in an integer field) matches nothing, not even
// exists or not_exists: it is neither a value of the field nor missing. None of the Match
// methods allocate.

// Match reports whether a decoded JSON value meets the condition; nil means missing or null.
// Integer fields take int64, int, float64 or json.Number holding an integer; number fields
// any number; timestamp fields an RFC 3339 string or epoch milliseconds; object fields a
// map[string]any and array fields a []any.
func (c *Condition) Match(v any) bool {
	if v == nil {
		return c.MatchNull()
	}
	switch c.kind {
	case kindString:
		if s, ok := v.(string); ok {
			return c.MatchString(s)
		}
	case kindInteger:
		if n, ok := toInt(v); ok {
			return c.MatchInt(n)
		}
	case kindNumber:
		if f, ok := toFloat(v); ok {
			return c.MatchFloat(f)
		}
	case kindBoolean:
		if b, ok := v.(bool); ok {
			return c.MatchBool(b)
		}
	case kindTimestamp:
		if us, ok := toTime(v); ok {
			return c.MatchTime(us)
		}
	case kindObject:
		if _, ok := v.(map[string]any); ok {
			return c.MatchPresent()
		}
	case kindArray:
		if _, ok := v.([]any); ok {
			return c.MatchPresent()
		}
	}
	return false
}

// MatchNull is the result for a missing or null value: true only for not_exists. The
// column engine uses it once per block for its null rows.
func (c *Condition) MatchNull() bool { return c.op == opNotExists }

// MatchPresent is the result for a present, non-null value when only its presence is
// known: true for exists, false otherwise. Object and array fields, which only take exists
// and not_exists, are evaluated with it.
func (c *Condition) MatchPresent() bool { return c.op == opExists }

// MatchString evaluates the condition on a string field's value. Comparison is byte-wise
// (gt is Go's string order) and case-sensitive. It is false for a field of another type.
func (c *Condition) MatchString(s string) bool {
	if c.kind != kindString {
		return false
	}
	switch c.op {
	case opContains:
		return strings.Contains(s, c.str)
	case opNotContains:
		return !strings.Contains(s, c.str)
	case opStartsWith:
		return strings.HasPrefix(s, c.str)
	case opEndsWith:
		return strings.HasSuffix(s, c.str)
	case opMatches:
		return c.re.MatchString(s)
	}
	return matchOrdered(c.op, s, c.str, c.strs)
}

// MatchInt evaluates the condition on an integer field's value. It is false for a field of
// another type.
func (c *Condition) MatchInt(n int64) bool {
	if c.kind != kindInteger {
		return false
	}
	return c.matchInt(n)
}

// MatchTime evaluates the condition on a timestamp field's value in µs since the epoch. It
// is false for a field of another type.
func (c *Condition) MatchTime(us int64) bool {
	if c.kind != kindTimestamp {
		return false
	}
	return c.matchInt(us)
}

func (c *Condition) matchInt(n int64) bool { return matchOrdered(c.op, n, c.num, c.nums) }

// MatchFloat evaluates the condition on a number field's value. NaN, which JSON cannot
// carry, matches nothing but exists. It is false for a field of another type.
func (c *Condition) MatchFloat(f float64) bool {
	if c.kind != kindNumber {
		return false
	}
	if c.op == opExists {
		return true
	}
	if math.IsNaN(f) {
		return false
	}
	return matchOrdered(c.op, f, c.flt, c.flts)
}

// matchOrdered evaluates the operators every ordered type shares: comparisons against operand,
// membership in list (sorted), and exists.
func matchOrdered[T cmp.Ordered](op opcode, v, operand T, list []T) bool {
	switch op {
	case opEq:
		return v == operand
	case opNeq:
		return v != operand
	case opGt:
		return v > operand
	case opGte:
		return v >= operand
	case opLt:
		return v < operand
	case opLte:
		return v <= operand
	case opIn:
		_, found := slices.BinarySearch(list, v)
		return found
	case opNotIn:
		_, found := slices.BinarySearch(list, v)
		return !found
	case opExists:
		return true
	}
	return false
}

// MatchBool evaluates the condition on a boolean field's value. It is false for a field of
// another type.
func (c *Condition) MatchBool(b bool) bool {
	if c.kind != kindBoolean {
		return false
	}
	switch c.op {
	case opEq:
		return b == c.bl
	case opNeq:
		return b != c.bl
	case opExists:
		return true
	}
	return false
}

// Op returns the operator name, one of the Op constants.
func (c *Condition) Op() string { return opNames[c.op] }

// FieldType returns the field type the condition was compiled for, one of the Type constants.
func (c *Condition) FieldType() string { return all[c.kind-1] }

// Operand returns the compiled value, normalised: a string (also the pattern of matches),
// int64 (integer; timestamp in µs since the epoch), float64 or bool; for in and not_in a
// sorted []string, []int64 or []float64 without repeats; nil for exists and not_exists.
// External engines bind it as a query parameter. Slices are shared: do not modify them.
func (c *Condition) Operand() any {
	switch c.op {
	case opExists, opNotExists:
		return nil
	case opIn, opNotIn:
		switch c.kind {
		case kindString:
			return c.strs
		case kindNumber:
			return c.flts
		default:
			return c.nums
		}
	}
	switch c.kind {
	case kindInteger, kindTimestamp:
		return c.num
	case kindNumber:
		return c.flt
	case kindBoolean:
		return c.bl
	}
	return c.str
}

// Strings returns the strings an eq or in condition on a string field wants, sorted and
// without repeats, so the engine can skip a block whose dictionary holds none of them. It
// is nil for every other condition. The slice is shared: do not modify it.
func (c *Condition) Strings() []string {
	if c.kind != kindString || (c.op != opEq && c.op != opIn) {
		return nil
	}
	return c.strs
}

// Range is the interval of values a condition can match on an integer, number or timestamp
// field, for skipping a block by its min and max. Lo and Hi are -Inf and +Inf when
// unbounded. For integer and timestamp fields (µs) both ends are inclusive and rounded
// outwards to a float64, so comparing a block's int64 min and max converted to float64
// never skips a block that holds a match; beyond 2^53 it may keep one that does not.
type Range struct {
	Lo, Hi                   float64
	LoInclusive, HiInclusive bool
}

// Overlaps reports whether a block whose values all lie in [min, max] may hold a value in
// the range; false means the block can be skipped.
func (r Range) Overlaps(min, max float64) bool {
	above := max > r.Lo || (r.LoInclusive && max == r.Lo)
	below := min < r.Hi || (r.HiInclusive && min == r.Hi)
	return above && below
}

// Bounds returns the Range of an eq, gt, gte, lt, lte or in condition on an integer, number
// or timestamp field; ok is false for every other condition (neq and not_in exclude too
// little to skip anything by min and max).
func (c *Condition) Bounds() (r Range, ok bool) {
	inf := math.Inf(1)
	switch c.kind {
	case kindNumber:
		r = Range{Lo: -inf, Hi: inf, LoInclusive: true, HiInclusive: true}
		switch c.op {
		case opEq:
			r.Lo, r.Hi = c.flt, c.flt
		case opGt, opGte:
			r.Lo, r.LoInclusive = c.flt, c.op == opGte
		case opLt, opLte:
			r.Hi, r.HiInclusive = c.flt, c.op == opLte
		case opIn:
			r.Lo, r.Hi = c.flts[0], c.flts[len(c.flts)-1]
		default:
			return Range{}, false
		}
		return r, true
	case kindInteger, kindTimestamp:
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		switch c.op {
		case opEq:
			lo, hi = c.num, c.num
		case opGte:
			lo = c.num
		case opGt:
			if c.num == math.MaxInt64 {
				return Range{Lo: inf, Hi: -inf}, true // nothing is greater
			}
			lo = c.num + 1
		case opLte:
			hi = c.num
		case opLt:
			if c.num == math.MinInt64 {
				return Range{Lo: inf, Hi: -inf}, true
			}
			hi = c.num - 1
		case opIn:
			lo, hi = c.nums[0], c.nums[len(c.nums)-1]
		default:
			return Range{}, false
		}
		r = Range{Lo: -inf, Hi: inf, LoInclusive: true, HiInclusive: true}
		if lo != math.MinInt64 {
			r.Lo = outward(lo, -inf)
		}
		if hi != math.MaxInt64 {
			r.Hi = outward(hi, inf)
		}
		return r, true
	}
	return Range{}, false
}

// outward converts n to a float64 that lies at or beyond n in the direction of toward:
// float64(n) rounds to nearest, which beyond 2^53 may land on the wrong side of n, so step
// one float further out there.
func outward(n int64, toward float64) float64 {
	f := float64(n)
	if n > maxExactFloat || n < -maxExactFloat {
		f = math.Nextafter(f, toward)
	}
	return f
}
