package warehouse

import (
	"context"
	"errors"
	"testing"
	"time"
)

// pastDeadline is a context whose deadline has passed while its timer has not fired yet,
// as a busy scheduler leaves a context.WithTimeout for a while.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }

// TestReadPartsStopsAtThePassedDeadline: ReadParts must not wait for the context's timer
// to notice that the deadline has passed, in the log and in sealed blocks alike.
func TestReadPartsStopsAtThePassedDeadline(t *testing.T) {
	rs := openTestRecords(t)
	l, err := rs.Log("wh_1")
	if err != nil {
		t.Fatal(err)
	}
	m := testModel("reject")
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	if err := l.Append([]*AppendBatch{{ModelID: m.ID, ReceivedAt: t0, Records: [][]byte{[]byte(`{"id":"a"}`)}}}); err != nil {
		t.Fatal(err)
	}
	read := func() error {
		return l.ReadParts(pastDeadline{context.Background()}, m, func(*Part) error { return nil })
	}
	if err := read(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("log: %v", err)
	}
	if n, err := l.Seal(m, t0, SealPolicy{}); n != 1 || err != nil {
		t.Fatalf("seal: %d %v", n, err)
	}
	if err := read(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocks: %v", err)
	}
}
