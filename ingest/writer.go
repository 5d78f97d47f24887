// Package ingest is the ingest runtime: it decodes JSON and NDJSON bodies as they stream
// in, validates every record against its model, and commits accepted records to the
// embedded warehouse through a group-commit writer before anyone is told they are
// accepted.
package ingest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"lookout/warehouse"
)

// ErrBusy is returned when a warehouse writer's queue stays full, or the writer is
// stopping: the caller should answer 503 with Retry-After rather than queue more in memory.
var ErrBusy = errors.New("the warehouse writer is busy")

// errAborted answers a chunk whose request already had an earlier chunk fail: committing
// it would leave a gap in the request's records.
var errAborted = errors.New("an earlier chunk of this request failed")

// queueDepth bounds the batches waiting for one warehouse file.
const queueDepth = 256

// maxGroupRecords bounds how many records one transaction gathers.
const maxGroupRecords = 50_000

// enqueueWait is how long a batch may wait for room in a full queue.
const enqueueWait = 5 * time.Second

// stream ties the chunks of one request together: once one of them fails, the writer
// commits none of the later ones, so what is stored is always a prefix of the request.
type stream struct{ failed atomic.Bool }

type pending struct {
	batch  *warehouse.AppendBatch
	recs   [][]byte         // the batch's records, as validated (for the OnCommit hook)
	spans  []warehouse.Span // their watched spans (for the OnCommit hook)
	stream *stream          // nil for a batch that stands alone
	done   chan error
}

// writer owns one warehouse file: a single goroutine takes every batch waiting, writes
// them in one transaction with one fsync, then wakes every waiter (no timer: it commits
// as soon as the previous commit is done, so batches grow with load). Batches are
// committed in the order they were queued.
type writer struct {
	log   *warehouse.RecordLog
	queue chan *pending

	// mu guards closed against enqueues: close sets it under the write lock, so after
	// that no enqueue can start, and the enqueues already started are waited for
	// (senders) before the final drain. That is what guarantees every queued batch an
	// answer.
	mu      sync.RWMutex
	closed  bool
	senders sync.WaitGroup
	stop    chan struct{} // closed first: wakes enqueues blocked on a full queue
	quit    chan struct{} // closed once no enqueue can happen any more: drain and exit
	done    chan struct{}
	// deadline ends the final drain: batches still queued then are answered ErrBusy
	// instead of committed, so a shutdown keeps its timeout. Set before quit is closed.
	deadline context.Context
}

func newWriter(log *warehouse.RecordLog) *writer {
	w := &writer{log: log, queue: make(chan *pending, queueDepth),
		stop: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *writer) run() {
	defer close(w.done)
	for {
		select { // once stopping, the drain (and its deadline) decides
		case <-w.quit:
			w.drain()
			return
		default:
		}
		var first *pending
		select {
		case first = <-w.queue:
		case <-w.quit:
			w.drain()
			return
		}
		w.commit(w.gather(first))
	}
}

// gather takes every batch waiting behind first, up to maxGroupRecords, for one commit.
func (w *writer) gather(first *pending) []*pending {
	group := []*pending{first}
	n := len(first.batch.Records)
	for n < maxGroupRecords {
		select {
		case p := <-w.queue:
			group = append(group, p)
			n += len(p.batch.Records)
		default:
			return group
		}
	}
	return group
}

func (w *writer) commit(group []*pending) {
	batches := make([]*warehouse.AppendBatch, 0, len(group))
	live := group[:0:0]
	for _, p := range group {
		if p.stream != nil && p.stream.failed.Load() {
			p.done <- errAborted
			continue
		}
		batches = append(batches, p.batch)
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	err := w.log.Append(batches)
	for _, p := range live {
		if err != nil && p.stream != nil {
			p.stream.failed.Store(true)
		}
		p.done <- err
	}
}

// drain commits what is queued when the writer stops, in groups as run does, until the
// deadline; what is left then is answered ErrBusy (its caller was never told it was
// stored). It runs after every enqueue has finished, so the queue only shrinks.
func (w *writer) drain() {
	for {
		select {
		case p := <-w.queue:
			if w.deadline != nil && w.deadline.Err() != nil {
				p.done <- ErrBusy
				continue
			}
			w.commit(w.gather(p))
		default:
			return
		}
	}
}

// enqueue queues a batch in order. It gives up with ErrBusy when the queue stays full or
// the writer is stopping, and with the context's error when the caller goes away first.
// Once it returns nil, the batch will be answered on p.done, whatever happens next.
func (w *writer) enqueue(ctx context.Context, p *pending) error {
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return ErrBusy
	}
	w.senders.Add(1)
	w.mu.RUnlock()
	defer w.senders.Done()
	select { // a free slot wins over everything else
	case w.queue <- p:
		return nil
	default:
	}
	t := time.NewTimer(enqueueWait)
	defer t.Stop()
	select {
	case w.queue <- p:
		return nil
	case <-t.C:
		return ErrBusy
	case <-ctx.Done():
		return ctx.Err()
	case <-w.stop:
		return ErrBusy
	}
}

// submit queues a batch and waits until it is committed (see enqueue for the errors).
func (w *writer) submit(ctx context.Context, b *warehouse.AppendBatch) error {
	p := &pending{batch: b, done: make(chan error, 1)}
	if err := w.enqueue(ctx, p); err != nil {
		return err
	}
	return <-p.done
}

// close stops taking batches, commits the batches already queued until ctx ends (nil: no
// deadline), answers every waiter, and returns when the writer goroutine is gone.
func (w *writer) close(ctx context.Context) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.done
		return
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	w.senders.Wait()
	w.deadline = ctx
	close(w.quit)
	<-w.done
}
