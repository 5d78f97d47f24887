package alerts

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"lookout/store"
)

func order(id, country, status string, amount float64) string {
	return fmt.Sprintf(`{"id":%q,"country":%q,"status":%q,"amount":%v,"note":"card 4111-1111"}`, id, country, status, amount)
}

// TestIncidentLifecycle follows one incident from the first match to its resolution through
// a real webhook receiver that checks every signature.
func TestIncidentLifecycle(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	ch, secret := f.webhook(rc.srv.URL + "/hook")
	a := f.alert(ch)

	f.ingest(order("o1", "DE", "failed", 10), order("o2", "DE", "paid", 20), order("o3", "FR", "paid", 30))
	f.run(f.clock.Now())
	got := rc.all()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want the one opening", len(got))
	}
	if err := verifySignature(secret, got[0].header, got[0].body); err != nil {
		t.Fatal(err)
	}
	if got[0].header.Get("X-Token") != "tok-0123456789-secret" || got[0].header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", got[0].header)
	}
	n := decodeNotice(t, got[0].body)
	if n["type"] != "incident.opened" || n["kind"] != "opening" || n["delivery_id"] != got[0].header.Get("webhook-id") {
		t.Fatalf("notice %s", got[0].body)
	}
	if strings.Contains(string(got[0].body), "4111") || strings.Contains(string(got[0].body), `"status":"failed"`) {
		t.Fatalf("the notice carries fields the alert does not select: %s", got[0].body)
	}
	latest := n["latest_occurrence"].(map[string]any)
	if fmt.Sprint(latest["selected"]) != "map[amount:10 id:o1]" || fmt.Sprint(latest["group"]) != "map[country:DE]" {
		t.Fatalf("latest occurrence %v", latest)
	}

	incs := f.incidents(store.IncidentFilter{})
	if len(incs) != 1 || incs[0].Status != store.IncidentOpen || incs[0].Occurrences != 1 || string(incs[0].Group) != `{"country":"DE"}` {
		t.Fatalf("incidents %+v", incs)
	}
	inc := incs[0]

	// More matches inside the cooldown: counted, merged into one summary that waits for it.
	for i := range 60 {
		f.clock.Advance(time.Second)
		f.ingest(order(fmt.Sprintf("m%d", i), "DE", "failed", float64(i)))
	}
	f.run(f.clock.Now())
	if len(rc.all()) != 1 {
		t.Fatalf("a summary went out inside the cooldown")
	}
	sums := f.deliveries(store.DeliveryFilter{Kind: store.NoticeSummary})
	if len(sums) != 1 || sums[0].Status != store.DeliveryPending || sums[0].WaitingReason != WaitCooldown || sums[0].Occurrences != 60 {
		t.Fatalf("summaries %+v", sums)
	}
	f.runFor(5 * time.Minute)
	got = rc.all()
	if len(got) != 2 {
		t.Fatalf("receiver got %d, want opening and one summary", len(got))
	}
	if d := got[1].at.Sub(got[0].at); d < 300*time.Second {
		t.Fatalf("summary %v after the opening, inside the 300 s cooldown", d)
	}
	n = decodeNotice(t, got[1].body)
	if n["type"] != "incident.summary" || n["new_occurrences"].(float64) != 60 || n["incident"].(map[string]any)["occurrences"].(float64) != 61 {
		t.Fatalf("summary %s", got[1].body)
	}
	if err := verifySignature(secret, got[1].header, got[1].body); err != nil {
		t.Fatal(err)
	}

	// Detail: the exact count and the latest 50, newest first.
	det, err := f.svc.Incident(f.project, inc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if det.Occurrences != 61 || len(det.RecentOccurrences) != OccurrencesShown || det.RecentOccurrences[0].Number != 61 ||
		!strings.Contains(string(det.RecentOccurrences[0].Selected), `"id":"m59"`) {
		t.Fatalf("detail: %d occurrences, %d shown, newest %+v", det.Occurrences, len(det.RecentOccurrences), det.RecentOccurrences[0])
	}

	// Acknowledged: counted, no summary; the unsent one is dropped.
	f.clock.Advance(time.Second)
	f.ingest(order("x1", "DE", "failed", 1))
	if _, err := f.svc.Acknowledge(f.project, inc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Acknowledge(f.project, inc.ID); !store.IsCode(err, store.CodeConflict) {
		t.Fatalf("acknowledging twice: %v", err)
	}
	f.ingest(order("x2", "DE", "failed", 2))
	f.runFor(time.Hour)
	if len(rc.all()) != 2 {
		t.Fatalf("notices went out for an acknowledged incident")
	}
	if s := f.deliveries(store.DeliveryFilter{Kind: store.NoticeSummary, Status: store.DeliveryPending}); len(s) != 0 {
		t.Fatalf("pending summaries of an acknowledged incident: %+v", s)
	}

	// Resolved: a resolution goes out; the next match opens a new incident.
	det, err = f.svc.Resolve(f.project, inc.ID)
	if err != nil || det.Status != store.IncidentResolved || det.Occurrences != 63 {
		t.Fatalf("resolve: %+v %v", det.Incident, err)
	}
	if _, err := f.svc.Resolve(f.project, inc.ID); !store.IsCode(err, store.CodeConflict) {
		t.Fatalf("resolving twice: %v", err)
	}
	f.runFor(time.Minute) // the channel's token: the summary went a second ago
	got = rc.all()
	if len(got) != 3 || decodeNotice(t, got[2].body)["type"] != "incident.resolved" {
		for _, d := range f.deliveries(store.DeliveryFilter{}) {
			t.Logf("%s %s %s att=%d reason=%s next=%v", d.ID, d.Kind, d.Status, d.Attempts, d.WaitingReason, d.NextAttemptAt)
		}
		t.Fatalf("no resolution notice: %d", len(got))
	}
	f.ingest(order("y1", "DE", "failed", 1))
	f.runFor(time.Minute)
	if incs := f.incidents(store.IncidentFilter{AlertID: a.ID}); len(incs) != 2 || incs[0].Status != store.IncidentOpen || incs[0].ID == inc.ID {
		t.Fatalf("after resolve, incidents %+v", incs)
	}
	if incs := f.incidents(store.IncidentFilter{Status: store.IncidentResolved}); len(incs) != 1 || incs[0].ID != inc.ID {
		t.Fatalf("status filter: %+v", incs)
	}
	if len(rc.all()) != 4 {
		t.Fatalf("the new incident's opening did not go out")
	}
}

// TestChannelRateLimit: 25 incidents on one channel in one minute → never more than 10 in
// any 60 s window, and all 25 delivered in the end.
func TestChannelRateLimit(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	ch, _ := f.webhook(rc.srv.URL)
	f.alert(ch)
	start := f.clock.Now()
	for i := range 25 {
		f.ingest(order(fmt.Sprint(i), fmt.Sprintf("C%02d", i), "failed", 1))
		f.run(f.clock.Now())
		if i == 20 {
			waiting := f.deliveries(store.DeliveryFilter{Status: store.DeliveryPending})
			if len(waiting) == 0 || waiting[0].WaitingReason != WaitChannelRate || waiting[0].NextAttemptAt == nil {
				t.Fatalf("throttled deliveries do not say why they wait: %+v", waiting)
			}
		}
		f.clock.Advance(2400 * time.Millisecond)
	}
	if f.clock.Now().Sub(start) > time.Minute {
		t.Fatal("the incidents did not open within one minute")
	}
	f.runFor(time.Hour)
	got := rc.all()
	var times []time.Time
	for _, g := range got {
		times = append(times, g.at)
	}
	if len(got) != 25 {
		t.Fatalf("delivered %d of 25", len(got))
	}
	if m := maxInWindow(times, time.Minute); m > DeliveriesPerChannelPerMinute {
		t.Fatalf("%d deliveries in one 60 s window", m)
	}
	if d := f.deliveries(store.DeliveryFilter{Status: store.DeliveryDelivered}); len(d) != 25 {
		t.Fatalf("%d delivered in the store", len(d))
	}
}

// TestProjectRateLimit: 200 notices across the channels of one project → never more than
// 60 in any 60 s window, all delivered. With 5 channels the channel buckets bind; with 10
// the project's does.
func TestProjectRateLimit(t *testing.T) {
	for _, channels := range []int{5, 10} {
		t.Run(fmt.Sprint(channels, " channels"), func(t *testing.T) {
			f := newFixture(t)
			rc := newReceiver(t, f.clock)
			var ids []string
			for i := range channels {
				id, _ := f.webhook(fmt.Sprintf("%s/ch%d", rc.srv.URL, i))
				ids = append(ids, id)
			}
			f.alert(ids...)
			groups := 200 / channels
			for i := range groups {
				f.ingest(order(fmt.Sprint(i), fmt.Sprintf("G%03d", i), "failed", 1))
				f.run(f.clock.Now())
				f.clock.Advance(60 * time.Second / time.Duration(groups))
			}
			f.runFor(2 * time.Hour)
			got := rc.all()
			if len(got) != 200 {
				t.Fatalf("delivered %d of 200", len(got))
			}
			var all []time.Time
			per := map[string][]time.Time{}
			for _, g := range got {
				all = append(all, g.at)
				per[g.path] = append(per[g.path], g.at)
			}
			if m := maxInWindow(all, time.Minute); m > DeliveriesPerProjectPerMinute {
				t.Fatalf("%d deliveries of the project in one 60 s window", m)
			}
			for p, ts := range per {
				if m := maxInWindow(ts, time.Minute); m > DeliveriesPerChannelPerMinute {
					t.Fatalf("%d deliveries to %s in one 60 s window", m, p)
				}
			}
		})
	}
}

// TestCoalescing: 10,000 matches of one incident inside one cooldown give one opening per
// channel and an exact occurrence count.
func TestCoalescing(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	c1, _ := f.webhook(rc.srv.URL + "/a")
	c2, _ := f.webhook(rc.srv.URL + "/b")
	f.alert(c1, c2)
	batch := make([]string, 1000)
	for round := range 10 {
		for i := range batch {
			batch[i] = order(fmt.Sprintf("r%di%d", round, i), "DE", "failed", float64(i))
		}
		f.ingest(batch...)
		f.run(f.clock.Now())
		f.clock.Advance(10 * time.Second)
	}
	incs := f.incidents(store.IncidentFilter{})
	if len(incs) != 1 || incs[0].Occurrences != 10_000 {
		t.Fatalf("incidents %+v", incs)
	}
	openings := f.deliveries(store.DeliveryFilter{Kind: store.NoticeOpening})
	if len(openings) != 2 {
		t.Fatalf("%d openings, want one per channel", len(openings))
	}
	if got := rc.all(); len(got) != 2 {
		t.Fatalf("receiver got %d inside the cooldown, want the 2 openings", len(got))
	}
	// What the openings did not report waits in one summary per channel.
	per := map[string]int64{}
	for _, d := range f.deliveries(store.DeliveryFilter{}) {
		per[d.ChannelID] += d.Occurrences
	}
	if len(per) != 2 || per[c1] != 10_000 || per[c2] != 10_000 {
		t.Fatalf("occurrences reported per channel %v, want 10000 each", per)
	}
	if sums := f.deliveries(store.DeliveryFilter{Kind: store.NoticeSummary}); len(sums) != 2 || sums[0].WaitingReason != WaitCooldown {
		t.Fatalf("summaries %+v", sums)
	}
}

// TestBackoffAndDeadLetter: a receiver that always fails is tried 8 times, 30 s apart
// doubling, then the delivery is dead_letter; retry sends it again.
func TestBackoffAndDeadLetter(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	fail := true
	rc.answer = func(n int, r *http.Request) (int, http.Header, string) {
		if fail {
			return http.StatusBadGateway, nil, "upstream down; token tok-0123456789-secret " + strings.Repeat("x", 3000)
		}
		return http.StatusOK, nil, ""
	}
	ch, _ := f.webhook(rc.srv.URL)
	d, err := f.svc.TestChannel(f.project, ch)
	if err != nil || d.Kind != store.NoticeTest || d.Status != store.DeliveryPending {
		t.Fatalf("test delivery %+v %v", d, err)
	}
	f.runFor(24 * time.Hour)
	got := rc.all()
	if len(got) != MaxAttempts {
		t.Fatalf("%d attempts, want %d", len(got), MaxAttempts)
	}
	for i := 1; i < len(got); i++ {
		if want := FirstBackoff << (i - 1); got[i].at.Sub(got[i-1].at) != want {
			t.Fatalf("attempt %d came %v after the previous, want %v", i+1, got[i].at.Sub(got[i-1].at), want)
		}
		if got[i].header.Get("webhook-id") != d.ID {
			t.Fatal("a retry changed the webhook-id")
		}
	}
	d, err = f.svc.Delivery(f.project, d.ID)
	if err != nil || d.Status != store.DeliveryDeadLetter || d.Attempts != MaxAttempts || d.LastStatus != http.StatusBadGateway {
		t.Fatalf("after 8 attempts: %+v %v", d, err)
	}
	if len(d.LastError) > MaxLastError || strings.Contains(d.LastError, "tok-0123456789-secret") || !strings.Contains(d.LastError, "[redacted]") {
		t.Fatalf("last_error (%d bytes) not bounded or not redacted: %.200s", len(d.LastError), d.LastError)
	}
	fail = false
	if d, err = f.svc.RetryDelivery(f.project, d.ID); err != nil || d.Status != store.DeliveryPending {
		t.Fatalf("retry: %+v %v", d, err)
	}
	f.runFor(time.Minute)
	if d, _ = f.svc.Delivery(f.project, d.ID); d.Status != store.DeliveryDelivered {
		t.Fatalf("after retry: %+v", d)
	}
	if _, err := f.svc.RetryDelivery(f.project, d.ID); !store.IsCode(err, store.CodeConflict) {
		t.Fatalf("retrying a delivered delivery: %v", err)
	}
}

// TestReceiverAnswers: Retry-After (seconds or a date) sets the next attempt; 4xx other
// than 408 and 429 dead-letters at once; 3xx is not followed and is retried.
func TestReceiverAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		header   http.Header
		wait     time.Duration // until the second attempt; 0: none
		finalDLQ bool
	}{
		{"429 with seconds", http.StatusTooManyRequests, http.Header{"Retry-After": {"90"}}, 90 * time.Second, false},
		{"503 with a date", http.StatusServiceUnavailable, http.Header{"Retry-After": {"Sat, 21 Nov 2026 12:10:00 GMT"}}, 10 * time.Minute, false},
		{"408 without", http.StatusRequestTimeout, nil, FirstBackoff, false},
		{"500 with nonsense", http.StatusInternalServerError, http.Header{"Retry-After": {"soon"}}, FirstBackoff, false},
		{"302", http.StatusFound, http.Header{"Location": {"/elsewhere"}}, FirstBackoff, false},
		{"400", http.StatusBadRequest, nil, 0, true},
		{"410", http.StatusGone, nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			rc := newReceiver(t, f.clock)
			rc.answer = func(n int, r *http.Request) (int, http.Header, string) {
				if n == 1 {
					return tc.status, tc.header, "no"
				}
				return http.StatusOK, nil, ""
			}
			ch, _ := f.webhook(rc.srv.URL)
			d, err := f.svc.TestChannel(f.project, ch)
			if err != nil {
				t.Fatal(err)
			}
			f.runFor(24 * time.Hour)
			got := rc.all()
			d, _ = f.svc.Delivery(f.project, d.ID)
			if tc.finalDLQ {
				if len(got) != 1 || d.Status != store.DeliveryDeadLetter || d.Attempts != 1 {
					t.Fatalf("%d attempts, delivery %+v", len(got), d)
				}
				return
			}
			if len(got) != 2 || d.Status != store.DeliveryDelivered {
				t.Fatalf("%d attempts, delivery %+v", len(got), d)
			}
			if w := got[1].at.Sub(got[0].at); w != tc.wait {
				t.Fatalf("second attempt %v after the first, want %v", w, tc.wait)
			}
		})
	}
}

// TestRestartResendsDelivering: a delivery that was delivering when the process died goes
// back to pending and out again with the same webhook-id.
func TestRestartResendsDelivering(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	ch, _ := f.webhook(rc.srv.URL)
	f.alert(ch)
	f.ingest(order("o1", "DE", "failed", 1))
	// Claim without sending, as a process killed mid-send leaves it.
	ids := []string{}
	for _, d := range f.deliveries(store.DeliveryFilter{}) {
		ids = append(ids, d.ID)
	}
	claims, err := f.svc.disp.claim(ids, f.clock.Now())
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v %v", claims, err)
	}
	if d := f.deliveries(store.DeliveryFilter{})[0]; d.Status != store.DeliveryDelivering {
		t.Fatalf("claimed delivery is %s", d.Status)
	}
	f.restart()
	// The cut attempt spent the channel's token (the receiver may have seen it): the
	// resend waits for the next one.
	f.runFor(time.Minute)
	got := rc.all()
	if len(got) != 1 || got[0].header.Get("webhook-id") != ids[0] {
		t.Fatalf("after restart the receiver got %d", len(got))
	}
	if d := f.deliveries(store.DeliveryFilter{})[0]; d.Status != store.DeliveryDelivered || d.Attempts != 2 {
		t.Fatalf("after restart: %+v", d)
	}
}

// TestDisabledChannelHolds: a delivery to a channel disabled after it was queued waits,
// says why, and goes when the channel is enabled again.
func TestDisabledChannelHolds(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	ch, _ := f.webhook(rc.srv.URL)
	f.alert(ch)
	f.ingest(order("o1", "DE", "failed", 1))
	if _, err := f.svc.SetChannelEnabled(f.project, ch, false); err != nil {
		t.Fatal(err)
	}
	f.runFor(10 * time.Minute)
	if len(rc.all()) != 0 {
		t.Fatal("sent through a disabled channel")
	}
	d := f.deliveries(store.DeliveryFilter{})[0]
	if d.Status != store.DeliveryPending || d.WaitingReason != WaitChannelDisabled {
		t.Fatalf("held delivery %+v", d)
	}
	if _, err := f.svc.SetChannelEnabled(f.project, ch, true); err != nil {
		t.Fatal(err)
	}
	f.run(f.clock.Now())
	if len(rc.all()) != 1 {
		t.Fatal("the held delivery did not go when the channel was enabled")
	}
}

// TestSimulationWritesNothing: simulating, on a live incident and on drafts, leaves the
// incident and delivery buckets byte-identical, and reports the gates the live state sets.
func TestSimulationWritesNothing(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	ch, _ := f.webhook(rc.srv.URL)
	a := f.alert(ch)
	f.ingest(order("o1", "DE", "failed", 1))
	f.run(f.clock.Now())
	before, err := f.st.AlertStateDigest()
	if err != nil {
		t.Fatal(err)
	}
	sim, err := f.svc.SimulateAlert(f.project, a.ID, []byte(order("o2", "DE", "failed", 2)))
	if err != nil {
		t.Fatal(err)
	}
	gates := map[string]bool{}
	for _, g := range sim.Gates {
		gates[g.Gate] = true
	}
	if !sim.Matched || !gates["incident_open"] || !gates["cooldown"] || !gates["channel_rate_limit"] || sim.WouldNotify {
		t.Fatalf("simulation on an open incident: %+v", sim)
	}
	if sim, err = f.svc.SimulateAlert(f.project, a.ID, []byte(order("o3", "FR", "failed", 2))); err != nil || !sim.WouldNotify {
		t.Fatalf("a new group would open an incident: %+v %v", sim, err)
	}
	if _, err := f.svc.SimulateDraft(f.project, store.AlertInput{Name: ptr("d"), ModelKey: ptr("orders"),
		Conditions: &[]store.AlertCondition{{Field: "amount", Operator: "gt", Value: 0}}}, []byte(order("o4", "DE", "failed", 2))); err != nil {
		t.Fatal(err)
	}
	after, err := f.st.AlertStateDigest()
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Fatal("simulation changed the incident or delivery buckets")
	}
}

// FuzzRetryAfter: any Retry-After value gives a wait between 0 and MaxRetryAfter, and
// whole seconds are read as such.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "-5", "Sat, 21 Nov 2026 12:10:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "99999999999999999999", " 7 "} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d := retryAfter(v, now)
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("%q: %v", v, d)
		}
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 && n < 3600 && d != time.Duration(n)*time.Second {
			t.Fatalf("%q: %v, want %d s", v, d, n)
		}
	})
}

// TestPruneHistory: deliveries that ended are kept 30 days and resolved incidents 90 (with
// their occurrences and deliveries); open incidents and queued deliveries stay whatever
// their age, and the indexes stay consistent (the fixture checks the file at cleanup).
func TestPruneHistory(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, f.clock)
	ch, _ := f.webhook(rc.srv.URL)
	f.alert(ch)
	f.ingest(order("o1", "DE", "failed", 1), order("o2", "FR", "failed", 1))
	f.runFor(time.Minute)
	incs := f.incidents(store.IncidentFilter{})
	if len(incs) != 2 {
		t.Fatalf("incidents %+v", incs)
	}
	if _, err := f.svc.Resolve(f.project, incs[0].ID); err != nil {
		t.Fatal(err)
	}
	f.runFor(time.Minute)
	if n := len(f.deliveries(store.DeliveryFilter{Status: store.DeliveryDelivered})); n != 3 {
		t.Fatalf("%d delivered, want 2 openings and a resolution", n)
	}
	// A test delivery that never gets through stays queued however old it is.
	rc.answer = func(int, *http.Request) (int, http.Header, string) { return 503, nil, "" }
	if _, err := f.svc.TestChannel(f.project, ch); err != nil {
		t.Fatal(err)
	}
	f.runFor(time.Minute)

	if d, i, err := f.svc.PruneHistory(); err != nil || d != 0 || i != 0 {
		t.Fatalf("young history pruned: %d %d %v", d, i, err)
	}
	f.clock.Advance(31 * 24 * time.Hour)
	if d, i, err := f.svc.PruneHistory(); err != nil || d != 3 || i != 0 {
		t.Fatalf("after 31 days: %d deliveries, %d incidents, %v", d, i, err)
	}
	f.clock.Advance(60 * 24 * time.Hour)
	if d, i, err := f.svc.PruneHistory(); err != nil || d != 0 || i != 1 {
		t.Fatalf("after 91 days: %d deliveries, %d incidents, %v", d, i, err)
	}
	left := f.incidents(store.IncidentFilter{})
	if len(left) != 1 || left[0].Status != store.IncidentOpen {
		t.Fatalf("left %+v", left)
	}
	if q := f.deliveries(store.DeliveryFilter{}); len(q) != 1 || q[0].Kind != store.NoticeTest || !q[0].Queued() {
		t.Fatalf("deliveries left %+v", q)
	}
	if _, err := f.svc.Incident(f.project, incs[0].ID); !store.IsCode(err, store.CodeNotFound) {
		t.Fatalf("the pruned incident: %v", err)
	}
}
