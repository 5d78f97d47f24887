package alerts

import (
	"fmt"
	"strings"
	"testing"

	"lookout/store"
	"lookout/warehouse"
)

// benchRecords are n stored records shaped like `lookout bench ingest`'s (10 fields, ~300
// bytes; amount cycles 0-499.99).
func benchRecords(n int) [][]byte {
	kinds := []string{"page_view", "add_to_cart", "checkout", "search"}
	countries := []string{"NL", "DE", "FR", "US", "GB", "JP"}
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"event_id":"evt-%08d-%s","user_id":"user-%06d","session":"sess-%012d","kind":"%s","country":"%s","path":"/shop/category/%03d/product/%05d?ref=newsletter&utm=autumn-sale","amount":%d.%02d,"items":%d,"logged_in":%t,"at":"2026-11-21T12:%02d:%02d.%03dZ"}`,
			i, strings.Repeat("x", 20), i%5000, i*7919, kinds[i%len(kinds)], countries[i%len(countries)], i%200, i%10000,
			i%500, i%100, i%9, i%2 == 0, i%60, (i/60)%60, i%1000)
	}
	return out
}

// benchAlerts creates the benchmark's alert mix on a model of bench fields: half match
// nothing (kind eq a value no record has), half match 1% of records each (a 5-wide band of
// amount), grouped by country.
func benchAlerts(tb testing.TB, f *fixture, model string, n int) {
	for i := range n {
		in := store.AlertInput{Name: ptr(fmt.Sprint("a", i)), ModelKey: ptr(model), GroupBy: &[]string{"country"}, SelectFields: &[]string{"event_id"}}
		if i%2 == 0 {
			in.Conditions = &[]store.AlertCondition{{Field: "kind", Operator: "eq", Value: fmt.Sprint("refund-", i)}}
		} else {
			lo := (i / 2) * 10 % 500
			in.Conditions = &[]store.AlertCondition{{Field: "amount", Operator: "gte", Value: lo}, {Field: "amount", Operator: "lt", Value: lo + 5}}
		}
		if _, err := f.svc.CreateAlert(f.project, in); err != nil {
			tb.Fatal(err)
		}
	}
}

func benchModel(tb testing.TB, f *fixture) {
	fields := []store.Field{{Name: "event_id", Type: "string"}, {Name: "user_id", Type: "string"}, {Name: "session", Type: "string"},
		{Name: "kind", Type: "string"}, {Name: "country", Type: "string"}, {Name: "path", Type: "string"}, {Name: "amount", Type: "number"},
		{Name: "items", Type: "integer"}, {Name: "logged_in", Type: "boolean"}, {Name: "at", Type: "timestamp"}}
	if _, err := f.st.CreateModel(f.project, store.ModelInput{Key: ptr("events"), Fields: &fields}); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkEvaluate is the evaluator's cost per record with 100 enabled alerts (half
// matching nothing, half 1% of records each), and with none; "spans" takes the values
// where ingest's validator found them (as serve does), "scan" reads each record again.
func BenchmarkEvaluate(b *testing.B) {
	for _, n := range []int{0, 100} {
		for _, mode := range []string{"spans", "scan"} {
			b.Run(fmt.Sprint(n, " alerts, ", mode), func(b *testing.B) {
				benchEvaluate(b, n, mode == "spans")
			})
		}
	}
}

func benchEvaluate(b *testing.B, n int, spans bool) {
	f := newFixture(b)
	benchModel(b, f)
	benchAlerts(b, f, "events", n)
	recs := benchRecords(1000)
	batch := Batch{ProjectID: f.project, ModelKey: "events", ReceivedAt: f.clock.Now(), ClientID: "ic_b", Records: recs}
	if watched := f.svc.WatchedFields(f.project, "events"); spans && len(watched) > 0 {
		m, err := f.st.ModelByKey(f.project, "events")
		if err != nil {
			b.Fatal(err)
		}
		v := warehouse.NewValidator(&m).Watching(watched)
		batch.Records, batch.Watched = nil, watched
		for _, r := range recs {
			var rec []byte
			var errs []store.FieldError
			if rec, batch.Spans, errs = v.ValidateSpans(r, nil, batch.Spans); errs != nil {
				b.Fatal(errs)
			}
			batch.Records = append(batch.Records, rec)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		f.svc.Match(batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	if n > 0 && f.svc.eval.Matches.Load() == 0 {
		b.Fatal("nothing matched")
	}
}

// BenchmarkEvaluateNoMatch is 100 alerts of which none matches: the cost every record pays.
func BenchmarkEvaluateNoMatch(b *testing.B) {
	f := newFixture(b)
	benchModel(b, f)
	for i := range 100 {
		in := store.AlertInput{Name: ptr(fmt.Sprint("a", i)), ModelKey: ptr("events"), GroupBy: &[]string{"country"}}
		if i%2 == 0 {
			in.Conditions = &[]store.AlertCondition{{Field: "kind", Operator: "eq", Value: fmt.Sprint("refund-", i)}}
		} else {
			in.Conditions = &[]store.AlertCondition{{Field: "amount", Operator: "gte", Value: 100000 + i}, {Field: "amount", Operator: "lt", Value: 100005 + i}}
		}
		if _, err := f.svc.CreateAlert(f.project, in); err != nil {
			b.Fatal(err)
		}
	}
	recs := benchRecords(1000)
	batch := Batch{ProjectID: f.project, ModelKey: "events", ReceivedAt: f.clock.Now(), ClientID: "ic_b", Records: recs}
	for b.Loop() {
		f.svc.Match(batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
