package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"lookout/store"
	"lookout/warehouse"
)

// Regression tests for defects an independent review of the query runtime found.

var revModel = &store.Model{
	Meta: store.Meta{ID: "mdl_rev", ProjectID: "prj_rev"}, Key: "rev",
	Fields: []store.Field{
		{Name: "i", Type: store.TypeInteger},
		{Name: "n", Type: store.TypeNumber},
	},
	UnknownFields: store.UnknownReject, WarehouseID: "wh_rev",
}

var revAt = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)

func revLog(t *testing.T) *warehouse.RecordLog {
	t.Helper()
	rs, err := warehouse.OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	l, err := rs.Log(revModel.WarehouseID)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func revAppend(t *testing.T, l *warehouse.RecordLog, m *store.Model, at time.Time, recs ...string) {
	t.Helper()
	v := warehouse.NewValidator(m)
	var stored [][]byte
	for _, r := range recs {
		out, errs := v.Validate([]byte(r), nil)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", r, errs)
		}
		stored = append(stored, out)
	}
	if err := l.Append([]*warehouse.AppendBatch{{ModelID: m.ID, ReceivedAt: at, Records: stored, ClientID: "ic_1", IngestID: "ing_1"}}); err != nil {
		t.Fatal(err)
	}
}

func revRun(t *testing.T, l *warehouse.RecordLog, m *store.Model, q store.QuerySpec) string {
	t.Helper()
	res, err := Run(context.Background(), l, &Request{Model: m, Query: &q, Now: revAt.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.Rows)
	return string(b)
}

// TestIntegerSumIsExactInEveryLayer: sum(i) over MaxInt64, 1, -MaxInt64 is 1 (it
// fits an int64 at the end; only an intermediate sum overflows). The engine answers 0 while
// the records are in the log (one part: the row-by-row fold flags overflow and falls back
// to the float sum) and 1 once the first record is sealed (per-part sums never overflow).
func TestIntegerSumIsExactInEveryLayer(t *testing.T) {
	q := store.QuerySpec{Aggregations: []store.Aggregation{{Fn: "sum", Field: "i", As: "s"}}}
	recs := []string{fmt.Sprintf(`{"i":%d}`, int64(math.MaxInt64)), `{"i":1}`, fmt.Sprintf(`{"i":%d}`, -int64(math.MaxInt64))}

	unsealed := revLog(t)
	revAppend(t, unsealed, revModel, revAt, recs...)
	got1 := revRun(t, unsealed, revModel, q)

	sealed := revLog(t)
	revAppend(t, sealed, revModel, revAt, recs[0])
	if n, err := sealed.Seal(revModel, revAt.Add(time.Hour), warehouse.SealPolicy{}); n != 1 || err != nil {
		t.Fatalf("seal: %d %v", n, err)
	}
	revAppend(t, sealed, revModel, revAt.Add(time.Millisecond), recs[1:]...)
	got2 := revRun(t, sealed, revModel, q)

	if got1 != `[[1]]` || got2 != `[[1]]` {
		t.Fatalf("sum(i) over MaxInt64, 1, -MaxInt64: unsealed %s, first record sealed %s; want [[1]] in both", got1, got2)
	}
}

// TestNegativeZeroGroupsWithZero: SQL groups -0.0 and 0.0 together (they are equal: eq 0
// matches both, count_distinct counts one); the engine makes two groups that print as
// -0 and 0.
func TestNegativeZeroGroupsWithZero(t *testing.T) {
	l := revLog(t)
	revAppend(t, l, revModel, revAt, `{"n":0}`, `{"n":-0.0}`)
	got := revRun(t, l, revModel, store.QuerySpec{GroupBy: []string{"n"}, Aggregations: []store.Aggregation{{Fn: "count", As: "c"}}})
	if got != `[[0,2]]` {
		t.Fatalf("group by n over 0 and -0.0: %s, want [[0,2]]", got)
	}
}

// TestSealWithStaleModelKeepsField: the sealer reads the model once per pass, before
// Seal's read transaction. A field added (and written by ingest) in between is not in the
// schema the block is built with: builder.add ignores the key, the log record is deleted,
// and the value is gone for good.
func TestSealWithStaleModelKeepsField(t *testing.T) {
	l := revLog(t)
	newer := *revModel
	newer.Fields = append(append([]store.Field(nil), revModel.Fields...), store.Field{Name: "x", Type: store.TypeString})
	revAppend(t, l, &newer, revAt, `{"i":1,"x":"kept?"}`) // ingest already knows x
	q := store.QuerySpec{Select: []string{"i", "x"}}
	if got := revRun(t, l, &newer, q); got != `[[1,"kept?"]]` {
		t.Fatalf("before sealing: %s", got)
	}
	// The sealer's pass read the model just before the field was added: that seal must
	// refuse (the value would be lost), and the next, with the current model, seals it.
	if n, err := l.Seal(revModel, revAt.Add(time.Hour), warehouse.SealPolicy{}); n != 0 || !errors.Is(err, warehouse.ErrStaleModel) {
		t.Fatalf("seal with a stale model: %d %v, want 0 and ErrStaleModel", n, err)
	}
	if n, err := l.Seal(&newer, revAt.Add(time.Hour), warehouse.SealPolicy{}); n != 1 || err != nil {
		t.Fatalf("seal with the current model: %d %v", n, err)
	}
	if got := revRun(t, l, &newer, q); got != `[[1,"kept?"]]` {
		t.Fatalf("after sealing: %s (x lost)", got)
	}
}
