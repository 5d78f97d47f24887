package cond

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// Error is why Compile refused a condition. Part says which part of the condition is wrong
// ("op", "type", "value" or "value[3]" for an element of a list) so callers can prefix
// their own path ("query.filters[0]." + Part); Message is safe to show to the user.
type Error struct {
	Part    string
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Part + ": " + e.Message }

func errorf(part, format string, args ...any) *Error {
	return &Error{Part: part, Message: fmt.Sprintf(format, args...)}
}

// Condition is one compiled condition: an operator, the field type it applies to and its
// value, checked and normalised once so that evaluating it allocates nothing. A Condition
// is immutable after Compile and safe for concurrent use.
type Condition struct {
	op   opcode
	kind kind
	str  string  // string operand; the pattern for matches
	num  int64   // integer operand, or timestamp operand in µs since the epoch
	flt  float64 // number operand
	bl   bool    // boolean operand

	// Lists for in and not_in, sorted and without repeats so lookups are binary searches.
	// strs also holds the single operand of eq on a string field, for Strings.
	strs []string
	nums []int64
	flts []float64

	re  *regexp.Regexp
	raw any // the value as given, for Explain
}

// Compile type-checks a condition against a field type and compiles it, once, for Match and
// the typed Match methods. value is a decoded JSON value: string, float64 or json.Number,
// bool, nil or []any (in, not_in). The error is always an *Error.
//
// Values are checked per field type:
//   - integer: an integral number (3.0 is 3, 3.5 is refused); a float64 must be below 2^53
//     in size, a json.Number is read exactly as an int64 first.
//   - number: any finite number.
//   - timestamp: an RFC 3339 string (with an optional fraction) or non-negative epoch
//     milliseconds, normalised to µs since the epoch (digits below µs are dropped).
//   - string, boolean: a string, a boolean.
//
// contains, not_contains, starts_with and ends_with take a string and compare bytes, case
// sensitively. matches takes an RE2 pattern (Go's regexp) of at most MaxPattern characters;
// it is an unanchored search, as in SQL's ~ and ClickHouse's match(): use ^ and $ to anchor.
// in and not_in take 1 to MaxList values of the field's type. exists and not_exists take
// no value.
func Compile(fieldType, op string, value any) (*Condition, error) {
	o, ok := operators[op]
	if !ok {
		return nil, errorf("op", "must be one of %s", strings.Join(Operators(), ", "))
	}
	k, ok := kinds[fieldType]
	if !ok {
		return nil, errorf("type", "must be one of %s", strings.Join(all, ", "))
	}
	if !slices.Contains(o.types, fieldType) {
		return nil, errorf("op", "%s does not apply to a field of type %s", op, fieldType)
	}
	c := &Condition{op: o.code, kind: k, raw: value}
	switch {
	case !TakesValue(op):
		if value != nil {
			return nil, errorf("value", "must be left out for %s", op)
		}
	case value == nil:
		return nil, errorf("value", "is required for %s", op)
	case TakesList(op):
		list, ok := value.([]any)
		if !ok || len(list) == 0 || len(list) > MaxList {
			return nil, errorf("value", "must be an array of 1 to %d values for %s", MaxList, op)
		}
		for i, v := range list {
			var x Condition
			if msg := x.setOperand(k, v); msg != "" {
				return nil, errorf(fmt.Sprintf("value[%d]", i), "%s", msg)
			}
			switch k {
			case kindString:
				c.strs = append(c.strs, x.str)
			case kindInteger, kindTimestamp:
				c.nums = append(c.nums, x.num)
			case kindNumber:
				c.flts = append(c.flts, x.flt)
			}
		}
		c.strs = sortUnique(c.strs)
		c.nums = sortUnique(c.nums)
		c.flts = sortUnique(c.flts)
	case o.code == opMatches:
		s, ok := value.(string)
		if !ok {
			return nil, errorf("value", "must be a string holding an RE2 pattern of at most %d characters", MaxPattern)
		}
		if n := utf8.RuneCountInString(s); n > MaxPattern {
			return nil, errorf("value", "must be a valid RE2 pattern of at most %d characters: it has %d", MaxPattern, n)
		}
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, errorf("value", "must be a valid RE2 pattern of at most %d characters: %s", MaxPattern, patternReason(err))
		}
		c.str, c.re = s, re
	case TakesString(op):
		s, ok := value.(string)
		if !ok {
			return nil, errorf("value", "must be a string")
		}
		c.str = s
	default:
		if msg := c.setOperand(k, value); msg != "" {
			return nil, errorf("value", "%s", msg)
		}
		if k == kindString && o.code == opEq {
			c.strs = []string{c.str}
		}
	}
	return c, nil
}

// setOperand checks v against the field kind and stores it normalised; it returns the
// user-facing reason when v does not fit.
func (c *Condition) setOperand(k kind, v any) string {
	switch k {
	case kindString:
		s, ok := v.(string)
		if !ok {
			return "must be a string"
		}
		c.str = s
	case kindBoolean:
		b, ok := v.(bool)
		if !ok {
			return "must be a boolean"
		}
		c.bl = b
	case kindInteger:
		n, ok := toInt(v)
		if !ok {
			return "must be an integer"
		}
		c.num = n
	case kindNumber:
		f, ok := toFloat(v)
		if !ok || !finite(f) {
			return "must be a number"
		}
		c.flt = f
	case kindTimestamp:
		us, ok := toTime(v)
		if !ok {
			return "must be an RFC 3339 timestamp or epoch milliseconds"
		}
		c.num = us
	default:
		return "cannot be compared for a field of this type"
	}
	return ""
}

// patternReason turns a regexp error into the part a user can act on.
func patternReason(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return fmt.Sprintf("%s: `%s`", se.Code, se.Expr)
	}
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

func sortUnique[T cmp.Ordered](s []T) []T {
	if s == nil {
		return nil
	}
	slices.Sort(s)
	return slices.Compact(s)
}
