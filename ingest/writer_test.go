package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"lookout/warehouse"
)

func newTestLog(t *testing.T) *warehouse.RecordLog {
	t.Helper()
	rs, err := warehouse.OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	l, err := rs.Log("wh_1")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func batchOf(n int) *warehouse.AppendBatch {
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = []byte(fmt.Sprintf(`{"n":%d}`, i))
	}
	return &warehouse.AppendBatch{ModelID: "mdl_a", ReceivedAt: time.Unix(1, 0), Records: recs}
}

// TestWriterCloseAnswersEveryone: submits racing a close each get an answer, committed
// or ErrBusy, and every batch answered nil is stored. Before the fix a batch could be
// queued after the final drain and wait forever.
func TestWriterCloseAnswersEveryone(t *testing.T) {
	for round := 0; round < 20; round++ {
		l := newTestLog(t)
		w := newWriter(l)
		var wg sync.WaitGroup
		var mu sync.Mutex
		committed := 0
		var bad []error
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					err := w.submit(context.Background(), batchOf(3))
					mu.Lock()
					switch {
					case err == nil:
						committed += 3
					case !errors.Is(err, ErrBusy):
						bad = append(bad, err)
					}
					mu.Unlock()
				}
			}()
		}
		w.close(nil)
		wg.Wait() // hangs (and the test times out) if a submit is never answered
		if len(bad) > 0 {
			t.Fatal(bad)
		}
		if n, _ := l.Count("mdl_a"); n != committed {
			t.Fatalf("round %d: %d records answered as committed, %d stored", round, committed, n)
		}
		if err := w.submit(context.Background(), batchOf(1)); !errors.Is(err, ErrBusy) {
			t.Fatalf("submit after close: %v", err)
		}
		w.close(nil) // a second close returns too
	}
}

// TestWriterSkipsChunksAfterAFailure: once a chunk of a request failed, its later chunks
// are answered without being written, so a request never stores records after a gap.
func TestWriterSkipsChunksAfterAFailure(t *testing.T) {
	l := newTestLog(t)
	w := &writer{log: l}
	var s stream
	ok := &pending{batch: batchOf(2), stream: &s, done: make(chan error, 1)}
	w.commit([]*pending{ok})
	if err := <-ok.done; err != nil {
		t.Fatal(err)
	}
	s.failed.Store(true) // as the writer marks it when a commit of this stream fails
	later := &pending{batch: batchOf(2), stream: &s, done: make(chan error, 1)}
	other := &pending{batch: batchOf(1), done: make(chan error, 1)}
	w.commit([]*pending{later, other})
	if err := <-later.done; !errors.Is(err, errAborted) {
		t.Fatalf("later chunk: %v", err)
	}
	if err := <-other.done; err != nil {
		t.Fatalf("another request's batch in the same group: %v", err)
	}
	if n, _ := l.Count("mdl_a"); n != 3 {
		t.Fatalf("stored %d, want 3", n)
	}
}

// TestPruneKeepsUpWithAnyRate: one pruning pass removes every expired Idempotency-Key,
// not a fixed number per pass (10,000 per ten minutes fell behind at 17 keyed requests/s).
func TestPruneKeepsUpWithAnyRate(t *testing.T) {
	l := newTestLog(t)
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	const n = 25_000
	batches := make([]*warehouse.AppendBatch, 0, n)
	for i := 0; i < n; i++ {
		batches = append(batches, &warehouse.AppendBatch{ModelID: "mdl_a", ReceivedAt: t0, IdemKey: []byte(fmt.Sprintf("ic_1\x00k%d", i)), IdemResponse: []byte(`{}`)})
	}
	if err := l.Append(batches); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(warehouse.IdempotencyTTL + time.Minute)
	s := &Service{now: func() time.Time { return now }, writers: map[string]*writer{"wh_1": {log: l}}}
	if err := s.PruneIdempotency(); err != nil {
		t.Fatal(err)
	}
	if n, err := l.PruneIdempotency(now, n); err != nil || n != 0 {
		t.Fatalf("%d expired keys left after one pass (%v)", n, err)
	}
}

// TestWriterDrainKeepsItsDeadline: batches still queued when the shutdown deadline has
// passed are answered ErrBusy, not committed after it.
func TestWriterDrainKeepsItsDeadline(t *testing.T) {
	l := newTestLog(t)
	w := &writer{log: l, queue: make(chan *pending, queueDepth), stop: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	var ps []*pending
	for i := 0; i < 5; i++ { // queued while no writer goroutine runs
		p := &pending{batch: batchOf(1), done: make(chan error, 1)}
		if err := w.enqueue(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has passed
	// close's steps, taken before the writer goroutine starts, so it finds them done.
	w.closed = true
	close(w.stop)
	w.deadline = ctx
	close(w.quit)
	go w.run()
	<-w.done
	for i, p := range ps {
		if err := <-p.done; !errors.Is(err, ErrBusy) {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	if n, _ := l.Count("mdl_a"); n != 0 {
		t.Fatalf("%d records committed after the deadline", n)
	}
}
