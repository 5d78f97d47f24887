package query

import (
	"encoding/json"
	"slices"
	"testing"

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
