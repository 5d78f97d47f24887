package alerts

import (
	"net/http"
	"testing"
	"time"

	"lookout/store"
)

// TestActivity counts incidents per UTC day and how deliveries ended, leaving test
// deliveries and anything older than the window out.
func TestActivity(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	rc.answer = func(n int, r *http.Request) (int, http.Header, string) {
		if n == 1 { // the first opening is refused for good: dead_letter
			return http.StatusBadRequest, nil, "no"
		}
		return http.StatusNoContent, nil, ""
	}
	ch, _ := f.webhook(rc.srv.URL)
	f.alert(ch)
	f.ingest(order("o1", "DE", "failed", 1)) // long ago: outside a two-day window
	f.runFor(time.Minute)
	f.clock.Advance(5 * 24 * time.Hour)
	f.ingest(order("o2", "FR", "failed", 1), order("o3", "NL", "failed", 1))
	f.runFor(time.Minute)
	if _, err := f.svc.TestChannel(f.project, ch); err != nil {
		t.Fatal(err)
	}
	f.runFor(time.Minute)

	a, err := f.svc.Activity(f.project, 2)
	if err != nil {
		t.Fatal(err)
	}
	today := f.clock.Now().UTC().Format("2006-01-02")
	if len(a.Days) != 2 || a.Days[1] != today || a.IncidentsOpened[0] != 0 || a.IncidentsOpened[1] != 2 {
		t.Fatalf("incidents: %+v", a)
	}
	if a.Deliveries[store.DeliveryDelivered] != 2 || len(a.Deliveries) != 1 || a.SuccessRate == nil || *a.SuccessRate != 1 {
		t.Fatalf("deliveries: %+v", a.Deliveries)
	}
	all, err := f.svc.Activity(f.project, 30)
	if err != nil {
		t.Fatal(err)
	}
	if all.Deliveries[store.DeliveryDeadLetter] != 1 || all.Deliveries[store.DeliveryDelivered] != 2 || *all.SuccessRate != 2.0/3 {
		t.Fatalf("30 days: %+v", all.Deliveries)
	}
	for _, days := range []int{0, 91} {
		if _, err := f.svc.Activity(f.project, days); !store.IsCode(err, store.CodeValidation) {
			t.Errorf("days=%d: %v", days, err)
		}
	}
}
