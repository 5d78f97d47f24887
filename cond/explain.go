package cond

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits that keep an explanation readable whatever the record holds.
const (
	explainMaxRunes = 100 // of a shown string or JSON value
	explainMaxList  = 10  // values of an in list shown before "… N more"
)

// Explain puts a result in words for alert simulations: what the value is, how it relates to
// the condition's value, and the verdict. The sentence has no subject so the caller puts
// the field's name first (Condition does not know it):
//
//	field + " " + c.Explain(actual, c.Match(actual))
//	amount is 12.5, greater than 10: matched
//	country is missing, so eq fails
//	event is "click", not one of ["purchase","checkout"]: not matched
//
// actual is the decoded JSON value as in Match (nil for missing). matched is the verdict
// to state, normally c.Match(actual); the relation in the middle is always computed from
// actual. The same input always gives the same text.
func (c *Condition) Explain(actual any, matched bool) string {
	op := c.Op()
	if actual == nil {
		if matched {
			return "is missing: matched"
		}
		return "is missing, so " + op + " fails"
	}
	shown := c.show(actual)
	verdict := ": not matched"
	if matched {
		verdict = ": matched"
	}
	if !c.fits(actual) {
		return fmt.Sprintf("is %s, not %s, so %s fails", shown, article(c.FieldType()), op)
	}
	switch c.op {
	case opExists:
		return "is " + shown + ", present" + verdict
	case opNotExists:
		if matched {
			return "is " + shown + verdict
		}
		return "is " + shown + ", so not_exists fails"
	}
	return "is " + shown + ", " + c.relation(actual) + verdict
}

// fits reports whether actual is a value of the field's type, as Match reads it.
func (c *Condition) fits(v any) bool {
	var ok bool
	switch c.kind {
	case kindString:
		_, ok = v.(string)
	case kindInteger:
		_, ok = toInt(v)
	case kindNumber:
		_, ok = toFloat(v)
	case kindBoolean:
		_, ok = v.(bool)
	case kindTimestamp:
		_, ok = toTime(v)
	case kindObject:
		_, ok = v.(map[string]any)
	case kindArray:
		_, ok = v.([]any)
	}
	return ok
}

// relation describes how a value of the right type stands to the operand.
func (c *Condition) relation(v any) string {
	operand := c.show(c.raw)
	switch c.op {
	case opEq, opNeq:
		if c.equal(v) {
			return "equal to " + operand
		}
		return "not equal to " + operand
	case opGt, opGte, opLt, opLte:
		switch c.compare(v) {
		case -1:
			if c.kind == kindTimestamp {
				return "before " + operand
			}
			return "less than " + operand
		case 1:
			if c.kind == kindTimestamp {
				return "after " + operand
			}
			return "greater than " + operand
		case 0:
			return "equal to " + operand
		}
		return "not comparable to " + operand // NaN
	case opIn, opNotIn:
		if c.inList(v) {
			return "one of " + c.showList()
		}
		return "not one of " + c.showList()
	}
	s, _ := v.(string)
	switch c.op {
	case opContains, opNotContains:
		if strings.Contains(s, c.str) {
			return "contains " + operand
		}
		return "does not contain " + operand
	case opStartsWith:
		if strings.HasPrefix(s, c.str) {
			return "starts with " + operand
		}
		return "does not start with " + operand
	case opEndsWith:
		if strings.HasSuffix(s, c.str) {
			return "ends with " + operand
		}
		return "does not end with " + operand
	case opMatches:
		if c.re.MatchString(s) {
			return "matches the pattern " + operand
		}
		return "does not match the pattern " + operand
	}
	return ""
}

// equal, compare and inList read v as Match does; they are only called when fits(v).
func (c *Condition) equal(v any) bool {
	switch c.kind {
	case kindString:
		return v.(string) == c.str
	case kindBoolean:
		return v.(bool) == c.bl
	}
	return c.compare(v) == 0
}

// compare returns -1, 0 or 1 as v is below, at or above the operand, and 2 when a NaN
// makes them incomparable.
func (c *Condition) compare(v any) int {
	switch c.kind {
	case kindString:
		return strings.Compare(v.(string), c.str)
	case kindInteger:
		n, _ := toInt(v)
		return sign(n, c.num)
	case kindTimestamp:
		us, _ := toTime(v)
		return sign(us, c.num)
	case kindNumber:
		f, _ := toFloat(v)
		if math.IsNaN(f) {
			return 2
		}
		return sign(f, c.flt)
	}
	return 2
}

func sign[T int64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (c *Condition) inList(v any) bool {
	switch c.kind {
	case kindString:
		return c.MatchString(v.(string)) == (c.op == opIn)
	case kindInteger:
		n, _ := toInt(v)
		return c.MatchInt(n) == (c.op == opIn)
	case kindTimestamp:
		us, _ := toTime(v)
		return c.MatchTime(us) == (c.op == opIn)
	case kindNumber:
		f, _ := toFloat(v)
		return !math.IsNaN(f) && c.MatchFloat(f) == (c.op == opIn)
	}
	return false
}

// showList shows an in list as it was given, up to explainMaxList values.
func (c *Condition) showList() string {
	list, _ := c.raw.([]any)
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range list {
		if i == explainMaxList {
			fmt.Fprintf(&b, ",… %d more", len(list)-i)
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c.show(v))
	}
	b.WriteByte(']')
	return b.String()
}

// show formats a value for an explanation: strings quoted, numbers and composite values as
// JSON (map keys sorted), long text cut short, epoch milliseconds of a timestamp field
// followed by the time they stand for.
func (c *Condition) show(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(cut(s))
	}
	b, err := json.Marshal(v)
	out := string(b)
	if err != nil {
		out = fmt.Sprint(v)
	}
	out = cut(out)
	if c.kind == kindTimestamp {
		if us, ok := toTime(v); ok {
			out += " (" + time.UnixMicro(us).UTC().Format(time.RFC3339Nano) + ")"
		}
	}
	return out
}

func cut(s string) string {
	if utf8.RuneCountInString(s) <= explainMaxRunes {
		return s
	}
	r := []rune(s)
	return string(r[:explainMaxRunes]) + "…"
}

func article(typ string) string {
	switch typ {
	case TypeInteger, TypeObject, TypeArray:
		return "an " + typ
	}
	return "a " + typ
}
