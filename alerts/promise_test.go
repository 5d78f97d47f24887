package alerts

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lookout/store"
)

// TestBusyChannelDoesNotDelayOthers: one channel's backlog of 30 notices must not push a
// notice to another channel of the project back: the project bucket (1/s) is almost unused
// while the busy channel spends one token per 6 s (found by review).
func TestBusyChannelDoesNotDelayOthers(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	busy, _ := f.webhook(rc.srv.URL + "/busy")
	idle, _ := f.webhook(rc.srv.URL + "/idle")
	f.alert(busy)
	if _, err := f.svc.CreateAlert(f.project, store.AlertInput{Name: ptr("refunds"), ModelKey: ptr("orders"),
		Conditions: &[]store.AlertCondition{{Field: "status", Operator: "eq", Value: "refunded"}},
		Severity:   ptr("critical"), ChannelIDs: &[]string{idle}}); err != nil {
		t.Fatal(err)
	}
	var recs []string
	for i := range 30 {
		recs = append(recs, order(fmt.Sprint(i), fmt.Sprintf("C%02d", i), "failed", 1))
	}
	// One ingest batch: the flush queues 30 openings to the busy channel and one to the
	// idle channel together (the refunds alert was created later, so its delivery sorts last).
	f.ingest(append(recs, order("r", "NL", "refunded", 1))...)
	start := f.clock.Now()
	f.runFor(time.Hour)
	for _, g := range rc.all() {
		if strings.HasSuffix(g.path, "/idle") {
			t.Logf("idle channel's notice went out %v after it was queued", g.at.Sub(start))
			if g.at.Sub(start) > 5*time.Second {
				t.Errorf("idle channel waited %v behind another channel's backlog (project bucket nearly unused)", g.at.Sub(start))
			}
		}
	}
}
