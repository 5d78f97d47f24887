package limits

import (
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
