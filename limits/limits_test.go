package limits

import (
	"fmt"
	"testing"
	"time"
)

func TestKeyed(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := NewKeyed(3, time.Minute, func() time.Time { return now })
	for i := 0; i < 3; i++ {
		if ok, _ := k.Allow("a"); !ok {
			t.Fatalf("event %d of the burst refused", i)
		}
	}
	ok, wait := k.Allow("a")
	if ok || wait <= 0 || wait > 20*time.Second {
		t.Fatalf("4th event: ok=%v wait=%s, want refused with ≤20s", ok, wait)
	}
	if ok, _ := k.Allow("b"); !ok {
		t.Fatal("keys share a bucket")
	}
	now = now.Add(20 * time.Second)
	if ok, _ := k.Allow("a"); !ok {
		t.Fatal("no token after the refill interval")
	}
	// Idle buckets are forgotten.
	now = now.Add(time.Hour)
	k.Allow("c")
	k.mu.Lock()
	n := len(k.buckets)
	k.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d buckets kept after an idle hour, want 1", n)
	}
}

// TestGate: a full gate with no queue refuses at once, and a released slot is reusable.
func TestGate(t *testing.T) {
	g := NewGate(2, 0, time.Hour)
	r1, ok1 := g.Enter()
	r2, ok2 := g.Enter()
	if !ok1 || !ok2 {
		t.Fatal("free slots refused")
	}
	if _, ok := g.Enter(); ok {
		t.Fatal("a third run entered a gate of two with no queue")
	}
	r1()
	r3, ok := g.Enter()
	if !ok {
		t.Fatal("a released slot was not reusable")
	}
	r2()
	r3()
	// A queued caller gets the slot its holder releases.
	q := NewGate(1, 1, time.Hour)
	hold, _ := q.Enter()
	got := make(chan bool)
	go func() {
		rel, ok := q.Enter()
		if ok {
			rel()
		}
		got <- ok
	}()
	hold()
	if !<-got {
		t.Fatal("the queued caller was refused")
	}
}

// TestKeyedStaysBounded: a flood of fresh keys (addresses) does not grow the map past
// maxKeys; past it, new keys share one overflow budget while known keys keep theirs.
func TestKeyedStaysBounded(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	k := NewKeyed(1, time.Minute, func() time.Time { return now })
	if ok, _ := k.Allow("known"); !ok {
		t.Fatal("first request of a key refused")
	}
	for i := 0; i < maxKeys+5000; i++ {
		k.Allow(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
	}
	if n := k.Len(); n > maxKeys+1 {
		t.Fatalf("%d keys held, cap %d", n, maxKeys)
	}
	if ok, _ := k.Allow("fresh-1"); ok {
		t.Fatal("a new key past the cap got a budget of its own while the overflow budget is spent")
	}
	if ok, _ := k.Allow("known"); ok {
		t.Fatal("a known key's budget was reset by the flood")
	}
}
