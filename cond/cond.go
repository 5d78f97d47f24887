// Package cond holds the condition operators that queries and alerts share (CONTRACTS §6):
// which operators apply to which field types. It is a leaf: it imports nothing of ours, so
// query filters, Analytics API validation and alert conditions use one implementation.
package cond

import "sort"

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

var (
	scalar  = []string{TypeString, TypeInteger, TypeNumber, TypeBoolean, TypeTimestamp}
	ordered = []string{TypeString, TypeInteger, TypeNumber, TypeTimestamp}
	all     = []string{TypeString, TypeInteger, TypeNumber, TypeBoolean, TypeTimestamp, TypeObject, TypeArray}
)

// operators maps each operator to the field types it applies to.
var operators = map[string][]string{
	"eq":          scalar,
	"neq":         scalar,
	"gt":          ordered,
	"gte":         ordered,
	"lt":          ordered,
	"lte":         ordered,
	"in":          ordered,
	"not_in":      ordered,
	"contains":    {TypeString},
	"starts_with": {TypeString},
	"ends_with":   {TypeString},
	"exists":      all,
	"not_exists":  all,
}

// Operators returns every operator name, sorted.
func Operators() []string {
	out := make([]string, 0, len(operators))
	for op := range operators {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

// Known reports whether op is an operator.
func Known(op string) bool {
	_, ok := operators[op]
	return ok
}

// Applies reports whether op applies to a field of type typ.
func Applies(op, typ string) bool {
	for _, t := range operators[op] {
		if t == typ {
			return true
		}
	}
	return false
}

// TakesValue reports whether op compares against a value (exists and not_exists do not).
func TakesValue(op string) bool { return op != "exists" && op != "not_exists" }

// TakesList reports whether op's value is a list (in, not_in).
func TakesList(op string) bool { return op == "in" || op == "not_in" }

// TakesString reports whether op's value is a string whatever the field's type.
func TakesString(op string) bool {
	return op == "contains" || op == "starts_with" || op == "ends_with"
}
