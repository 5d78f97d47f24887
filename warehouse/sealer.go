package warehouse

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"lookout/store"
)

// Sealer is the background task that keeps each warehouse file in shape: it seals the
// record logs into column blocks, drops what is past a model's retention, and compacts a
// file once sealing has left most of it free.
type Sealer struct {
	Records *RecordStore
	// Model returns a model's current definition (the sealer reads it for every block,
	// so fields added since the last block are in the next).
	Model  func(id string) (*store.Model, error)
	Now    func() time.Time
	Policy SealPolicy
	Log    *slog.Logger
	// Idle is the pause when there is nothing to seal; 0 means 500 ms.
	Idle time.Duration
	// Yield lets ingest have the cores while it is busy: a file that took records within
	// the last Yield is sealed only once a model's log holds YieldBacklog records or its
	// oldest record is YieldAge old (so sealing still keeps pace with sustained ingest, and
	// the log stays bounded). 0 never yields.
	Yield        time.Duration
	YieldBacklog int
	YieldAge     time.Duration

	// Figures for /metrics.
	SealedRecords    atomic.Int64
	SealedBlocks     atomic.Int64
	RetentionDropped atomic.Int64
	Compactions      atomic.Int64

	lastRetention time.Time
}

// DefaultYield, DefaultYieldBacklog and DefaultYieldAge are serve's yielding: a burst of
// up to four blocks' worth of records is ingested at full speed and sealed right after;
// past that, sealing runs beside ingest.
const (
	DefaultYield        = 250 * time.Millisecond
	DefaultYieldBacklog = 4 * BlockRows
	DefaultYieldAge     = 30 * time.Second
)

// yield reports whether to leave a model's log unsealed for now, ingest being busy.
func (s *Sealer) yield(l *RecordLog, modelID string) bool {
	if s.Yield <= 0 || time.Since(time.Unix(0, l.lastAppend.Load())) >= s.Yield {
		return false
	}
	n, oldest, err := l.Backlog(modelID, s.YieldBacklog)
	if err != nil || n == 0 {
		return false
	}
	return n < s.YieldBacklog && s.Now().Sub(oldest) < s.YieldAge
}

// retentionEvery is how often retention runs.
const retentionEvery = time.Minute

// retentionBatch bounds the records one retention transaction drops.
const retentionBatch = 4 * BlockRows

// Run seals until ctx ends.
func (s *Sealer) Run(ctx context.Context) {
	idle := s.Idle
	if idle == 0 {
		idle = 500 * time.Millisecond
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		busy := s.Pass(ctx)
		if busy {
			t.Reset(0)
		} else {
			t.Reset(idle)
		}
	}
}

// Pass seals at most one block per model of every open warehouse file and reports whether
// any was sealed (more may be waiting). Files with nothing left to seal get retention and,
// when it pays, compaction.
func (s *Sealer) Pass(ctx context.Context) bool {
	busy := false
	now := s.Now()
	doRetention := now.Sub(s.lastRetention) >= retentionEvery
	if doRetention {
		s.lastRetention = now
	}
	for _, l := range s.Records.open() {
		ids, err := l.Models()
		if err != nil {
			s.Log.Error("sealer: list models", "err", err)
			continue
		}
		fileBusy := false
		if l.IsOutbox() {
			ids = nil // an external warehouse's outbox: its sink trims it, nothing is sealed
		}
		for _, id := range ids {
			if ctx.Err() != nil {
				return false
			}
			m, err := s.Model(id)
			if err != nil {
				continue // a model deleted from the control plane: its data stays as it is
			}
			if s.yield(l, id) {
				continue
			}
			n, err := l.Seal(m, now, s.Policy)
			if err != nil {
				// ErrStaleModel included: the next pass reads the model again. Not counted as
				// progress, so a record the model can never describe cannot spin the sealer.
				s.Log.Error("sealer: seal", "model", id, "err", err)
				continue
			}
			if n > 0 {
				fileBusy = true
				s.SealedRecords.Add(int64(n))
				s.SealedBlocks.Add(1)
			}
			if doRetention && m.RetentionDays > 0 {
				cutoff := now.Add(-time.Duration(m.RetentionDays) * 24 * time.Hour)
				for {
					d, err := l.DropBefore(m, cutoff, retentionBatch)
					if err != nil {
						s.Log.Error("sealer: retention", "model", id, "err", err)
						break
					}
					s.RetentionDropped.Add(int64(d))
					if d < retentionBatch {
						break
					}
				}
			}
		}
		busy = busy || fileBusy
		if !fileBusy {
			size, free, err := l.FreeBytes()
			if err == nil && CompactWorth(size, free) {
				if err := l.Compact(); errors.Is(err, errBusy) {
					continue
				} else if err != nil {
					s.Log.Error("sealer: compact", "err", err)
				} else {
					s.Compactions.Add(1)
					s.Log.Info("warehouse file compacted", "file", l.path, "bytes_before", size, "bytes_free", free)
				}
			}
		}
	}
	return busy
}
