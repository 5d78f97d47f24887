// Package sink ships the local record logs (outboxes) of models whose warehouse is
// external to their engine: one worker per (model, warehouse), in commit order, in
// batches, at least once, with a checkpoint in the outbox file that moves only after the
// engine confirmed a batch. The engines' idempotent keys (_ingest_id, _seq) make a
// repeated batch harmless, so a crash between the engine's confirmation and the
// checkpoint's commit costs a resend, never a duplicate seen through queries.
//
// When an engine is down the worker backs off (capped exponential) and ingest keeps
// acknowledging locally; the lag is visible per model (Status, /metrics) and, past
// MaxLag records, Admit tells ingest to answer 503 instead of filling the disk.
package sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"lookout/store"
	"lookout/warehouse"
	"lookout/warehouse/external"
)

// Defaults of a Manager's knobs.
const (
	DefaultBatch      = 10_000
	DefaultPoll       = 200 * time.Millisecond
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = time.Minute
	DefaultMaxLag     = 10_000_000
)

// discoverEvery is how often the manager looks for new (model, warehouse) pairs.
const discoverEvery = 2 * time.Second

// trimEvery is how often a worker trims its outbox behind the checkpoint.
const trimEvery = 30 * time.Second

// Manager runs the sink workers.
type Manager struct {
	Store   *store.Store
	Records *warehouse.RecordStore
	// Dial opens an engine for a warehouse with its credential's username and secret.
	Dial func(w store.Warehouse, username, secret string) (external.Engine, error)
	Now  func() time.Time
	Log  *slog.Logger

	Batch                  int           // records per insert
	Poll                   time.Duration // how often an idle worker looks for new records
	MinBackoff, MaxBackoff time.Duration
	// MaxLag is how many unshipped records a model may have before Admit refuses more.
	MaxLag int64

	// Figures for /metrics.
	Errors  atomic.Int64 // failed engine calls, all told
	Shipped atomic.Int64 // records the engines confirmed

	mu      sync.Mutex
	engines map[string]*engineEntry
	workers map[route]*worker
	wg      sync.WaitGroup
	ctx     context.Context
}

type route struct{ warehouseID, modelID string }

type engineEntry struct {
	version int // the warehouse's version it was dialled for
	cred    int // its credential's version
	eng     external.Engine
}

// worker ships one model's outbox in one warehouse.
type worker struct {
	route
	projectID string

	shipped   atomic.Int64
	errors    atomic.Int64
	lastError atomic.Pointer[string]
	lastOK    atomic.Int64 // unix ms of the last confirmed batch

	// The table as last made sure of: for which model version, in which engine.
	table       *external.Table
	tableModel  int
	tableEngine external.Engine
}

func (m *Manager) defaults() {
	if m.Batch <= 0 {
		m.Batch = DefaultBatch
	}
	if m.Poll <= 0 {
		m.Poll = DefaultPoll
	}
	if m.MinBackoff <= 0 {
		m.MinBackoff = DefaultMinBackoff
	}
	if m.MaxBackoff <= 0 {
		m.MaxBackoff = DefaultMaxBackoff
	}
	if m.Now == nil {
		m.Now = time.Now
	}
	if m.Log == nil {
		m.Log = slog.Default()
	}
}

// Run discovers routes and runs their workers until ctx ends, then waits for them and
// closes the engines. Failures are logged and retried, never returned.
func (m *Manager) Run(ctx context.Context) {
	m.defaults()
	m.mu.Lock()
	m.ctx = ctx
	if m.workers == nil {
		m.workers = map[route]*worker{}
	}
	m.mu.Unlock()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.wg.Wait()
			m.mu.Lock()
			for id, e := range m.engines {
				e.eng.Close()
				delete(m.engines, id)
			}
			m.mu.Unlock()
			return
		case <-t.C:
		}
		if err := m.discover(); err != nil {
			m.Log.Error("sink: discover", "err", err)
		}
		t.Reset(discoverEvery)
	}
}

// discover starts a worker for every model of an external warehouse, and for every model
// an external warehouse's outbox holds records of (a model that moved away still ships
// what it left).
func (m *Manager) discover() error {
	whs, err := m.Store.ExternalWarehouses()
	if err != nil {
		return err
	}
	for _, wh := range whs {
		models, err := m.Store.ModelsIn(wh.ProjectID, wh.ID)
		if err != nil {
			return err
		}
		ids := map[string]bool{}
		for _, md := range models {
			ids[md.ID] = true
		}
		if l, err := m.Records.Existing(wh.ID); err == nil {
			held, err := l.Models()
			if err != nil {
				return err
			}
			for _, id := range held {
				ids[id] = true
			}
		} else if !errors.Is(err, warehouse.ErrNoFile) {
			return err
		}
		for id := range ids {
			m.start(route{warehouseID: wh.ID, modelID: id}, wh.ProjectID)
		}
	}
	return nil
}

// Wake starts at once the workers of the routes discover would find; for tests and for
// a model just created (otherwise discovery runs every two seconds). Errors: storage.
func (m *Manager) Wake() error { return m.discover() }

func (m *Manager) start(r route, projectID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.workers[r] != nil || m.ctx == nil || m.ctx.Err() != nil {
		return
	}
	w := &worker{route: r, projectID: projectID}
	m.workers[r] = w
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.work(m.ctx, w)
	}()
}

// work ships until ctx ends.
func (m *Manager) work(ctx context.Context, w *worker) {
	backoff := time.Duration(0)
	lastTrim := time.Time{}
	for {
		n, err := m.step(ctx, w)
		if ctx.Err() != nil {
			return
		}
		// Trimming runs whatever the shipping does: a sink that is always busy (ingest at
		// or above its rate) must still drop what it shipped long ago.
		if now := m.Now(); now.Sub(lastTrim) >= trimEvery {
			lastTrim = now
			if err := m.trim(w); err != nil {
				m.Log.Error("sink: trim", "warehouse", w.warehouseID, "model", w.modelID, "err", err)
			}
		}
		var wait time.Duration
		switch {
		case err != nil:
			m.Errors.Add(1)
			w.errors.Add(1)
			msg := external.Message(err)
			if !errors.As(err, new(*external.Error)) {
				msg = err.Error()
			}
			w.lastError.Store(&msg)
			w.table = nil // the table may have gone or moved: make sure of it again
			backoff = min(max(2*backoff, m.MinBackoff), m.MaxBackoff)
			wait = backoff
			m.Log.Warn("sink: shipping failed; retrying", "warehouse", w.warehouseID, "model", w.modelID, "retry_in", backoff, "err", msg)
		case n == 0:
			backoff = 0
			wait = m.Poll
		default:
			backoff = 0
			continue // more may be waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// maxBatchBytes bounds the records' JSON one batch reads (besides Batch records), so a
// model of large records ships in smaller batches.
const maxBatchBytes = 16 << 20

// step ships one batch and returns how many records it shipped.
func (m *Manager) step(ctx context.Context, w *worker) (int, error) {
	l, err := m.Records.Existing(w.warehouseID)
	if errors.Is(err, warehouse.ErrNoFile) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	st, err := l.OutboxState(w.modelID)
	if err != nil {
		return 0, err
	}
	if st.Lag() == 0 {
		return 0, nil
	}
	// The records first, the model after: every record read was validated against this
	// model or an older version of it, so no field a record carries is unknown to the
	// table (reading the model first could miss a field added in between).
	var recs []warehouse.OutboxRecord
	size := 0
	last, err := l.ReadOutbox(w.modelID, st.Shipped, m.Batch, maxBatchBytes, func(r *warehouse.OutboxRecord) error {
		c := *r
		c.Fields = append([]byte(nil), r.Fields...)
		size += len(c.Fields)
		recs = append(recs, c)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(recs) == 0 {
		return 0, fmt.Errorf("the outbox of model %s says %d records wait after %d but none can be read: run lookout check", w.modelID, st.Lag(), st.Shipped)
	}
	md, err := m.Store.ModelByID(w.modelID)
	if err != nil {
		return 0, fmt.Errorf("model %s: %w", w.modelID, err)
	}
	wh, err := m.Store.Warehouse(w.projectID, w.warehouseID)
	if err != nil {
		return 0, fmt.Errorf("warehouse %s: %w", w.warehouseID, err)
	}
	eng, err := m.engine(wh)
	if err != nil {
		return 0, err
	}
	if w.table == nil || w.tableModel != md.Version || w.tableEngine != eng {
		t := external.TableFor(&md)
		if err := eng.EnsureTable(ctx, t); err != nil {
			return 0, err
		}
		w.table, w.tableModel, w.tableEngine = t, md.Version, eng
	}
	rows := make([][]any, len(recs))
	for i := range recs {
		rows[i] = w.table.Row(&recs[i], nil)
	}
	if err := eng.Insert(ctx, w.table, rows); err != nil {
		return 0, err
	}
	if err := l.SetShipped(w.modelID, last); err != nil {
		return 0, err
	}
	w.shipped.Add(int64(len(rows)))
	w.lastOK.Store(m.Now().UnixMilli())
	w.lastError.Store(nil)
	m.Shipped.Add(int64(len(rows)))
	return len(rows), nil
}

// trim deletes shipped records older than the warehouse's local retention.
func (m *Manager) trim(w *worker) error {
	l, err := m.Records.Existing(w.warehouseID)
	if err != nil {
		return nil
	}
	wh, err := m.Store.Warehouse(w.projectID, w.warehouseID)
	if err != nil {
		return nil // the warehouse is gone: keep what is there
	}
	hours := wh.Config.LocalRetentionHours
	if hours <= 0 {
		hours = store.DefaultLocalRetentionHours
	}
	cutoff := m.Now().Add(-time.Duration(hours) * time.Hour)
	for {
		n, err := l.TrimOutbox(w.modelID, cutoff, 256)
		if err != nil || n == 0 {
			return err
		}
	}
}

// engine returns the warehouse's engine, dialled again when the warehouse or its
// credential changed since. A replaced engine is closed once its users are done (in the
// background: a pool's Close waits for the queries it runs), never under the lock.
// Errors: the credential's not_found, or the engine's own.
func (m *Manager) engine(wh store.Warehouse) (external.Engine, error) {
	credVersion := 0
	if wh.CredentialID != "" {
		c, err := m.Store.Credential(wh.ProjectID, wh.CredentialID)
		if err != nil {
			return nil, fmt.Errorf("credential %s: %w", wh.CredentialID, err)
		}
		credVersion = c.Version
	}
	m.mu.Lock()
	e := m.engines[wh.ID]
	m.mu.Unlock()
	if e != nil && e.version == wh.Version && e.cred == credVersion {
		return e.eng, nil
	}
	user, secret, err := m.Store.WarehouseTarget(wh.ProjectID, wh)
	if err != nil {
		return nil, err
	}
	eng, err := m.Dial(wh, user, secret)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.engines == nil {
		m.engines = map[string]*engineEntry{}
	}
	old := m.engines[wh.ID]
	if old != nil && old.version == wh.Version && old.cred == credVersion {
		m.mu.Unlock() // another caller dialled it meanwhile: keep theirs
		eng.Close()
		return old.eng, nil
	}
	m.engines[wh.ID] = &engineEntry{version: wh.Version, cred: credVersion, eng: eng}
	m.mu.Unlock()
	if old != nil {
		go old.eng.Close()
	}
	return eng, nil
}

// Engine returns the engine of an external warehouse, for queries (shared with the
// sink). Errors: the credential's not_found, or the engine's (external.Error).
func (m *Manager) Engine(wh store.Warehouse) (external.Engine, error) { return m.engine(wh) }

// Backlogged is Admit's refusal: the model's engine is Lag records behind, at or past
// Limit. The transport answers 503 unavailable with Retry-After (BacklogRetry).
type Backlogged struct{ Lag, Limit int64 }

func (e *Backlogged) Error() string {
	return fmt.Sprintf("this model's warehouse is %d records behind (the cap, --sink-max-lag, is %d): ingest resumes as the sink catches up; check the warehouse's connection (GET /api/v1/projects/{id}/stats)", e.Lag, e.Limit)
}

// BacklogRetry is the Retry-After of a Backlogged refusal: the sink needs a while, not a
// second, to ship a cap's worth of records.
const BacklogRetry = 10 * time.Second

// Admit is ingest's check before it accepts records for a model of an external
// warehouse: past MaxLag unshipped records it returns *Backlogged (503), so an engine
// that stays down cannot fill the disk. It reads the outbox's head and checkpoint (one
// short read transaction), so it is exact whatever the worker is doing.
func (m *Manager) Admit(warehouseID, modelID string) error {
	l, err := m.Records.Existing(warehouseID)
	if errors.Is(err, warehouse.ErrNoFile) {
		return nil
	}
	if err != nil {
		return err
	}
	st, err := l.OutboxState(modelID)
	if err != nil {
		return err
	}
	limit := m.MaxLag
	if limit <= 0 {
		limit = DefaultMaxLag
	}
	if lag := st.Lag(); lag >= limit {
		return &Backlogged{Lag: lag, Limit: limit}
	}
	return nil
}

// Status is where one model's shipping stands.
type Status struct {
	ModelID       string     `json:"model_id"`
	WarehouseID   string     `json:"warehouse_id"`
	LagRecords    int64      `json:"lag_records"`
	Shipped       int64      `json:"shipped_records"`
	Errors        int64      `json:"errors"`
	LastError     string     `json:"last_error,omitempty"`
	LastShippedAt *time.Time `json:"last_shipped_at"`
}

// Statuses lists every worker's status, ordered by warehouse then model; the lag is read
// from each outbox (one short read transaction each).
func (m *Manager) Statuses() []Status {
	m.mu.Lock()
	ws := make([]*worker, 0, len(m.workers))
	for _, w := range m.workers {
		ws = append(ws, w)
	}
	m.mu.Unlock()
	out := make([]Status, 0, len(ws))
	for _, w := range ws {
		s := Status{ModelID: w.modelID, WarehouseID: w.warehouseID, Shipped: w.shipped.Load(), Errors: w.errors.Load()}
		// The lag is read from the outbox now, not as the worker last saw it: records
		// acknowledged since count at once, whatever the worker is doing.
		if l, err := m.Records.Existing(w.warehouseID); err == nil {
			if st, err := l.OutboxState(w.modelID); err == nil {
				s.LagRecords = st.Lag()
			}
		}
		if e := w.lastError.Load(); e != nil {
			s.LastError = *e
		}
		if ms := w.lastOK.Load(); ms > 0 {
			t := time.UnixMilli(ms).UTC()
			s.LastShippedAt = &t
		}
		out = append(out, s)
	}
	sortStatuses(out)
	return out
}

func sortStatuses(s []Status) {
	slices.SortFunc(s, func(a, b Status) int {
		return cmp.Or(cmp.Compare(a.WarehouseID, b.WarehouseID), cmp.Compare(a.ModelID, b.ModelID))
	})
}
