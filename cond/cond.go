// Package cond holds the condition operators that queries and alerts share (CONTRACTS §6 and
// §7): which operators apply to which field types, how a value is checked and compiled once,
// how a compiled condition is evaluated with SQL null semantics, and how a result is put in
// words. It is a leaf: it imports nothing of ours, so query filters, required filters,
// Analytics API validation, the column engine and alert conditions share one implementation
// and cannot drift apart.
package cond

import (
	"slices"
	"sort"
)

// Field types, spelled as models spell them.
const (
	TypeString    = "string"
	TypeInteger   = "integer"
	TypeNumber    = "number"
	TypeBoolean   = "boolean"
	TypeTimestamp = "timestamp"
	TypeObject    = "object"
	TypeArray     = "array"
)

// Operator names, spelled as query filters and alert conditions spell them. The engine
// compares Condition.Op against these instead of repeating the strings.
const (
	OpEq          = "eq"
	OpNeq         = "neq"
	OpGt          = "gt"
	OpGte         = "gte"
	OpLt          = "lt"
	OpLte         = "lte"
	OpContains    = "contains"
	OpNotContains = "not_contains"
	OpStartsWith  = "starts_with"
	OpEndsWith    = "ends_with"
	OpIn          = "in"
	OpNotIn       = "not_in"
	OpExists      = "exists"
	OpNotExists   = "not_exists"
	OpMatches     = "matches"
)

// MaxList is the most values an in or not_in list may hold: enough for any hand-written
// list, small enough that a condition stays cheap to compile and to send to an external engine.
const MaxList = 1000

// MaxPattern is the longest matches pattern, in characters. RE2 runs in time linear in the
// input whatever the pattern, but a bound keeps compiled programs small.
const MaxPattern = 256

// opcode is an operator as the evaluator switches on it; a small integer keeps the hot path
// free of string comparisons.
type opcode uint8

const (
	opInvalid opcode = iota
	opEq
	opNeq
	opGt
	opGte
	opLt
	opLte
	opContains
	opNotContains
	opStartsWith
	opEndsWith
	opIn
	opNotIn
	opExists
	opNotExists
	opMatches
)

// kind is a field type as the evaluator switches on it.
type kind uint8

const (
	kindInvalid kind = iota
	kindString
	kindInteger
	kindNumber
	kindBoolean
	kindTimestamp
	kindObject
	kindArray
)

var kinds = map[string]kind{
	TypeString:    kindString,
	TypeInteger:   kindInteger,
	TypeNumber:    kindNumber,
	TypeBoolean:   kindBoolean,
	TypeTimestamp: kindTimestamp,
	TypeObject:    kindObject,
	TypeArray:     kindArray,
}

var (
	scalar  = []string{TypeString, TypeInteger, TypeNumber, TypeBoolean, TypeTimestamp}
	ordered = []string{TypeString, TypeInteger, TypeNumber, TypeTimestamp}
	all     = []string{TypeString, TypeInteger, TypeNumber, TypeBoolean, TypeTimestamp, TypeObject, TypeArray}
	text    = []string{TypeString}
)

// operators maps each operator to its opcode and the field types it applies to.
var operators = map[string]struct {
	code  opcode
	types []string
}{
	OpEq:          {opEq, scalar},
	OpNeq:         {opNeq, scalar},
	OpGt:          {opGt, ordered},
	OpGte:         {opGte, ordered},
	OpLt:          {opLt, ordered},
	OpLte:         {opLte, ordered},
	OpIn:          {opIn, ordered},
	OpNotIn:       {opNotIn, ordered},
	OpContains:    {opContains, text},
	OpNotContains: {opNotContains, text},
	OpStartsWith:  {opStartsWith, text},
	OpEndsWith:    {opEndsWith, text},
	OpMatches:     {opMatches, text},
	OpExists:      {opExists, all},
	OpNotExists:   {opNotExists, all},
}

// opNames is the inverse of operators, indexed by opcode.
var opNames = func() []string {
	out := make([]string, opMatches+1)
	for name, o := range operators {
		out[o.code] = name
	}
	return out
}()

// Operators returns every operator name, sorted, so error messages and metadata are the
// same on every call.
func Operators() []string {
	out := make([]string, 0, len(operators))
	for op := range operators {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

// OperatorsFor returns the operators that apply to a field of type typ, sorted (none for an
// unknown type), for the alert metadata's "operators per type".
func OperatorsFor(typ string) []string {
	out := []string{}
	for op, o := range operators {
		if slices.Contains(o.types, typ) {
			out = append(out, op)
		}
	}
	sort.Strings(out)
	return out
}

// Types returns every field type, in the order models document them.
func Types() []string { return slices.Clone(all) }

// Known reports whether op is an operator.
func Known(op string) bool {
	_, ok := operators[op]
	return ok
}

// Applies reports whether op applies to a field of type typ.
func Applies(op, typ string) bool {
	return slices.Contains(operators[op].types, typ)
}

// TakesValue reports whether op compares against a value (exists and not_exists do not).
func TakesValue(op string) bool { return op != OpExists && op != OpNotExists }

// TakesList reports whether op's value is a list (in, not_in).
func TakesList(op string) bool { return op == OpIn || op == OpNotIn }

// TakesString reports whether op's value is a string whatever the field's type, so a
// filter's value can be checked before the field's type is known (required filters).
func TakesString(op string) bool {
	switch op {
	case OpContains, OpNotContains, OpStartsWith, OpEndsWith, OpMatches:
		return true
	}
	return false
}
