// Package testclock is the settable clock every package's tests inject (STYLE rule 13):
// tests advance time instead of sleeping.
package testclock

import (
	"sort"
	"sync"
	"time"
)

// Clock is a clock that moves only when told. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	t      time.Time
	timers []*timer
}

type timer struct {
	at time.Time
	c  chan time.Time
}

// Start is the instant every test clock starts at, so expected timestamps are fixed.
var Start = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// New returns a Clock reading Start.
func New() *Clock { return &Clock{t: Start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d, firing the timers it passes.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.fire()
	c.mu.Unlock()
}

// Set moves the clock to t if t is later, firing the timers it passes.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.t) {
		c.t = t
	}
	c.fire()
	c.mu.Unlock()
}

// After returns a channel that receives the clock's time once it has moved d on; d ≤ 0
// fires at once.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{at: c.t.Add(d), c: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.fire()
	return t.c
}

// Next returns the earliest time a timer waits for, and false when none waits.
func (c *Clock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	return c.timers[0].at, true
}

func (c *Clock) fire() {
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.t) {
			kept = append(kept, t)
			continue
		}
		t.c <- c.t
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}
