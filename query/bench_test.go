package query

import (
	"context"
	"fmt"
	"testing"
	"time"

	"lookout/store"
	"lookout/warehouse"
)

var benchModel = &store.Model{
	Meta: store.Meta{ID: "mdl_bench", ProjectID: "prj_bench"}, Key: "events",
	Fields: []store.Field{
		{Name: "event", Type: store.TypeString}, {Name: "user_id", Type: store.TypeString},
		{Name: "country", Type: store.TypeString}, {Name: "device", Type: store.TypeString},
		{Name: "duration_ms", Type: store.TypeInteger}, {Name: "amount", Type: store.TypeNumber},
		{Name: "success", Type: store.TypeBoolean}, {Name: "ts", Type: store.TypeTimestamp},
	},
	TimestampField: "ts", UnknownFields: store.UnknownReject, WarehouseID: "wh_bench",
}

// benchLog holds n sealed records shaped like ../shared/bench's data set.
func benchLog(b *testing.B, n int) *warehouse.RecordLog {
	b.Helper()
	rs, err := warehouse.OpenRecordStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rs.Close() })
	l, err := rs.Log(benchModel.WarehouseID)
	if err != nil {
		b.Fatal(err)
	}
	v := warehouse.NewValidator(benchModel)
	events := []string{"page_view", "click", "search", "add_to_cart", "login", "checkout", "purchase", "remove_from_cart"}
	countries := []string{"US", "GB", "DE", "FR", "NL", "ES", "IT", "SE", "NO", "DK", "FI", "PL", "CZ", "AT", "CH", "BE", "PT", "IE", "CA", "MX", "BR", "AR", "JP", "KR", "CN", "IN", "AU", "NZ", "ZA", "SG"}
	devices := []string{"desktop", "mobile", "tablet"}
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	at := base
	for start := 0; start < n; start += 1000 {
		var recs [][]byte
		for i := start; i < min(start+1000, n); i++ {
			raw := fmt.Sprintf(`{"event":%q,"user_id":"user-%d","country":%q,"device":%q,"duration_ms":%d,"amount":%d.%02d,"success":%t,"ts":%q}`,
				events[i*7%8], 100000+i*7919%900000, countries[i*13%30], devices[i%3], i*31%2000, i%500, i%100, i%3 != 0,
				base.Add(time.Duration(i)*86400*time.Second/time.Duration(n)).Format("2006-01-02T15:04:05.000Z"))
			out, errs := v.Validate([]byte(raw), nil)
			if len(errs) > 0 {
				b.Fatal(errs)
			}
			recs = append(recs, out)
		}
		if err := l.Append([]*warehouse.AppendBatch{{ModelID: benchModel.ID, ReceivedAt: at, Records: recs, ClientID: "ic_1", IngestID: fmt.Sprintf("ing_%d", start)}}); err != nil {
			b.Fatal(err)
		}
		at = at.Add(time.Millisecond)
	}
	for {
		k, err := l.Seal(benchModel, at.Add(time.Hour), warehouse.DefaultSealPolicy)
		if err != nil {
			b.Fatal(err)
		}
		if k == 0 {
			break
		}
	}
	return l
}

func BenchmarkQuery(b *testing.B) {
	l := benchLog(b, 500_000)
	for _, q := range []struct {
		name string
		q    store.QuerySpec
	}{
		{"group1", store.QuerySpec{GroupBy: []string{"country"}, Aggregations: []store.Aggregation{{Fn: "count", As: "n"}}, Limit: 10000}},
		{"group2", store.QuerySpec{GroupBy: []string{"country", "device"}, Aggregations: []store.Aggregation{{Fn: "count", As: "n"}, {Fn: "avg", Field: "duration_ms"}}, Limit: 10000}},
		{"filter", store.QuerySpec{Filters: []store.Filter{{Field: "event", Op: "eq", Value: "purchase"}}, Aggregations: []store.Aggregation{{Fn: "count", As: "n"}}}},
		{"range1pct", store.QuerySpec{TimeRange: &store.TimeRange{From: "2026-11-20T00:00:00Z", To: "2026-11-20T00:14:24Z"}, Aggregations: []store.Aggregation{{Fn: "count", As: "n"}}}},
		{"full", store.QuerySpec{Aggregations: []store.Aggregation{{Fn: "count", As: "n"}}}},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Run(context.Background(), l, &Request{Model: benchModel, Query: &q.q, Now: time.Now(), Caps: DefaultCaps}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
