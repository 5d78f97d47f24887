package ingest

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"strings"
	"sync"
	"time"

	"lookout/limits"
	"lookout/store"
)

// Caller is the authenticated runtime client a request comes from (the transport resolves
// it; ingest does not know how).
type Caller struct {
	ProjectID string
	ClientID  string
	// Models are the model keys the caller may write (the client's, narrowed by its key).
	Models []string
	Quota  store.Quota
}

// Request is one ingest request.
type Request struct {
	ContentType     string
	ContentEncoding string
	Body            io.Reader
	// Schema is ?schema=; it may be empty when the body names the schema.
	Schema         string
	IdempotencyKey string
}

// RecordError is one rejected record. Line is set for NDJSON (1-based), Index for JSON
// (0-based).
type RecordError struct {
	Line    *int   `json:"line,omitempty"`
	Index   *int   `json:"index,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Result is the answer to an ingest request (CONTRACTS §4).
type Result struct {
	IngestID string        `json:"ingest_id"`
	Status   string        `json:"status"`
	Accepted int           `json:"accepted"`
	Rejected int           `json:"rejected"`
	Errors   []RecordError `json:"errors"`
}

// MaxErrors is how many record errors a result lists.
const MaxErrors = 100

// NoneAccepted is returned when a request held no valid record: nothing was stored, and
// the result says why for each record (400 with the same details).
type NoneAccepted struct{ Result Result }

func (e *NoneAccepted) Error() string { return "no valid records" }

// QuotaExceeded is returned when a client's quota refuses a request; Accepted records of
// the same request were committed before the quota ran out.
type QuotaExceeded struct {
	Wait     time.Duration
	Accepted int
	What     string
}

func (e *QuotaExceeded) Error() string {
	if e.Accepted > 0 {
		return fmt.Sprintf("the client's %s quota is used up; %d records of this request were accepted before it ran out", e.What, e.Accepted)
	}
	return fmt.Sprintf("the client's %s quota is used up; retry later", e.What)
}

// Replay is returned for a repeated Idempotency-Key: Body is the first response's data.
type Replay struct{ Body json.RawMessage }

func (e *Replay) Error() string { return "idempotent replay" }

// Committed is a batch handed to the OnCommit hook after it is durable.
type Committed struct {
	ProjectID string
	ModelKey  string
	Records   [][]byte
}

// Service runs ingest. It is safe for concurrent use.
type Service struct {
	store   *store.Store
	records *store.RecordStore
	now     func() time.Time
	log     *slog.Logger
	quotas  *limits.Quotas

	// OnCommit, when set, receives every committed batch after its commit, outside any
	// transaction (the alert evaluator plugs in here). It is called from many goroutines
	// at once; Records are never reused, so it may keep them.
	OnCommit func(Committed)

	mu       sync.Mutex
	writers  map[string]*writer
	inflight map[string]chan struct{}
	closed   bool

	models modelCache
}

// New returns a Service writing into records.
func New(st *store.Store, records *store.RecordStore, now func() time.Time, log *slog.Logger) *Service {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Service{store: st, records: records, now: now, log: log, quotas: limits.NewQuotas(now),
		writers: map[string]*writer{}, inflight: map[string]chan struct{}{}}
}

// Close stops the writers after they commit what is queued.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	ws := s.writers
	s.writers = map[string]*writer{}
	s.mu.Unlock()
	for _, w := range ws {
		w.close()
	}
}

func (s *Service) writer(warehouseID string) (*writer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrBusy
	}
	if w := s.writers[warehouseID]; w != nil {
		return w, nil
	}
	log, err := s.records.Log(warehouseID)
	if err != nil {
		return nil, err
	}
	w := newWriter(log)
	s.writers[warehouseID] = w
	return w, nil
}

func errf(code, format string, args ...any) error { return store.Errorf(code, format, args...) }

// newSource picks the decoder for a media type, undoing gzip first.
func newSource(req Request) (source, io.Closer, error) {
	mt, _, err := mime.ParseMediaType(req.ContentType)
	if err != nil {
		return nil, nil, errf(store.CodeUnsupportedMediaType, "Content-Type must be application/json, application/x-ndjson or application/ndjson")
	}
	body := req.Body
	var closer io.Closer
	switch strings.ToLower(strings.TrimSpace(req.ContentEncoding)) {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, nil, errf(store.CodeInvalidJSON, "the body is not valid gzip")
		}
		body, closer = zr, zr
	default:
		return nil, nil, errf(store.CodeUnsupportedMediaType, "Content-Encoding must be gzip or absent")
	}
	switch mt {
	case "application/x-ndjson", "application/ndjson":
		return newNDJSON(body), closer, nil
	case "application/json":
		return newJSONBody(body), closer, nil
	}
	return nil, nil, errf(store.CodeUnsupportedMediaType, "Content-Type must be application/json, application/x-ndjson or application/ndjson")
}

// MaxIdempotentBytes bounds the stored records of one Idempotency-Key request: such a
// request commits all its records with its response in one batch, so it is held in memory.
const MaxIdempotentBytes = 64 << 20

// chunkRecords and chunkBytes bound one chunk: a request's records are committed in chunks
// so a 1 GB body never sits in memory, and concurrent requests' chunks share commits.
const (
	chunkRecords = 1000
	chunkBytes   = 4 << 20
	inFlight     = 2 // chunks of one request committing while the next is read
)

// Ingest reads, validates and commits one request. It answers only after every accepted
// record is durable. Errors: *NoneAccepted, *QuotaExceeded, *Replay, ErrBusy, and
// store errors (validation_failed, invalid_json, unsupported_media_type, too_large,
// forbidden, not_found, conflict).
func (s *Service) Ingest(ctx context.Context, c Caller, req Request) (*Result, error) {
	if ok, wait := s.quotas.Allow("req/"+c.ClientID, c.Quota.RequestsPerMinute, 1); !ok {
		return nil, &QuotaExceeded{Wait: wait, What: "requests_per_minute"}
	}
	if enc := strings.TrimSpace(req.ContentEncoding); enc == "" || strings.EqualFold(enc, "identity") {
		body, release := pooledBody(req.Body)
		defer release()
		req.Body = body
	}
	src, closer, err := newSource(req)
	if err != nil {
		return nil, err
	}
	if closer != nil {
		defer closer.Close()
	}
	var idemKey []byte
	if req.IdempotencyKey != "" {
		if len(req.IdempotencyKey) > 255 {
			return nil, store.Invalid(store.FieldError{Field: "Idempotency-Key", Message: "must be at most 255 characters"})
		}
		idemKey = []byte(c.ClientID + "\x00" + req.IdempotencyKey)
		release := s.lockIdempotency(string(idemKey))
		defer release()
	}
	run := &run{s: s, c: c, ctx: ctx, idemKey: idemKey, res: &Result{IngestID: s.store.NewID("ing_"), Errors: []RecordError{}}}
	return run.do(src, req.Schema)
}

// lockIdempotency makes concurrent requests with one Idempotency-Key take turns, so the
// second sees the first's stored response instead of racing it.
func (s *Service) lockIdempotency(key string) func() {
	for {
		s.mu.Lock()
		ch, busy := s.inflight[key]
		if !busy {
			ch = make(chan struct{})
			s.inflight[key] = ch
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.inflight, key)
				s.mu.Unlock()
				close(ch)
			}
		}
		s.mu.Unlock()
		<-ch
	}
}

// run is the state of one request.
type run struct {
	s       *Service
	c       Caller
	ctx     context.Context
	idemKey []byte
	res     *Result

	schema    string
	model     store.Model
	validator *store.RecordValidator
	w         *writer

	arena    []byte
	recs     [][]byte // an idempotent request keeps all its records here until the end
	waits    []chan error
	firstErr error
}

func (r *run) recordError(it item, byLine bool, field, msg string) {
	r.res.Rejected++
	if len(r.res.Errors) >= MaxErrors {
		return
	}
	pos := it.pos
	e := RecordError{Field: field, Message: msg}
	if byLine {
		e.Line = &pos
	} else {
		e.Index = &pos
	}
	r.res.Errors = append(r.res.Errors, e)
}

// resolve finds the request's model the first time a schema is known. A schema the
// caller may not write is 403 whether or not the model exists, so it is refused before
// any lookup; the model comes from the generation cache (modelCache).
func (r *run) resolve(schema string) error {
	r.schema = schema
	allowed := false
	for _, m := range r.c.Models {
		if m == schema {
			allowed = true
		}
	}
	if !allowed {
		return errf(store.CodeForbidden, "this client may not write to schema %q", schema)
	}
	rm, err := r.s.model(r.c.ProjectID, schema)
	if store.IsCode(err, store.CodeNotFound) {
		return store.Invalid(store.FieldError{Field: "schema", Message: fmt.Sprintf("%q is not a model of this project", schema)})
	}
	if err != nil {
		return err
	}
	m, wh := rm.model, rm.warehouse
	if m.Status == store.StatusArchived {
		return errf(store.CodeConflict, "model %q is archived and takes no more records", schema)
	}
	if wh.Type != store.WarehouseEmbedded {
		return errf(store.CodeConflict, "model %q writes to a %s warehouse, which this version cannot deliver to yet", schema, wh.Type)
	}
	if r.w, err = r.s.writer(wh.ID); err != nil {
		return err
	}
	r.model, r.validator = m, rm.validator
	return nil
}

func (r *run) do(src source, querySchema string) (*Result, error) {
	if querySchema != "" {
		if err := r.resolve(querySchema); err != nil {
			return nil, err
		}
		if r.idemKey != nil {
			if prev := r.w.log.Idempotent(r.idemKey, r.s.now()); prev != nil {
				return nil, &Replay{Body: prev}
			}
		}
	}
	byLine := src.byLine()
	received := r.s.now().UTC()
	sys := store.SystemValues{ReceivedAt: received.Format("2006-01-02T15:04:05.000000Z"), ClientID: r.c.ClientID, IngestID: r.res.IngestID}
	for {
		it, err := src.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			r.wait()
			if errors.Is(err, errTooBig) {
				return nil, errf(store.CodeTooLarge, "%s", err.Error())
			}
			return nil, r.partial(errf(store.CodeInvalidJSON, "%s", err.Error()))
		}
		if it.err != "" {
			r.recordError(it, byLine, "", it.err)
			continue
		}
		schema := it.schema
		if schema == "" {
			schema = r.schema
		}
		switch {
		case schema == "":
			return nil, r.partial(store.Invalid(store.FieldError{Field: "schema", Message: "is required: use ?schema=, a \"schema\" field in the JSON body, or wrapped NDJSON lines"}))
		case r.schema == "":
			if err := r.resolve(schema); err != nil {
				return nil, err
			}
			if r.idemKey != nil {
				if prev := r.w.log.Idempotent(r.idemKey, r.s.now()); prev != nil {
					return nil, &Replay{Body: prev}
				}
			}
		case schema != r.schema:
			r.recordError(it, byLine, "schema", fmt.Sprintf("names %q but this request writes %q: one schema per request", schema, r.schema))
			continue
		}
		start := len(r.arena)
		var ferrs []store.FieldError
		r.arena, ferrs = r.validator.Validate(it.raw, r.arena, sys)
		if len(ferrs) > 0 {
			r.res.Rejected++
			for _, fe := range ferrs {
				if len(r.res.Errors) < MaxErrors {
					pos := it.pos
					e := RecordError{Field: fe.Field, Message: fe.Message}
					if byLine {
						e.Line = &pos
					} else {
						e.Index = &pos
					}
					r.res.Errors = append(r.res.Errors, e)
				}
			}
			continue
		}
		r.recs = append(r.recs, r.arena[start:len(r.arena):len(r.arena)])
		r.res.Accepted++
		if r.idemKey != nil && len(r.arena) > MaxIdempotentBytes {
			return nil, errf(store.CodeTooLarge, "a request with an Idempotency-Key is committed at once and may hold at most %d bytes of records; split it into several requests", MaxIdempotentBytes)
		}
		if r.idemKey == nil && (len(r.recs) >= chunkRecords || len(r.arena) >= chunkBytes) {
			if err := r.flush(received); err != nil {
				return nil, r.partial(err)
			}
		}
	}
	if r.res.Accepted == 0 {
		r.wait()
		if r.firstErr != nil {
			return nil, r.firstErr
		}
		r.res.Status = "rejected"
		if r.res.Rejected == 0 {
			return nil, store.Invalid(store.FieldError{Field: "data", Message: "holds no records"})
		}
		return nil, &NoneAccepted{Result: *r.res}
	}
	r.res.Status = "accepted"
	if r.res.Rejected > 0 {
		r.res.Status = "partial"
	}
	if r.idemKey != nil {
		return r.commitIdempotent(received)
	}
	if err := r.flush(received); err != nil {
		return nil, r.partial(err)
	}
	if err := r.wait(); err != nil {
		return nil, r.partial(err)
	}
	return r.res, nil
}

// flush submits the chunk read so far and starts a new one; at most inFlight chunks of a
// request are committing at once, which bounds its memory.
func (r *run) flush(received time.Time) error {
	if len(r.recs) == 0 {
		return nil
	}
	if ok, wait := r.s.quotas.Allow("rec/"+r.c.ClientID, r.c.Quota.RecordsPerMinute, len(r.recs)); !ok {
		r.wait()
		return &QuotaExceeded{Wait: wait, What: "records_per_minute"}
	}
	for len(r.waits) >= inFlight {
		if err := <-r.waits[0]; err != nil && r.firstErr == nil {
			r.firstErr = err
		}
		r.waits = r.waits[1:]
	}
	if r.firstErr != nil {
		return r.firstErr
	}
	batch := &store.AppendBatch{ModelID: r.model.ID, ReceivedAt: received, Records: r.recs}
	done := make(chan error, 1)
	r.waits = append(r.waits, done)
	recs := r.recs
	go func() {
		err := r.w.submit(r.ctx, batch)
		if err == nil {
			r.s.committed(r.c.ProjectID, r.model.Key, recs)
		}
		done <- err
	}()
	r.arena, r.recs = nil, nil
	return nil
}

// wait waits for every submitted chunk and returns the first failure.
func (r *run) wait() error {
	for _, ch := range r.waits {
		if err := <-ch; err != nil && r.firstErr == nil {
			r.firstErr = err
		}
	}
	r.waits = nil
	return r.firstErr
}

// partial reports a failure after some chunks may have been committed: how many is said
// in the message, because those records are stored.
func (r *run) partial(err error) error {
	r.wait()
	var q *QuotaExceeded
	if errors.As(err, &q) {
		q.Accepted = r.committedCount()
		return q
	}
	return err
}

func (r *run) committedCount() int {
	return r.res.Accepted - len(r.recs)
}

// commitIdempotent stores every record and the response in one batch, so a repeat of the
// key within 24 h either finds both or neither.
func (r *run) commitIdempotent(received time.Time) (*Result, error) {
	if ok, wait := r.s.quotas.Allow("rec/"+r.c.ClientID, r.c.Quota.RecordsPerMinute, len(r.recs)); !ok {
		return nil, &QuotaExceeded{Wait: wait, What: "records_per_minute"}
	}
	body, err := json.Marshal(r.res)
	if err != nil {
		return nil, err
	}
	batch := &store.AppendBatch{ModelID: r.model.ID, ReceivedAt: received, Records: r.recs, IdemKey: r.idemKey, IdemResponse: body}
	if err := r.w.submit(r.ctx, batch); err != nil {
		return nil, err
	}
	if batch.Duplicate != nil {
		return nil, &Replay{Body: batch.Duplicate}
	}
	r.s.committed(r.c.ProjectID, r.model.Key, r.recs)
	return r.res, nil
}

func (s *Service) committed(projectID, modelKey string, recs [][]byte) {
	if s.OnCommit != nil {
		s.OnCommit(Committed{ProjectID: projectID, ModelKey: modelKey, Records: recs})
	}
}

// PruneIdempotency deletes expired Idempotency-Key entries from every warehouse file this
// service writes to, a bounded number per file per call. Main calls it periodically.
func (s *Service) PruneIdempotency() error {
	s.mu.Lock()
	logs := make([]*store.RecordLog, 0, len(s.writers))
	for _, w := range s.writers {
		logs = append(logs, w.log)
	}
	s.mu.Unlock()
	var errs []error
	for _, l := range logs {
		if _, err := l.PruneIdempotency(s.now(), 10_000); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
