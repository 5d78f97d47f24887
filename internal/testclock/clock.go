// Package testclock is the settable clock every package's tests inject (STYLE rule 13):
// tests advance time instead of sleeping.
package testclock

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
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

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
