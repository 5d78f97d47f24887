package alerts

import (
	"fmt"
	"testing"
	"time"
)

// TestRestartKeepsBuckets: a restart starts the token buckets from the attempts of the
// last minute, so ten sends before it and one after never make eleven in a 60 s window
// (found by review).
func TestRestartKeepsBuckets(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	ch, _ := f.webhook(rc.srv.URL)
	f.alert(ch)
	for i := range 10 {
		f.ingest(order(fmt.Sprint(i), fmt.Sprintf("C%02d", i), "failed", 1))
		f.run(f.clock.Now())
		f.clock.Advance(6 * time.Second)
	}
	f.clock.Advance(-5 * time.Second) // t = 55 s
	f.restart()
	f.ingest(order("x", "XX", "failed", 1))
	f.run(f.clock.Now())
	var times []time.Time
	for _, g := range rc.all() {
		times = append(times, g.at)
	}
	if m := maxInWindow(times, time.Minute); m > DeliveriesPerChannelPerMinute {
		t.Errorf("%d sends to one channel in a 60 s window after a restart (%d sends)", m, len(times))
	}
}
