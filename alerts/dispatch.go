package alerts

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"lookout/store"
)

// The delivery policy (CONTRACTS §6; docs/alerts.md says it in a user's words).
const (
	MaxAttempts   = 8
	FirstBackoff  = 30 * time.Second
	MaxBackoff    = time.Hour
	MaxRetryAfter = 24 * time.Hour
	MaxLastError  = 1024
	// MaxInFlight bounds the sends under way at once; more due deliveries wait their turn.
	MaxInFlight = 16
	// DisabledRecheck is how often a delivery held by a disabled channel looks again
	// (enabling the channel wakes it at once).
	DisabledRecheck = time.Minute
)

// Why a pending delivery waits (its waiting_reason).
const (
	WaitCooldown        = "cooldown"
	WaitChannelRate     = "channel_rate_limit"
	WaitProjectRate     = "project_rate_limit"
	WaitChannelDisabled = "channel_disabled"
	WaitSendSlots       = "send_slots"
)

// Clock is the dispatcher's time: Now, and timers that fire when it has moved on. Tests
// inject a settable one (internal/testclock) so minutes of policy pass without sleeping.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

// ClockOf is a Clock reading now, with real timers (nil now: the real clock).
func ClockOf(now func() time.Time) Clock {
	if now == nil {
		return realClock{}
	}
	return nowClock(now)
}

type nowClock func() time.Time

func (c nowClock) Now() time.Time                       { return c() }
func (nowClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// backoff is the wait after the n-th failed attempt: 30 s, doubling, at most an hour.
func backoff(n int) time.Duration {
	d := FirstBackoff
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// queued is what the dispatcher keeps in memory of a delivery in the queue.
type queued struct {
	due       time.Time
	channelID string
	projectID string
	status    string
	created   time.Time
	reason    string
	version   int       // the stored version put last saw: an older one never overwrites it
	written   time.Time // the next_attempt_at last written for a wait
}

// Dispatcher owns the delivery queue's timers: one goroutine (Run) takes due deliveries
// in order, spends a token of the channel's and of the project's bucket, marks them
// delivering and hands them to a send goroutine, which records the outcome. Everything it
// knows is also in bbolt: after a crash, Run starts by putting deliveries that were
// delivering back to pending.
type Dispatcher struct {
	svc         *Service
	clock       Clock
	log         *slog.Logger
	client      *http.Client
	rootCAs     *x509.CertPool
	sendTimeout time.Duration

	mu       sync.Mutex
	queue    map[string]*queued
	inflight int
	chLim    map[string]*rate.Limiter
	prLim    map[string]*rate.Limiter
	wake     chan struct{}

	sends       sync.WaitGroup
	sendCtx     context.Context
	cancelSends context.CancelFunc
	stopping    atomic.Bool

	statsMu  sync.Mutex
	outcomes map[[2]string]int64 // (channel type, status) -> attempts that ended so
}

func newDispatcher(svc *Service, c Config) *Dispatcher {
	d := &Dispatcher{svc: svc, clock: c.Clock, log: c.Log, client: c.Client, rootCAs: c.RootCAs, sendTimeout: c.SendTimeout,
		queue: map[string]*queued{}, chLim: map[string]*rate.Limiter{}, prLim: map[string]*rate.Limiter{},
		wake: make(chan struct{}, 1), outcomes: map[[2]string]int64{}}
	d.sendCtx, d.cancelSends = context.WithCancel(context.Background())
	return d
}

func (d *Dispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// enqueue tells the dispatcher of a delivery a committed transaction queued or changed.
func (d *Dispatcher) enqueue(dl *store.Delivery) {
	d.mu.Lock()
	d.put(dl)
	d.mu.Unlock()
	d.poke()
}

func (d *Dispatcher) put(dl *store.Delivery) {
	q := d.queue[dl.ID]
	if q != nil && dl.Version < q.version {
		return // a newer write (a retry) got here first
	}
	if !dl.Queued() {
		delete(d.queue, dl.ID)
		return
	}
	if q == nil {
		q = &queued{channelID: dl.ChannelID, projectID: dl.ProjectID, created: dl.CreatedAt}
		d.queue[dl.ID] = q
	}
	q.status, q.reason, q.version = dl.Status, dl.WaitingReason, dl.Version
	if dl.NextAttemptAt != nil {
		q.due = *dl.NextAttemptAt
	}
}

// limiter returns the token bucket of one channel or project: burst 1, so no 60 s window
// ever holds more than perMinute sends, and the queue drains evenly instead of in bursts.
func limiter(m map[string]*rate.Limiter, key string, perMinute int) *rate.Limiter {
	l := m[key]
	if l == nil {
		l = rate.NewLimiter(rate.Every(time.Minute/time.Duration(perMinute)), 1)
		m[key] = l
	}
	return l
}

// budget reports how long a notice to the channel would wait for a token now, and whose
// budget ("channel" or "project") holds it; it spends nothing.
func (d *Dispatcher) budget(projectID, channelID string) (time.Duration, string) {
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	wait := func(l *rate.Limiter, perMinute int) time.Duration {
		if l == nil {
			return 0
		}
		if t := l.TokensAt(now); t < 1 {
			return time.Duration((1 - t) * float64(time.Minute) / float64(perMinute))
		}
		return 0
	}
	wc, wp := wait(d.chLim[channelID], DeliveriesPerChannelPerMinute), wait(d.prLim[projectID], DeliveriesPerProjectPerMinute)
	if wp > wc {
		return wp, "project"
	}
	return wc, "channel"
}

// release lets the deliveries a disabled channel held go at once (it was enabled).
func (d *Dispatcher) release(channelID string) {
	now := d.clock.Now()
	d.mu.Lock()
	for _, q := range d.queue {
		if q.channelID == channelID && q.reason == WaitChannelDisabled && q.due.After(now) {
			q.due = now
		}
	}
	d.mu.Unlock()
	d.poke()
}

// requeue puts a delivery that was delivering when its outcome was lost (a crash, a failed
// write) back to pending, to go at once with the same id: at least once, never lost.
func requeue(t *store.IncidentTx, dl *store.Delivery, now time.Time) error {
	dl.Status, dl.NextAttemptAt, dl.WaitingReason = store.DeliveryPending, &now, ""
	return t.SaveDelivery(dl)
}

// recover puts deliveries a crash left delivering back to pending (to go out again with
// the same id) and loads the queue.
func (d *Dispatcher) recover() error {
	var all, recent []store.Delivery
	err := d.svc.Store.UpdateIncidents(func(t *store.IncidentTx) error {
		var err error
		if all, err = t.QueuedDeliveries(); err != nil {
			return err
		}
		if recent, err = t.RecentAttempts(d.clock.Now().Add(-time.Minute)); err != nil {
			return err
		}
		now := d.clock.Now()
		for i := range all {
			if dl := &all[i]; dl.Status == store.DeliveryDelivering {
				if err := requeue(t, dl, now); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.mu.Lock()
	for i := range all {
		d.put(&all[i])
	}
	// The buckets start where the last process left them: each attempt of the last minute
	// spends its token again, at its time, so a restart never opens a fresh budget.
	sort.Slice(recent, func(i, j int) bool { return store.LastAttempt(&recent[i]).Before(store.LastAttempt(&recent[j])) })
	for i := range recent {
		at := store.LastAttempt(&recent[i])
		limiter(d.chLim, recent[i].ChannelID, DeliveriesPerChannelPerMinute).ReserveN(at, 1)
		limiter(d.prLim, recent[i].ProjectID, DeliveriesPerProjectPerMinute).ReserveN(at, 1)
	}
	d.mu.Unlock()
	return nil
}

// Run dispatches until ctx ends. It does not wait for sends under way: Close does.
func (d *Dispatcher) Run(ctx context.Context) {
	for {
		if err := d.recover(); err == nil {
			break
		} else {
			d.log.Error("alerts: cannot load the delivery queue; trying again in a second", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-d.clock.After(time.Second):
		}
	}
	for {
		next, ok := d.Pass()
		var timer <-chan time.Time
		if ok {
			timer = d.clock.After(next.Sub(d.clock.Now()))
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer:
		}
	}
}

// Pass starts every delivery that is due and may go now, records why the others wait, and
// returns when the next one falls due (false: none waits).
func (d *Dispatcher) Pass() (time.Time, bool) {
	if d.stopping.Load() {
		return time.Time{}, false
	}
	now := d.clock.Now()
	d.mu.Lock()
	var due, stuck []string
	for id, q := range d.queue {
		if q.status == store.DeliveryDelivering || q.due.After(now) {
			continue
		}
		if q.status == statusStuck {
			stuck = append(stuck, id)
			continue
		}
		due = append(due, id)
	}
	sort.Slice(due, func(i, j int) bool {
		a, b := d.queue[due[i]], d.queue[due[j]]
		if !a.due.Equal(b.due) {
			return a.due.Before(b.due)
		}
		return due[i] < due[j]
	})
	waits := map[string]wait{}
	var start []string
	type tokens struct{ ch, pr *rate.Reservation }
	held := map[string]tokens{}
	// Deliveries that wait for a token get their place in line: each bucket's next token
	// is promised to the first in line, the one after to the next, and so on, so a
	// delivery's next_attempt_at is a real estimate, written once, not at every pass.
	chEvery, prEvery := time.Minute/DeliveriesPerChannelPerMinute, time.Minute/DeliveriesPerProjectPerMinute
	nextCh, nextPr := map[string]time.Time{}, map[string]time.Time{}
	promised := func(m map[string]time.Time, key string, l *rate.Limiter) time.Time {
		if t, ok := m[key]; ok {
			return t
		}
		r := l.ReserveN(now, 1) // asked, not spent
		t := now.Add(r.DelayFrom(now))
		r.CancelAt(now)
		return t
	}
	for _, id := range due {
		q := d.queue[id]
		if d.inflight+len(start) >= MaxInFlight {
			d.wait(waits, id, q, WaitSendSlots, q.due)
			continue
		}
		cl := limiter(d.chLim, q.channelID, DeliveriesPerChannelPerMinute)
		pl := limiter(d.prLim, q.projectID, DeliveriesPerProjectPerMinute)
		tc, tp := promised(nextCh, q.channelID, cl), promised(nextPr, q.projectID, pl)
		if tc.After(now) || tp.After(now) {
			// Only the bucket that holds this delivery back moves on: a backlog on one
			// channel must not push the project's other channels back.
			at, reason := tc, WaitChannelRate
			if tp.After(tc) {
				at, reason = tp, WaitProjectRate
				nextPr[q.projectID] = at.Add(prEvery)
			}
			nextCh[q.channelID] = at.Add(chEvery)
			d.wait(waits, id, q, reason, at)
			continue
		}
		start = append(start, id)
		held[id] = tokens{cl.ReserveN(now, 1), pl.ReserveN(now, 1)}
		q.status = store.DeliveryDelivering
	}
	d.inflight += len(start)
	d.mu.Unlock()

	if len(waits) > 0 {
		d.recordWaits(waits)
	}
	if len(stuck) > 0 {
		d.unstick(stuck, now)
	}
	if len(start) > 0 {
		claims, err := d.claim(start, now)
		if err != nil {
			// Rolled back: nothing was marked delivering, so nothing may be sent.
			d.log.Error("alerts: cannot mark deliveries as delivering; trying again shortly", "err", err)
			claims = nil
		}
		d.mu.Lock()
		freed := 0
		for _, id := range start {
			c := claims[id]
			if c != nil && c.notice != nil {
				continue
			}
			// Not started: gone, held by a disabled channel, or the write failed. Its
			// tokens go back.
			d.inflight--
			freed++
			t := held[id]
			t.ch.CancelAt(now)
			t.pr.CancelAt(now)
			q := d.queue[id]
			switch {
			case q == nil:
			case err != nil:
				q.status, q.reason, q.due = store.DeliveryPending, "", now.Add(time.Second)
			case c == nil:
				delete(d.queue, id)
			default:
				d.put(&c.delivery)
			}
		}
		d.mu.Unlock()
		for _, id := range start {
			if c := claims[id]; c != nil && c.notice != nil {
				d.sends.Add(1)
				go d.send(c)
			}
		}
		if freed > 0 {
			d.poke() // slots came back: whoever waits for one may go
		}
	}
	return d.NextDue()
}

// statusStuck marks, in memory only, a delivery whose outcome could not be written: bbolt
// still says delivering. unstick puts it back to pending (it goes again, same id).
const statusStuck = "stuck"

// wait is why a delivery waits and until when, copied out of the queue under d.mu.
type wait struct {
	reason string
	due    time.Time
	write  bool // the stored delivery must be told
}

// wait records, under d.mu, that a due delivery waits; the store hears of it only when
// the reason changes or the time moves by more than a second.
func (d *Dispatcher) wait(waits map[string]wait, id string, q *queued, reason string, due time.Time) {
	write := reason != q.reason || q.written.IsZero() || due.Sub(q.written).Abs() > time.Second
	q.reason, q.due = reason, due
	if write {
		q.written = due
	}
	waits[id] = wait{reason: reason, due: due, write: write}
}

// NextDue returns when the next queued delivery falls due (false: none waits on time).
// Deliveries waiting for a send slot count only when one is free: a finishing send wakes
// the loop.
func (d *Dispatcher) NextDue() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var next time.Time
	found := false
	for _, q := range d.queue {
		if q.status == store.DeliveryDelivering {
			continue
		}
		if q.reason == WaitSendSlots && d.inflight >= MaxInFlight {
			continue
		}
		if !found || q.due.Before(next) {
			next, found = q.due, true
		}
	}
	return next, found
}

// recordWaits writes why deliveries wait and when they go, in one transaction.
func (d *Dispatcher) recordWaits(waits map[string]wait) {
	err := d.svc.Store.UpdateIncidents(func(t *store.IncidentTx) error {
		for id, w := range waits {
			if !w.write {
				continue
			}
			dl, err := t.Delivery(id)
			if err != nil {
				if store.IsCode(err, store.CodeNotFound) {
					continue
				}
				return err
			}
			if !dl.Queued() || dl.Status == store.DeliveryDelivering {
				continue
			}
			due := w.due
			dl.WaitingReason, dl.NextAttemptAt = w.reason, &due
			if err := t.SaveDelivery(&dl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		d.log.Warn("alerts: cannot record why deliveries wait", "err", err)
	}
}

// unstick puts deliveries whose outcome could not be recorded back to pending, to go
// again with the same id (the receiver may see them twice: at least once, never lost).
func (d *Dispatcher) unstick(ids []string, now time.Time) {
	var back []store.Delivery
	err := d.svc.Store.UpdateIncidents(func(t *store.IncidentTx) error {
		back = back[:0]
		for _, id := range ids {
			dl, err := t.Delivery(id)
			if store.IsCode(err, store.CodeNotFound) {
				continue
			} else if err != nil {
				return err
			}
			if dl.Status == store.DeliveryDelivering {
				if err := requeue(t, &dl, now); err != nil {
					return err
				}
			}
			back = append(back, dl)
		}
		return nil
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		for _, id := range ids {
			if q := d.queue[id]; q != nil {
				q.due = now.Add(FirstBackoff)
			}
		}
		return
	}
	for i := range back {
		d.put(&back[i])
	}
}

// claim is a delivery marked delivering, with what its send needs.
type claim struct {
	delivery store.Delivery
	channel  store.Channel
	notice   *Notice // nil: not started (held by a disabled channel)
}

// claim marks due deliveries delivering, in one transaction, and builds their notices.
// A delivery that left the queue meanwhile is absent from the result.
func (d *Dispatcher) claim(ids []string, now time.Time) (map[string]*claim, error) {
	out := map[string]*claim{}
	err := d.svc.Store.UpdateIncidents(func(t *store.IncidentTx) error {
		clear(out)
		for _, id := range ids {
			dl, err := t.Delivery(id)
			if store.IsCode(err, store.CodeNotFound) {
				continue
			} else if err != nil {
				return err
			}
			if dl.Status != store.DeliveryPending && dl.Status != store.DeliveryFailed {
				continue
			}
			ch, err := t.Channel(dl.ChannelID)
			if err != nil {
				return err
			}
			c := &claim{delivery: dl, channel: ch}
			out[id] = c
			if dl.Kind != store.NoticeTest && !ch.Enabled {
				next := now.Add(DisabledRecheck)
				c.delivery.WaitingReason, c.delivery.NextAttemptAt = WaitChannelDisabled, &next
				if err := t.SaveDelivery(&c.delivery); err != nil {
					return err
				}
				continue
			}
			n := &Notice{Type: noticeTypes[dl.Kind], DeliveryID: dl.ID, Kind: dl.Kind, ProjectID: dl.ProjectID,
				Channel: NoticeChannel{ID: ch.ID, Name: ch.Name, Type: ch.Type}}
			if dl.IncidentID != "" {
				inc, err := t.IncidentByID(dl.IncidentID)
				if err != nil {
					return err
				}
				if dl.Kind == store.NoticeSummary && inc.Status != store.IncidentOpen {
					// Retried after the incident was acknowledged or resolved: a summary
					// of it says nothing the receiver should act on.
					c.delivery.Status, c.delivery.NextAttemptAt, c.delivery.WaitingReason = store.DeliveryDeadLetter, nil, ""
					c.delivery.LastError = supersededSummary(inc.Status)
					if err := t.SaveDelivery(&c.delivery); err != nil {
						return err
					}
					continue
				}
				a, err := t.Alert(inc.AlertID)
				if err != nil {
					return err
				}
				latest, err := t.LatestOccurrences(inc.ID, 1)
				if err != nil {
					return err
				}
				n.Alert = &NoticeAlert{ID: a.ID, Name: a.Name, Severity: a.Severity, ModelKey: a.ModelKey}
				n.Incident = &NoticeIncident{ID: inc.ID, Status: inc.Status, Group: inc.Group, Occurrences: inc.Occurrences,
					FirstAt: inc.FirstAt, LastAt: inc.LastAt}
				n.NewOccurrences = dl.Occurrences
				if len(latest) > 0 {
					n.Latest = &latest[0]
				}
				if dl.Kind == store.NoticeOpening || dl.Kind == store.NoticeSummary {
					// Summaries of an open incident go at most once per cooldown: the next
					// one per channel is due a cooldown after this notice goes out.
					if inc.NextSummaryAt == nil {
						inc.NextSummaryAt = map[string]time.Time{}
					}
					inc.NextSummaryAt[ch.ID] = now.Add(time.Duration(a.CooldownSeconds) * time.Second)
					if err := t.SaveIncident(&inc); err != nil {
						return err
					}
				}
			}
			n.Message = n.text()
			c.delivery.Status, c.delivery.WaitingReason, c.delivery.NextAttemptAt = store.DeliveryDelivering, "", nil
			c.delivery.Attempts++
			if err := t.SaveDelivery(&c.delivery); err != nil {
				return err
			}
			c.notice = n
		}
		return nil
	})
	return out, err
}

// result is how one send attempt ended.
type result struct {
	err        error
	status     int           // the receiver's HTTP status or SMTP reply code, if any
	permanent  bool          // the receiver refused the notice for good (4xx but 408 and 429)
	retryAfter time.Duration // the receiver's Retry-After
}

func (d *Dispatcher) send(c *claim) {
	defer d.sends.Done()
	ctx, cancel := context.WithTimeout(d.sendCtx, d.sendTimeout)
	c.notice.Timestamp = d.clock.Now().UTC().Truncate(time.Second)
	r := channelTypes[c.channel.Type].send(ctx, d, &c.channel, c.notice)
	cancel()
	d.finish(c, r)
}

// finish records a send's outcome: delivered; failed with its next attempt scheduled; or
// dead_letter after MaxAttempts or a permanent refusal. A send cut by shutdown goes back to
// pending, to go again first thing after the next start.
func (d *Dispatcher) finish(c *claim, r result) {
	cut := r.err != nil && d.sendCtx.Err() != nil
	var dl store.Delivery
	err := d.svc.Store.UpdateIncidents(func(t *store.IncidentTx) (err error) {
		if dl, err = t.Delivery(c.delivery.ID); err != nil {
			return err
		}
		now := d.clock.Now()
		dl.LastStatus = r.status
		switch {
		case cut:
			// Counted as an attempt: the receiver may have seen it, so it must not become
			// a merge target again (more occurrences under an id already processed).
			dl.Status, dl.NextAttemptAt = store.DeliveryPending, &now
		case r.err == nil:
			dl.Status, dl.DeliveredAt, dl.NextAttemptAt, dl.LastError = store.DeliveryDelivered, &now, nil, ""
		default:
			dl.LastError = redact(r.err.Error(), c.channel.Secrets)
			if r.permanent || dl.Attempts >= MaxAttempts {
				dl.Status, dl.NextAttemptAt = store.DeliveryDeadLetter, nil
			} else {
				wait := backoff(dl.Attempts)
				if r.retryAfter > 0 {
					wait = min(r.retryAfter, MaxRetryAfter)
				}
				next := now.Add(wait)
				dl.Status, dl.NextAttemptAt = store.DeliveryFailed, &next
			}
		}
		return t.SaveDelivery(&dl)
	})
	d.mu.Lock()
	d.inflight--
	if err != nil {
		// The outcome is lost with the write: bbolt still says delivering. After a while
		// unstick puts it back to pending (or a restart does), and it goes again.
		d.log.Error("alerts: cannot record a delivery's outcome", "delivery_id", c.delivery.ID, "err", err)
		if q := d.queue[c.delivery.ID]; q != nil {
			q.status, q.due = statusStuck, d.clock.Now().Add(FirstBackoff)
		}
	} else {
		d.put(&dl)
	}
	d.mu.Unlock()
	if err == nil && !cut {
		d.statsMu.Lock()
		d.outcomes[[2]string{c.channel.Type, dl.Status}]++
		d.statsMu.Unlock()
		if dl.Status != store.DeliveryDelivered {
			d.log.Warn("alerts: delivery attempt failed", "delivery_id", dl.ID, "channel_id", dl.ChannelID, "attempt", dl.Attempts, "status", dl.Status, "error", dl.LastError)
		}
	}
	d.poke()
}

// redact removes every secret of the channel from an error and bounds it to MaxLastError
// bytes of valid UTF-8.
func redact(msg string, secrets map[string]string) string {
	// Every secret, and the forms net/url prints a URL secret in (its re-rendering, its
	// path and query), longest first, so no secret leaves a piece of another behind.
	var forms []string
	for _, s := range secrets {
		forms = append(forms, s)
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			forms = append(forms, u.String(), u.Redacted(), u.EscapedPath(), u.RawQuery, u.Host+u.EscapedPath())
		}
	}
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	for _, f := range forms {
		if len(f) >= 4 {
			msg = strings.ReplaceAll(msg, f, "[redacted]")
		}
	}
	if len(msg) > MaxLastError {
		msg = msg[:MaxLastError]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
	}
	return msg
}

// Close stops new sends and waits for those under way until ctx ends; then it cuts them
// (they go out again after the next start).
func (d *Dispatcher) Close(ctx context.Context) error {
	d.stopping.Store(true)
	done := make(chan struct{})
	go func() { d.sends.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		d.cancelSends()
		<-done
		return errors.New("alerts: shutdown cut sends under way; they go out again after the next start")
	}
}

// Wait blocks until no send is under way; tests call it between passes.
func (d *Dispatcher) Wait() { d.sends.Wait() }

// QueueStats is the delivery queue's state, for metrics.
type QueueStats struct {
	Depth         map[string]int // by status: pending, delivering, failed
	OldestPending time.Duration  // age of the oldest delivery waiting to go (pending or failed)
	Outcomes      map[[2]string]int64
}

// Stats reads the queue's state from memory.
func (d *Dispatcher) Stats() QueueStats {
	st := QueueStats{Depth: map[string]int{store.DeliveryPending: 0, store.DeliveryDelivering: 0, store.DeliveryFailed: 0}, Outcomes: map[[2]string]int64{}}
	now := d.clock.Now()
	d.mu.Lock()
	for _, q := range d.queue {
		st.Depth[q.status]++
		if q.status != store.DeliveryDelivering && !q.created.IsZero() {
			st.OldestPending = max(st.OldestPending, now.Sub(q.created))
		}
	}
	d.mu.Unlock()
	d.statsMu.Lock()
	for k, v := range d.outcomes {
		st.Outcomes[k] = v
	}
	d.statsMu.Unlock()
	return st
}

// marshalNotice is the JSON body of a webhook.
func marshalNotice(n *Notice) []byte {
	b, _ := json.Marshal(n)
	return b
}
