package query

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

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

// FuzzDecode: any bytes as a POST /query body give a decoded query or a clear error,
// never a panic; a decoded ad-hoc query then validates (or not) without panicking, and a
// valid one runs over no data to exactly one row or none.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"schema":"orders","group_by":["country"],"aggregations":[{"fn":"count","as":"n"}]}`,
		`{"api":"revenue","params":{"country":"NL"}}`,
		`{"schema":"orders","filters":[{"field":"amount","op":"gt","value":3}],"limit":10}`,
		`{"api":"x","filters":[]}`, `[]`, `{"schema":"orders","time_range":{"from":"-1h"}}`,
	} {
		f.Add([]byte(seed))
	}
	m := &store.Model{Key: "orders", Fields: []store.Field{{Name: "id", Type: store.TypeString}, {Name: "amount", Type: store.TypeNumber},
		{Name: "country", Type: store.TypeString}, {Name: "at", Type: store.TypeTimestamp}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		body, err := Decode(bytes.NewReader(b))
		if err != nil || body.API != "" {
			return
		}
		if _, errs := Validate(m, &body.Query, nil); len(errs) > 0 {
			return
		}
		res, err := Run(context.Background(), nil, &Request{Model: m, Query: &body.Query, Now: time.Unix(1e9, 0)})
		if err == nil && len(res.Rows) > 1 {
			t.Fatalf("a query over no data returned %d rows", len(res.Rows))
		}
	})
}
