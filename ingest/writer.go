// Package ingest is the ingest runtime: it decodes JSON and NDJSON bodies as they stream
// in, validates every record against its model, and commits accepted records to the
// embedded warehouse through a group-commit writer before anyone is told they are
// accepted.
package ingest

import (
	"context"
	"errors"
	"time"

	"lookout/store"
)

// ErrBusy is returned when a warehouse writer's queue stays full: the caller should answer
// 503 with Retry-After rather than queue more in memory.
var ErrBusy = errors.New("the warehouse writer is busy")

// queueDepth bounds the batches waiting for one warehouse file.
const queueDepth = 256

// maxGroupRecords bounds how many records one transaction gathers.
const maxGroupRecords = 50_000

// enqueueWait is how long a batch may wait for room in a full queue.
const enqueueWait = 5 * time.Second

type pending struct {
	batch *store.AppendBatch
	done  chan error
}

// writer owns one warehouse file: a single goroutine takes every batch waiting, writes
// them in one transaction with one fsync, then wakes every waiter (no timer: it commits
// as soon as the previous commit is done, so batches grow with load).
type writer struct {
	log   *store.RecordLog
	queue chan *pending
	stop  chan struct{}
	done  chan struct{}
}

func newWriter(log *store.RecordLog) *writer {
	w := &writer{log: log, queue: make(chan *pending, queueDepth), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *writer) run() {
	defer close(w.done)
	for {
		var first *pending
		select {
		case first = <-w.queue:
		case <-w.stop:
			w.drain()
			return
		}
		group := []*pending{first}
		n := len(first.batch.Records)
	gather:
		for n < maxGroupRecords {
			select {
			case p := <-w.queue:
				group = append(group, p)
				n += len(p.batch.Records)
			default:
				break gather
			}
		}
		w.commit(group)
	}
}

func (w *writer) commit(group []*pending) {
	batches := make([]*store.AppendBatch, len(group))
	for i, p := range group {
		batches[i] = p.batch
	}
	err := w.log.Append(batches)
	for _, p := range group {
		p.done <- err
	}
}

// drain commits what is queued when the writer stops, so no accepted work is dropped.
func (w *writer) drain() {
	for {
		select {
		case p := <-w.queue:
			w.commit([]*pending{p})
		default:
			return
		}
	}
}

// submit queues a batch and waits until it is committed. It gives up with ErrBusy when the
// queue stays full, and with the context's error when the caller goes away before the
// batch was queued (once queued, the commit is waited for: it will happen).
func (w *writer) submit(ctx context.Context, b *store.AppendBatch) error {
	p := &pending{batch: b, done: make(chan error, 1)}
	t := time.NewTimer(enqueueWait)
	defer t.Stop()
	select {
	case w.queue <- p:
	case <-t.C:
		return ErrBusy
	case <-ctx.Done():
		return ctx.Err()
	case <-w.stop:
		return ErrBusy
	}
	return <-p.done
}

func (w *writer) close() {
	close(w.stop)
	<-w.done
	for { // a submit that raced with stop must not wait forever
		select {
		case p := <-w.queue:
			p.done <- ErrBusy
		default:
			return
		}
	}
}
