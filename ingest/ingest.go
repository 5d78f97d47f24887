package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math"
	"mime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"lookout/limits"
	"lookout/store"
	"lookout/warehouse"
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

// QuotaExceeded is returned when a client's quota refuses a request (or, wrapped in a
// *Partial, the rest of one).
type QuotaExceeded struct {
	Wait time.Duration
	What string
}

func (e *QuotaExceeded) Error() string {
	return fmt.Sprintf("the client's %s quota is used up; retry later", e.What)
}

// Replay is returned for a repeated Idempotency-Key: Body is the first response's data.
type Replay struct{ Body json.RawMessage }

func (e *Replay) Error() string { return "idempotent replay" }

// Committed is a batch handed to the OnCommit hook after it is durable. Records are the
// stored form of each record (compact JSON of the model's fields); the system fields they
// all share are beside them.
type Committed struct {
	ProjectID  string
	ModelKey   string
	ReceivedAt time.Time
	ClientID   string
	IngestID   string
	Records    [][]byte
	// Watched are the fields WatchFields named when the model was resolved, and Spans
	// where their values sit in each record: len(Watched) spans per record, in order.
	Watched []string
	Spans   []warehouse.Span
}

// ErrMemory is returned when the process-wide budget for Idempotency-Key requests (held
// in memory until their single commit) is spent: answer 503 with Retry-After.
var ErrMemory = errors.New("too many Idempotency-Key requests are being held in memory")

// Limits are the ingest runtime's per-request and process-wide caps.
type Limits struct {
	// MaxBody caps the decompressed bytes of one request (--ingest-max-body).
	MaxBody int64
	// MaxRatio caps how many times larger than its compressed form a gzip body may inflate
	// (--ingest-max-ratio), checked once it has inflated past ratioFloor.
	MaxRatio int64
	// IdempotentMemory is the budget shared by every Idempotency-Key request being held
	// in memory (--ingest-idempotent-memory).
	IdempotentMemory int64
}

// DefaultLimits are the limits of a server started without flags.
var DefaultLimits = Limits{MaxBody: 1 << 30, MaxRatio: 100, IdempotentMemory: 256 << 20}

// Service runs ingest. It is safe for concurrent use.
type Service struct {
	store   *store.Store
	records *warehouse.RecordStore
	now     func() time.Time
	log     *slog.Logger
	quotas  *limits.Quotas

	// OnCommit, when set, receives every committed batch after its commit, outside any
	// transaction (the alert evaluator plugs in here). It is called from many goroutines
	// at once; Records are never reused, so it may keep them.
	OnCommit func(Committed)
	// WatchFields, when set, names the fields of a model whose value spans the OnCommit
	// hook wants with each record (the alert evaluator's fields). It is asked when a
	// model is resolved, once per runtime generation.
	WatchFields func(projectID, modelKey string) []string
	// Admit, when set, is asked before a request writes to the outbox of a model whose
	// warehouse is external; an error (503: the sink is too far behind) refuses it.
	Admit func(warehouseID, modelID string) error

	lim        Limits
	idemMemory *limits.Budget

	mu       sync.Mutex
	writers  map[string]*writer
	inflight map[string]struct{}
	closed   bool

	models modelCache
}

// New returns a Service writing into records, with DefaultLimits.
func New(st *store.Store, records *warehouse.RecordStore, now func() time.Time, log *slog.Logger) *Service {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Service{store: st, records: records, now: now, log: log, quotas: limits.NewQuotas(now),
		writers: map[string]*writer{}, inflight: map[string]struct{}{}}
	s.SetLimits(DefaultLimits)
	return s
}

// SetLimits replaces the limits; call it before the service takes requests. A zero field
// keeps its default.
func (s *Service) SetLimits(l Limits) {
	if l.MaxBody <= 0 {
		l.MaxBody = DefaultLimits.MaxBody
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = DefaultLimits.MaxRatio
	}
	if l.IdempotentMemory <= 0 {
		l.IdempotentMemory = DefaultLimits.IdempotentMemory
	}
	s.lim = l
	s.idemMemory = limits.NewBudget(l.IdempotentMemory)
}

// Close stops the writers after they commit what is queued, until ctx ends (nil: no
// deadline); every request waiting on a writer is answered: committed, or ErrBusy if its
// batch was not committed by then.
func (s *Service) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	ws := s.writers
	s.writers = map[string]*writer{}
	s.mu.Unlock()
	for _, w := range ws {
		w.close(ctx)
	}
}

// Open starts the writer of every embedded warehouse named, opening (and upgrading) its
// file now rather than on the first request, so a server that says it is ready ingests
// at once.
func (s *Service) Open(warehouseIDs []string) error {
	for _, id := range warehouseIDs {
		if _, err := s.writer(id); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) writer(warehouseID string) (*writer, error) { return s.writerFor(warehouseID, false) }

// writerFor returns a warehouse file's writer; outbox marks the file as an external
// warehouse's outbox the first time (warehouse.RecordStore.Outbox).
func (s *Service) writerFor(warehouseID string, outbox bool) (*writer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrBusy
	}
	if w := s.writers[warehouseID]; w != nil {
		if outbox && !w.log.IsOutbox() {
			// Opened at start as a plain file (a crash can leave a new outbox unmarked):
			// mark it before the first record goes in.
			if _, err := s.records.Outbox(warehouseID); err != nil {
				return nil, err
			}
		}
		return w, nil
	}
	open := s.records.Log
	if outbox {
		open = s.records.Outbox
	}
	log, err := open(warehouseID)
	if err != nil {
		return nil, err
	}
	w := newWriter(log)
	s.writers[warehouseID] = w
	return w, nil
}

func errf(code, format string, args ...any) error { return store.Errorf(code, format, args...) }

// ratioFloor is how far a gzip body may inflate before the ratio cap applies, so small
// and highly repetitive bodies are never refused for their ratio.
const ratioFloor = 4 << 20

// limitError is a body that passed one of the size caps (413).
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// gzipError is a corrupt or truncated gzip stream.
type gzipError struct{ err error }

func (e gzipError) Error() string { return "gzip: " + e.err.Error() }

// gunzip marks every error of the gzip reader but the end as a gzip error.
type gunzip struct{ zr *gzip.Reader }

func (g gunzip) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF {
		err = gzipError{err}
	}
	return n, err
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// capped is the decompressed body: it enforces MaxBody and the compression ratio on every
// byte, whitespace included, and feeds the request fingerprint when there is one.
type capped struct {
	r     io.Reader
	n     int64
	max   int64
	raw   *counter // the compressed bytes; nil when the body is not compressed
	ratio int64
	fp    *fingerprint
}

func (c *capped) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.fp != nil {
		c.fp.h.Write(p[:n])
	}
	if c.n > c.max {
		return n, &limitError{fmt.Sprintf("the body is larger than %d bytes (decompressed), the server's --ingest-max-body; split it into several requests", c.max)}
	}
	if c.raw != nil && c.n > ratioFloor && c.n > c.ratio*c.raw.n {
		return n, &limitError{fmt.Sprintf("the gzip body inflates more than %d times its compressed size, the server's --ingest-max-ratio", c.ratio)}
	}
	return n, err
}

// fingerprint identifies an Idempotency-Key request: a SHA-256 of what decides its
// outcome (the ?schema= parameter, the media type and the decompressed body).
type fingerprint struct{ h hash.Hash }

func newFingerprint(schema, mediaType string) *fingerprint {
	f := &fingerprint{h: sha256.New()}
	f.h.Write([]byte(schema + "\x00" + mediaType + "\x00"))
	return f
}

func (f *fingerprint) sum() []byte {
	if f == nil {
		return nil
	}
	return f.h.Sum(nil)
}

// closers closes a gzip reader, if any, then gives the read buffer back.
type closers struct {
	c       io.Closer
	release func()
}

func (c closers) Close() error {
	var err error
	if c.c != nil {
		err = c.c.Close()
	}
	c.release()
	return err
}

// newSource picks the decoder for a media type, undoing gzip first, with the body caps
// applied to the decompressed bytes.
func (s *Service) newSource(req Request, keyed bool) (source, *fingerprint, io.Closer, error) {
	mt, _, err := mime.ParseMediaType(req.ContentType)
	if err != nil {
		return nil, nil, nil, errf(store.CodeUnsupportedMediaType, "Content-Type must be application/json, application/x-ndjson or application/ndjson")
	}
	body := &capped{r: req.Body, max: s.lim.MaxBody, ratio: s.lim.MaxRatio}
	var closer io.Closer
	switch strings.ToLower(strings.TrimSpace(req.ContentEncoding)) {
	case "", "identity":
	case "gzip":
		body.raw = &counter{r: req.Body}
		zr, err := gzip.NewReader(body.raw)
		if err != nil {
			return nil, nil, nil, errf(store.CodeInvalidJSON, "the body is not valid gzip")
		}
		body.r, closer = gunzip{zr}, zr
	default:
		return nil, nil, nil, errf(store.CodeUnsupportedMediaType, "Content-Encoding must be gzip or absent")
	}
	if keyed {
		body.fp = newFingerprint(req.Schema, mt)
	}
	switch mt {
	case "application/x-ndjson", "application/ndjson":
		br, release := pooledReader(body)
		return newNDJSON(br), body.fp, closers{closer, release}, nil
	case "application/json":
		return newJSONBody(body), body.fp, closer, nil
	}
	return nil, nil, nil, errf(store.CodeUnsupportedMediaType, "Content-Type must be application/json, application/x-ndjson or application/ndjson")
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
// record is durable. Errors: *NoneAccepted, *QuotaExceeded, *Replay, ErrBusy, ErrMemory,
// and store errors (validation_failed, invalid_json, unsupported_media_type, too_large,
// forbidden, not_found, conflict, unprocessable). A request without an Idempotency-Key
// that fails once reading has begun returns a *Partial wrapping the cause: it says how
// many records were stored and where to resume.
func (s *Service) Ingest(ctx context.Context, c Caller, req Request) (*Result, error) {
	if err := s.allowRequest(c); err != nil {
		return nil, err
	}
	var idemKey []byte
	if req.IdempotencyKey != "" {
		if len(req.IdempotencyKey) > 255 {
			return nil, store.Invalid(store.FieldError{Field: "Idempotency-Key", Message: "must be at most 255 characters"})
		}
		idemKey = []byte(c.ClientID + "\x00" + req.IdempotencyKey)
		release, ok := s.lockIdempotency(string(idemKey))
		if !ok {
			return nil, errf(store.CodeConflict, "a request with this Idempotency-Key is still being processed; retry once it has been answered")
		}
		defer release()
	}
	src, fp, closer, err := s.newSource(req, idemKey != nil)
	if err != nil {
		return nil, err
	}
	if closer != nil {
		defer closer.Close()
	}
	run := &run{s: s, c: c, ctx: ctx, idemKey: idemKey, fp: fp, byLine: src.byLine(),
		res: &Result{IngestID: s.store.NewID("ing_"), Errors: []RecordError{}}}
	if idemKey != nil {
		defer run.releaseMemory()
		return run.do(src, req.Schema)
	}
	res, err := run.do(src, req.Schema)
	if err != nil {
		return nil, run.partial(err)
	}
	return res, nil
}

// allowRequest spends one request of the client's requests_per_minute; /ingest and
// /discover share the budget. Returns *QuotaExceeded.
func (s *Service) allowRequest(c Caller) error {
	if ok, wait := s.quotas.Allow("req/"+c.ClientID, c.Quota.RequestsPerMinute, 1); !ok {
		return &QuotaExceeded{Wait: wait, What: "requests_per_minute"}
	}
	return nil
}

// allowRecords spends n records of the client's records_per_minute (shared likewise).
// Returns *QuotaExceeded.
func (s *Service) allowRecords(c Caller, n int) error {
	if ok, wait := s.quotas.Allow("rec/"+c.ClientID, c.Quota.RecordsPerMinute, n); !ok {
		return &QuotaExceeded{Wait: wait, What: "records_per_minute"}
	}
	return nil
}

// lockIdempotency claims an Idempotency-Key for one request at a time. A second request
// with the same key while the first is in flight is refused (409, as the IETF
// Idempotency-Key draft says) rather than queued behind it.
func (s *Service) lockIdempotency(key string) (func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, busy := s.inflight[key]; busy {
		return nil, false
	}
	s.inflight[key] = struct{}{}
	return func() {
		s.mu.Lock()
		delete(s.inflight, key)
		s.mu.Unlock()
	}, true
}

// chunk is a part of a request queued for commit (its records are p.batch.Records).
type chunk struct {
	p      *pending
	endPos int // position of its last record
}

// run is the state of one request.
type run struct {
	s       *Service
	c       Caller
	ctx     context.Context
	idemKey []byte
	fp      *fingerprint
	byLine  bool
	res     *Result

	schema    string
	model     store.Model
	validator *warehouse.RecordValidator
	watched   []string
	w         *writer

	arena    []byte
	recs     [][]byte         // an idempotent request keeps all its records here until the end
	spans    []warehouse.Span // the watched spans of recs (len(watched) each)
	lastPos  int              // position of the last record in recs
	reserved int64            // bytes of the idempotent-request memory budget held
	retired  int64            // capacity of the full arena blocks recs still points into
	recBytes int              // bytes of the records in recs

	stream    stream
	chunks    []chunk // queued, oldest first
	committed int     // records of this request durably stored
	resumeAt  int     // position after the last stored record
	firstErr  error
}

func (r *run) recordError(pos int, field, msg string) {
	if len(r.res.Errors) >= MaxErrors {
		return
	}
	e := RecordError{Field: field, Message: msg}
	if r.byLine {
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
	external := wh.Type != store.WarehouseEmbedded
	if external && r.s.Admit != nil {
		// The record log of an external warehouse is its outbox: the 202 stays local and
		// the sink ships it, unless the sink is so far behind that the disk would fill.
		if err := r.s.Admit(wh.ID, m.ID); err != nil {
			return err
		}
	}
	if r.w, err = r.s.writerFor(wh.ID, external); err != nil {
		return err
	}
	r.model, r.validator, r.watched = m, rm.validator, rm.watched
	return nil
}

// chunkLimit is how many records one chunk may hold: never more than the client's
// records_per_minute quota, so a long stream makes progress instead of asking for a chunk
// the quota can never grant.
func (r *run) chunkLimit() int {
	if q := r.c.Quota.RecordsPerMinute; q > 0 && q < chunkRecords {
		return q
	}
	return chunkRecords
}

func (r *run) do(src source, querySchema string) (*Result, error) {
	if r.byLine {
		r.resumeAt = 1
	}
	if querySchema != "" {
		if err := r.resolve(querySchema); err != nil {
			return nil, err
		}
	}
	received := r.s.now().UTC()
	limit := r.chunkLimit()
	for {
		it, err := src.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, readError(err)
		}
		if it.err != "" {
			r.res.Rejected++
			r.recordError(it.pos, "", it.err)
			continue
		}
		schema := it.schema
		if schema == "" {
			schema = r.schema
		}
		switch {
		case schema == "":
			return nil, store.Invalid(store.FieldError{Field: "schema", Message: "is required: use ?schema=, a \"schema\" field in the JSON body, or wrapped NDJSON lines"})
		case r.schema == "":
			if err := r.resolve(schema); err != nil {
				return nil, err
			}
		case schema != r.schema:
			r.res.Rejected++
			r.recordError(it.pos, "schema", fmt.Sprintf("names %q but this request writes %q: one schema per request", schema, r.schema))
			continue
		}
		if cap(r.arena)-len(r.arena) < len(it.raw)+1 {
			// Records go into blocks that are never copied: letting append grow one array
			// copied every record again and again (Go grows large slices by a quarter), and
			// an idempotent request, which holds every record until its commit, kept two or
			// three times their size alive. A stored record is never longer than its raw
			// form, so it fits its block. Blocks double up to arenaBlock.
			r.retired += int64(cap(r.arena))
			size := arenaBlock
			if r.idemKey == nil {
				size = min(max(2*cap(r.arena), 16<<10), arenaBlock)
			}
			r.arena = make([]byte, 0, max(size, len(it.raw)+1))
		}
		start := len(r.arena)
		var ferrs []store.FieldError
		r.arena, r.spans, ferrs = r.validator.ValidateSpans(it.raw, r.arena, r.spans)
		if len(ferrs) > 0 {
			r.res.Rejected++
			for _, fe := range ferrs {
				r.recordError(it.pos, fe.Field, fe.Message)
			}
			continue
		}
		r.recs = append(r.recs, r.arena[start:len(r.arena):len(r.arena)])
		r.recBytes += len(r.arena) - start
		r.lastPos = it.pos
		r.res.Accepted++
		if r.idemKey != nil {
			if err := r.holdMemory(); err != nil {
				return nil, err
			}
			continue
		}
		if len(r.recs) >= limit || r.recBytes >= chunkBytes {
			if err := r.flush(received); err != nil {
				return nil, err
			}
		}
	}
	if r.res.Accepted == 0 { // so no chunk was queued
		r.res.Status = "rejected"
		if r.res.Rejected == 0 {
			return nil, store.Invalid(store.FieldError{Field: "data", Message: "holds no records"})
		}
		if r.idemKey != nil {
			if err := r.checkReplay(); err != nil {
				return nil, err
			}
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
		return nil, err
	}
	if err := r.wait(); err != nil {
		return nil, err
	}
	return r.res, nil
}

// readError turns a failure to read the body into the error the caller sees.
func readError(err error) error {
	var se *store.Error
	if errors.As(err, &se) { // the transport's own answer (a stalled body: 408)
		return se
	}
	var le *limitError
	switch {
	case errors.As(err, &le):
		return errf(store.CodeTooLarge, "%s", le.msg)
	case errors.Is(err, errTooBig):
		return errf(store.CodeTooLarge, "%s", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errf(store.CodeInvalidJSON, "the request ended before its body was read")
	}
	var ge gzipError
	if errors.As(err, &ge) {
		return errf(store.CodeInvalidJSON, "the gzip stream is corrupt or truncated")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errf(store.CodeInvalidJSON, "the body ended in the middle of a record")
	}
	var de *decodeError
	if errors.As(err, &de) {
		return errf(store.CodeInvalidJSON, "%s", de.msg)
	}
	return errf(store.CodeInvalidJSON, "the body could not be read")
}

// flush queues the chunk read so far and starts a new one; at most inFlight chunks of a
// request are committing at once, which bounds its memory. Chunks are queued from this
// goroutine, in order, and the writer commits none after a failed one, so what is stored
// is always the request's valid records up to some point.
func (r *run) flush(received time.Time) error {
	if len(r.recs) == 0 {
		return r.firstErr
	}
	for len(r.chunks) >= inFlight {
		r.settle()
	}
	if r.firstErr != nil {
		return r.firstErr
	}
	if err := r.s.allowRecords(r.c, len(r.recs)); err != nil {
		return err
	}
	batch := &warehouse.AppendBatch{ModelID: r.model.ID, ReceivedAt: received, Entries: warehouse.EncodeEntries(r.recs, r.c.ClientID, r.res.IngestID)}
	p := &pending{batch: batch, recs: r.recs, spans: r.spans, stream: &r.stream, done: make(chan error, 1)}
	if err := r.w.enqueue(r.ctx, p); err != nil {
		// Not queued, and nothing after it will be: the chunks queued before it still
		// commit, in order, so what is stored stays a prefix.
		r.firstErr = err
		return err
	}
	r.chunks = append(r.chunks, chunk{p: p, endPos: r.lastPos})
	r.arena, r.recs, r.spans, r.recBytes, r.retired = nil, nil, nil, 0, 0
	return nil
}

// settle waits for the oldest queued chunk.
func (r *run) settle() {
	c := r.chunks[0]
	r.chunks = r.chunks[1:]
	if err := <-c.p.done; err != nil {
		if r.firstErr == nil {
			r.firstErr = err
		}
		return
	}
	r.committed += len(c.p.recs)
	r.resumeAt = c.endPos + 1
	r.committedHook(c.p.batch.ReceivedAt, c.p.recs, c.p.spans)
}

// wait waits for every queued chunk and returns the first failure.
func (r *run) wait() error {
	for len(r.chunks) > 0 {
		r.settle()
	}
	return r.firstErr
}

// Partial is a streamed request that failed after reading began: Accepted records (the
// valid records before the resume position, in order) are durably stored, nothing after
// them is. A client resumes by sending the body again from ResumeLine (NDJSON, 1-based)
// or ResumeIndex (JSON, 0-based).
type Partial struct {
	Err         error
	IngestID    string
	Accepted    int
	ResumeLine  *int
	ResumeIndex *int
}

func (e *Partial) Error() string { return e.Err.Error() }

// Unwrap gives the cause, which decides the status.
func (e *Partial) Unwrap() error { return e.Err }

// partial waits for the chunks still committing and wraps err with what was stored.
func (r *run) partial(err error) error {
	var none *NoneAccepted
	if errors.As(err, &none) {
		return err
	}
	r.wait()
	p := &Partial{Err: err, IngestID: r.res.IngestID, Accepted: r.committed}
	at := r.resumeAt
	if r.byLine {
		p.ResumeLine = &at
	} else {
		p.ResumeIndex = &at
	}
	return p
}

// holdMemory keeps an idempotent request's buffered records within its own cap and the
// process-wide budget for such requests.
func (r *run) holdMemory() error {
	if r.recBytes > MaxIdempotentBytes {
		return errf(store.CodeTooLarge, "a request with an Idempotency-Key is committed at once and may hold at most %d bytes of records; split it into several requests", MaxIdempotentBytes)
	}
	spans := int64(cap(r.spans)) * int64(unsafe.Sizeof(warehouse.Span{}))
	for r.retired+int64(cap(r.arena))+int64(cap(r.recs))*24+spans > r.reserved {
		if !r.s.idemMemory.Reserve(idemMemoryStep) {
			return ErrMemory
		}
		r.reserved += idemMemoryStep
	}
	return nil
}

func (r *run) releaseMemory() {
	r.s.idemMemory.Release(r.reserved)
	r.reserved = 0
}

// idemMemoryStep is how much of the budget an idempotent request takes at a time.
const idemMemoryStep = 1 << 20

// arenaBlock is the size of the blocks an idempotent request's records are stored in, and
// the most a block of any other request grows to.
const arenaBlock = 1 << 20

// checkReplay answers a repeated Idempotency-Key from what was stored for it: the first
// response when the request is the same, 422 when the key was used for another request.
func (r *run) checkReplay() error {
	if r.w == nil {
		return nil
	}
	prev, hash := r.w.log.Idempotent(r.idemKey, r.s.now())
	if prev == nil {
		return nil
	}
	if hash != nil && !bytes.Equal(hash, r.fp.sum()) {
		return errMismatch
	}
	return &Replay{Body: prev}
}

var errMismatch = errf(store.CodeUnprocessable, "this Idempotency-Key was already used for a different request; use a new key for new records")

// commitIdempotent stores every record and the response in one batch, so a repeat of the
// key within 24 h either finds both or neither.
func (r *run) commitIdempotent(received time.Time) (*Result, error) {
	if err := r.checkReplay(); err != nil {
		return nil, err
	}
	if q := r.c.Quota.RecordsPerMinute; q > 0 && len(r.recs) > q {
		return nil, errf(store.CodeTooLarge, "this request holds %d records but the client's records_per_minute quota is %d: a request with an Idempotency-Key is committed at once, so it can never fit; split it into requests of at most %d records", len(r.recs), q, q)
	}
	if err := r.s.allowRecords(r.c, len(r.recs)); err != nil {
		return nil, err
	}
	body, err := json.Marshal(r.res)
	if err != nil {
		return nil, err
	}
	batch := &warehouse.AppendBatch{ModelID: r.model.ID, ReceivedAt: received, Entries: warehouse.EncodeEntries(r.recs, r.c.ClientID, r.res.IngestID),
		IdemKey: r.idemKey, IdemHash: r.fp.sum(), IdemResponse: body}
	if err := r.w.submit(r.ctx, batch); err != nil {
		return nil, err
	}
	if batch.Mismatch {
		return nil, errMismatch
	}
	if batch.Duplicate != nil {
		return nil, &Replay{Body: batch.Duplicate}
	}
	r.committedHook(received, r.recs, r.spans)
	return r.res, nil
}

// committedHook hands committed records to the OnCommit hook.
func (r *run) committedHook(received time.Time, recs [][]byte, spans []warehouse.Span) {
	if r.s.OnCommit != nil {
		r.s.OnCommit(Committed{ProjectID: r.c.ProjectID, ModelKey: r.model.Key, ReceivedAt: received,
			ClientID: r.c.ClientID, IngestID: r.res.IngestID, Records: recs, Watched: r.watched, Spans: spans})
	}
}

// PruneIdempotency deletes every expired Idempotency-Key entry from every warehouse file this
// service writes to, in transactions of a bounded size. Main calls it every minute.
func (s *Service) PruneIdempotency() error {
	s.mu.Lock()
	logs := make([]*warehouse.RecordLog, 0, len(s.writers))
	for _, w := range s.writers {
		logs = append(logs, w.log)
	}
	s.mu.Unlock()
	var errs []error
	for _, l := range logs {
		// Everything due goes, however much: the log prunes through its expiry index in
		// transactions of a bounded size, so writers wait at most one of them.
		if _, err := l.PruneIdempotency(s.now(), math.MaxInt); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
