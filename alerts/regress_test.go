package alerts

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"lookout/store"
	"lookout/warehouse"
)

// TestIntegerSpellingsMatchAndGroup: an integer field spelled 5.0 or 1e1 (accepted by the
// validator, stored verbatim) matches a band-indexed alert as cond says, and names the
// same group as 5 (found by review).
func TestIntegerSpellingsMatchAndGroup(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.CreateModel(f.project, store.ModelInput{Key: ptr("m"), Fields: &[]store.Field{{Name: "qty", Type: "integer"}, {Name: "k", Type: "string"}}}); err != nil {
		t.Fatal(err)
	}
	a, err := f.svc.CreateAlert(f.project, store.AlertInput{Name: ptr("big"), ModelKey: ptr("m"),
		Conditions: &[]store.AlertCondition{{Field: "qty", Operator: "gt", Value: 3}}, GroupBy: &[]string{"qty"}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := f.st.ModelByKey(f.project, "m")
	v := warehouse.NewValidator(&m)
	var recs [][]byte
	for _, raw := range []string{`{"qty":5.0}`, `{"qty":1e1}`, `{"qty":5}`} {
		rec, errs := v.Validate([]byte(raw), nil)
		if errs != nil {
			t.Fatalf("%s rejected: %v", raw, errs)
		}
		recs = append(recs, rec)
	}
	sim, err := f.svc.SimulateAlert(f.project, a.ID, json.RawMessage(`{"qty":5.0}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("simulation of 5.0 matched=%v", sim.Matched)
	f.svc.Match(Batch{ProjectID: f.project, ModelKey: "m", ReceivedAt: f.clock.Now(), Records: recs})
	f.svc.eval.Flush()
	var total int64
	for _, inc := range f.incidents(store.IncidentFilter{}) {
		t.Logf("incident group %s occurrences %d", inc.Group, inc.Occurrences)
		total += inc.Occurrences
	}
	if total != 3 {
		t.Errorf("3 records with qty > 3 counted %d times", total)
	}
	// 5.0 and 5 are one group value.
	groups := map[string]int64{}
	for _, inc := range f.incidents(store.IncidentFilter{}) {
		groups[string(inc.Group)] += inc.Occurrences
	}
	if groups[`{"qty":5}`] != 2 || groups[`{"qty":10}`] != 1 || len(groups) != 2 {
		t.Errorf("groups %v", groups)
	}
	if !sim.Matched {
		t.Error("simulation disagrees")
	}
}

// TestRetryKeepsOneMergeTarget: retrying a failed opening does not take over the merge
// slot of the summary already waiting, so there are never two pending summaries for one
// incident and channel (found by review).
func TestRetryKeepsOneMergeTarget(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	rc.answer = func(n int, _ *http.Request) (int, http.Header, string) {
		if n == 1 {
			return 500, nil, "boom"
		}
		return 204, nil, ""
	}
	ch, _ := f.webhook(rc.srv.URL)
	f.alert(ch)
	f.ingest(order("o1", "DE", "failed", 1))
	f.run(f.clock.Now())
	open := f.deliveries(store.DeliveryFilter{Kind: store.NoticeOpening})
	if len(open) != 1 || open[0].Status != store.DeliveryFailed {
		t.Fatalf("opening %+v", open)
	}
	f.clock.Advance(time.Second)
	f.ingest(order("o2", "DE", "failed", 2)) // summary S, waits for the cooldown
	if _, err := f.svc.RetryDelivery(f.project, open[0].ID); err != nil {
		t.Fatal(err)
	}
	f.ingest(order("o3", "DE", "failed", 3)) // merges into the retried opening
	f.clock.Advance(10 * time.Second)
	f.run(f.clock.Now()) // opening goes
	f.clock.Advance(time.Second)
	f.ingest(order("o4", "DE", "failed", 4)) // no merge target: a second summary
	var pending []store.Delivery
	for _, d := range f.deliveries(store.DeliveryFilter{Kind: store.NoticeSummary}) {
		if d.Status == store.DeliveryPending {
			pending = append(pending, d)
		}
	}
	for _, d := range f.deliveries(store.DeliveryFilter{}) {
		t.Logf("%s %s %s att=%d occ=%d reason=%s", d.ID, d.Kind, d.Status, d.Attempts, d.Occurrences, d.WaitingReason)
	}
	if len(pending) > 1 {
		t.Errorf("%d pending summaries for one (incident, channel): %+v", len(pending), pending)
	}
}

// TestRecordWaitsNoRace: recording why deliveries wait reads nothing that enqueue writes
// (run with -race; found by review).
func TestRecordWaitsNoRace(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	ch, _ := f.webhook(rc.srv.URL)
	var ds []store.Delivery
	for range 30 {
		d, err := f.svc.TestChannel(f.project, ch)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := range ds {
				d := ds[i]
				f.svc.disp.enqueue(&d)
			}
		}
	}()
	for range 50 {
		f.svc.disp.Pass()
		f.clock.Advance(7 * time.Second)
	}
	close(stop)
	wg.Wait()
	f.svc.disp.Wait()
}

// TestSlackURLRedacted: a Slack URL that net/url prints re-rendered is still redacted
// from last_error (found by review).
func TestSlackURLRedacted(t *testing.T) {
	f := newFixture(t)
	secretURL := "HTTPS://127.0.0.1:1/services/T000/B000/SUPERSECRETTOKEN"
	cfg, _ := json.Marshal(map[string]any{"url": secretURL})
	c, err := f.svc.CreateChannel(f.project, ChannelInput{Name: ptr("s"), Type: ptr(ChannelSlack), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.svc.TestChannel(f.project, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.run(f.clock.Now())
	got, _ := f.svc.Delivery(f.project, d.ID)
	t.Logf("status %s last_error %q", got.Status, got.LastError)
	if strings.Contains(got.LastError, "SUPERSECRETTOKEN") {
		t.Errorf("last_error leaks the slack URL: %s", got.LastError)
	}
}

// TestNoSummaryAfterResolve: a summary whose first attempt failed does not go out after
// the incident is resolved; it ends in dead_letter saying why (found by review).
func TestNoSummaryAfterResolve(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	rc.answer = func(n int, _ *http.Request) (int, http.Header, string) {
		if n == 2 {
			return 503, nil, "busy"
		}
		return 204, nil, ""
	}
	ch, _ := f.webhook(rc.srv.URL)
	f.alert(ch)
	f.ingest(order("o1", "DE", "failed", 1))
	f.run(f.clock.Now())
	f.clock.Advance(time.Second)
	f.ingest(order("o2", "DE", "failed", 2))
	f.runFor(5 * time.Minute) // the summary goes and fails
	inc := f.incidents(store.IncidentFilter{})[0]
	if _, err := f.svc.Resolve(f.project, inc.ID); err != nil {
		t.Fatal(err)
	}
	f.runFor(10 * time.Minute)
	var kinds []string
	for _, r := range rc.all() {
		kinds = append(kinds, decodeNotice(t, r.body)["type"].(string))
	}
	t.Logf("receiver saw %v", kinds)
	if kinds[len(kinds)-1] != "incident.resolved" {
		t.Errorf("a notice went out after the resolution: %v", kinds)
	}
	for _, d := range f.deliveries(store.DeliveryFilter{Kind: store.NoticeSummary}) {
		if d.Status != store.DeliveryDeadLetter || !strings.Contains(d.LastError, "resolved") {
			t.Errorf("the failed summary: %+v", d)
		}
	}
}
