// Package limits holds the service's request budgets: keyed token buckets and body caps.
package limits

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ManagementBody is the largest console or Management request body (spec §8): 2 MiB.
const ManagementBody = 2 << 20

// Keyed is a set of token buckets, one per key (a client IP, a channel id), created on first
// use and forgotten after a while idle so the map does not grow without bound.
type Keyed struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// idleAfter is how long an untouched bucket is kept; by then it has refilled anyway.
const idleAfter = 10 * time.Minute

// NewKeyed allows each key `per` events per `every` with bursts up to `per`.
func NewKeyed(per int, every time.Duration, now func() time.Time) *Keyed {
	if now == nil {
		now = time.Now
	}
	return &Keyed{limit: rate.Every(every / time.Duration(per)), burst: per, now: now, buckets: map[string]*bucket{}}
}

// maxKeys bounds the buckets a Keyed holds. Past it, new keys share one overflow bucket:
// a flood of fresh keys (spoofable addresses) then limits itself instead of growing the
// map, while keys already known keep their own budgets.
const maxKeys = 100_000

// overflowKey is the bucket new keys share once maxKeys are held.
const overflowKey = "\x00overflow"

// Allow takes one token from key's bucket. When none is left it returns false and how long
// until one will be.
func (k *Keyed) Allow(key string) (bool, time.Duration) {
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if now.Sub(k.swept) > idleAfter || len(k.buckets) >= maxKeys && now.Sub(k.swept) > time.Second {
		for key, b := range k.buckets {
			if now.Sub(b.seen) > idleAfter || (len(k.buckets) >= maxKeys && b.lim.TokensAt(now) >= float64(k.burst)) {
				delete(k.buckets, key) // idle, or full again: forgetting it changes nothing
			}
		}
		k.swept = now
	}
	b := k.buckets[key]
	if b == nil && len(k.buckets) >= maxKeys {
		key = overflowKey
		b = k.buckets[key]
	}
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(k.limit, k.burst)}
		k.buckets[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Len is how many keys hold a bucket now.
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.buckets)
}

// Quotas holds per-key budgets whose size is set per call (a client's quota can change at
// any time): N events per minute with bursts of N.
type Quotas struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*quota
}

type quota struct {
	perMinute int
	lim       *rate.Limiter
	seen      time.Time
}

// NewQuotas returns an empty set of quotas.
func NewQuotas(now func() time.Time) *Quotas {
	if now == nil {
		now = time.Now
	}
	return &Quotas{now: now, m: map[string]*quota{}}
}

// Allow takes n events from key's budget of perMinute (0 means unlimited). When the budget
// cannot cover them it takes nothing and returns how long until it could.
func (q *Quotas) Allow(key string, perMinute, n int) (bool, time.Duration) {
	if perMinute <= 0 || n <= 0 {
		return true, 0
	}
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.m[key]
	if e == nil || e.perMinute != perMinute {
		e = &quota{perMinute: perMinute, lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)}
		q.m[key] = e
		if len(q.m) > 4096 {
			for k, old := range q.m {
				if now.Sub(old.seen) > idleAfter {
					delete(q.m, k)
				}
			}
		}
	}
	e.seen = now
	if n > perMinute {
		return false, time.Minute // can never fit at once; ask for a smaller request
	}
	r := e.lim.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Budget is a process-wide allowance of bytes (memory held by requests that must buffer),
// reserved and released by its users; it never blocks.
type Budget struct {
	mu   sync.Mutex
	max  int64
	used int64
}

// NewBudget returns a budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Reserve takes n bytes if they are free and reports whether it did.
func (b *Budget) Reserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// Release gives back n reserved bytes.
func (b *Budget) Release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Used is how many bytes are reserved now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Gate bounds how many runs of an expensive operation (an argon2id hash: 19 MiB and tens of
// milliseconds of CPU each) happen at once. Callers beyond the running slots wait in a
// bounded queue for at most a fixed time; beyond the queue they are refused at once, so a
// flood costs neither unbounded memory nor unbounded goroutines.
type Gate struct {
	slots   chan struct{}
	queue   chan struct{}
	maxWait time.Duration
}

// NewGate allows running operations at once (at least 1), with up to waiting callers
// queued for at most maxWait each.
func NewGate(running, waiting int, maxWait time.Duration) *Gate {
	if running < 1 {
		running = 1
	}
	if waiting < 0 {
		waiting = 0
	}
	return &Gate{slots: make(chan struct{}, running), queue: make(chan struct{}, waiting), maxWait: maxWait}
}

// Enter takes a running slot. It returns false when every slot is busy and the queue is
// full, or when the wait for a slot ran out; otherwise the caller must call release once.
func (g *Gate) Enter() (release func(), ok bool) {
	select {
	case g.slots <- struct{}{}:
		return g.release, true
	default:
	}
	select {
	case g.queue <- struct{}{}:
	default:
		return nil, false
	}
	defer func() { <-g.queue }()
	t := time.NewTimer(g.maxWait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return g.release, true
	case <-t.C:
		return nil, false
	}
}

func (g *Gate) release() { <-g.slots }
