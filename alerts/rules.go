// Package alerts is Lookout's alerting: alert rules checked against their model's fields,
// deterministic metadata for editors, side-effect-free simulation, and notification
// channels (one file per channel type). Conditions are cond's: one implementation of the
// operators for queries and alerts.
package alerts

import (
	"fmt"
	"slices"

	"lookout/cond"
	"lookout/store"
	"lookout/warehouse"
)

// SystemFields are the system fields an alert may use beside the model's own: the
// warehouse's, but _ingest_id (per request, never a useful condition or group).
var SystemFields = slices.DeleteFunc(slices.Clone(warehouse.SystemFields), func(f store.Field) bool { return f.Name == "_ingest_id" })

// governed returns the fields an alert on m may use, by name.
func governed(m *store.Model) map[string]store.Field {
	out := make(map[string]store.Field, len(m.Fields)+len(SystemFields))
	for _, f := range m.Fields {
		out[f.Name] = f
	}
	for _, f := range SystemFields {
		out[f.Name] = f
	}
	return out
}

// groupable reports whether a field's values can name a group (objects and arrays cannot).
func groupable(typ string) bool { return typ != store.TypeObject && typ != store.TypeArray }

// Rules checks an alert's conditions, selected and grouped fields against its model. It is
// the store.AlertRules the store runs inside its transaction.
func Rules(m *store.Model, a *store.Alert) []store.FieldError {
	var errs []store.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, store.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	fields := governed(m)
	for i, c := range a.Conditions {
		at := fmt.Sprintf("conditions[%d]", i)
		f, ok := fields[c.Field]
		if !ok {
			add(at+".field", "%q is not a field of model %s (nor _received_at or _client_id)", c.Field, m.Key)
			continue
		}
		if _, err := cond.Compile(f.Type, c.Operator, c.Value); err != nil {
			ce := err.(*cond.Error)
			part := map[string]string{"op": "operator", "value": "value"}[ce.Part]
			if part == "" {
				part = "operator"
			}
			add(at+"."+part, "%s (field %s is %s)", ce.Message, c.Field, f.Type)
		}
	}
	for _, l := range []struct {
		name  string
		names []string
	}{{"select_fields", a.SelectFields}, {"group_by", a.GroupBy}} {
		for i, n := range l.names {
			at := fmt.Sprintf("%s[%d]", l.name, i)
			f, ok := fields[n]
			switch {
			case !ok:
				add(at, "%q is not a field of model %s (nor _received_at or _client_id)", n, m.Key)
			case slices.Index(l.names, n) != i:
				add(at, "names %q twice", n)
			case l.name == "group_by" && !groupable(f.Type):
				add(at, "%q is of type %s, which cannot name a group", n, f.Type)
			}
		}
	}
	return errs
}

// compiled is an alert's conditions, compiled once.
type compiled struct {
	conds  []*cond.Condition
	fields []store.Field
}

// compile compiles a validated alert's conditions against its model.
func compile(m *store.Model, a *store.Alert) (*compiled, error) {
	fields := governed(m)
	out := &compiled{}
	for i, c := range a.Conditions {
		f, ok := fields[c.Field]
		if !ok {
			return nil, fmt.Errorf("condition %d: field %q is gone from model %s", i, c.Field, m.Key)
		}
		cc, err := cond.Compile(f.Type, c.Operator, c.Value)
		if err != nil {
			return nil, fmt.Errorf("condition %d: %w", i, err)
		}
		out.conds = append(out.conds, cc)
		out.fields = append(out.fields, f)
	}
	return out, nil
}
