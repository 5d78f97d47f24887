package http

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"lookout/query"
	"lookout/store"
	"lookout/warehouse"
	"lookout/warehouse/sink"
)

// DefaultQueryTimeout bounds one query when Config.QueryTimeout is 0.
const DefaultQueryTimeout = 30 * time.Second

// registerQueryRoutes mounts the query runtime: POST /query and its CORS preflight.
func (s *Server) registerQueryRoutes(m *mux) {
	m.handle(http.MethodOptions, "/query", route{}, s.handlePreflight)
	m.handle(http.MethodPost, "/query", route{}, s.handleQuery)
}

// registerConsoleQueryRoutes mounts the console's query and stats routes.
func (s *Server) registerConsoleQueryRoutes(m *mux) {
	p := consoleBase.prefix
	m.handle(http.MethodPost, p+"/projects/:id/query", route{auth: authSession, target: targetProjectParam, readOnly: true}, s.handleConsoleQuery)
	m.handle(http.MethodGet, p+"/projects/:id/stats", route{auth: authSession, target: targetProjectParam}, s.handleProjectStats)
	m.handle(http.MethodGet, p+"/projects/:id/activity", route{auth: authSession, target: targetProjectParam}, s.handleActivity)
	m.handle(http.MethodGet, p+"/projects/:id/models/:key/export", route{auth: authSession, target: targetProjectParam}, s.handleExport)
}

// ParseExportRange reads an export's from and to (query.ParseTimeBound each; from must
// come before to). Returns validation_failed naming the bad one; the CLI uses it too.
func ParseExportRange(from, to string, now time.Time) (warehouse.ExportRange, error) {
	var r warehouse.ExportRange
	var err error
	if r.From, err = query.ParseTimeBound(from, now); err != nil {
		return r, store.Invalid(store.FieldError{Field: "from", Message: err.Error()})
	}
	if r.To, err = query.ParseTimeBound(to, now); err != nil {
		return r, store.Invalid(store.FieldError{Field: "to", Message: err.Error()})
	}
	if !r.From.IsZero() && !r.To.IsZero() && !r.From.Before(r.To) {
		return r, store.Invalid(store.FieldError{Field: "to", Message: "must be after from"})
	}
	return r, nil
}

// handleExport sends a model's records as NDJSON or Parquet (?format=, default ndjson),
// optionally within ?from= and ?to= of record time, from one consistent read, with its
// Content-Length: a client can always tell a cut download from a whole one.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.export(w, r, c.project.ID, c.params.ByName("key"))
}

// handleAdminExport is the export for `lookout export` while serve holds the data dir:
// ?project_id=&model= name the model.
func (s *Server) handleAdminExport(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	if q.Get("project_id") == "" || q.Get("model") == "" {
		return store.Invalid(store.FieldError{Field: "model", Message: "project_id and model are required"})
	}
	return s.export(w, r, q.Get("project_id"), q.Get("model"))
}

func (s *Server) export(w http.ResponseWriter, r *http.Request, projectID, key string) error {
	q := r.URL.Query()
	format := q.Get("format")
	if format == "" {
		format = warehouse.FormatNDJSON
	}
	ctype := map[string]string{warehouse.FormatNDJSON: "application/x-ndjson", warehouse.FormatParquet: "application/vnd.apache.parquet"}[format]
	if ctype == "" {
		return store.Invalid(store.FieldError{Field: "format", Message: "must be ndjson or parquet"})
	}
	rng, err := ParseExportRange(q.Get("from"), q.Get("to"), s.now())
	if err != nil {
		return err
	}
	m, err := s.store.ModelByKey(projectID, key)
	if err != nil {
		return err
	}
	wh, err := s.store.Warehouse(projectID, m.WarehouseID)
	if err != nil {
		return err
	}
	if wh.Type != store.WarehouseEmbedded {
		return errf(store.CodeConflict, "model %q writes to a %s warehouse: export reads the embedded warehouse only", m.Key, wh.Type)
	}
	log, err := s.records.Existing(m.WarehouseID)
	if errors.Is(err, warehouse.ErrNoFile) {
		log = nil // no records yet: an empty file of the format
	} else if err != nil {
		return err
	}
	// The export is written to an unlinked temporary file in the data dir first, then
	// sent: the read transaction lasts as long as a local write, never as long as a slow
	// client takes (an open read transaction keeps the warehouse file from growing, which
	// would hold back ingest). At most maxExports are written at a time; sending holds no
	// slot, and each write to the client must make progress within backupStall.
	tmp, size, err := s.writeExport(r.Context(), log, &m, rng, format)
	if err != nil {
		return err
	}
	defer tmp.Close()
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s"`, m.Key, format))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{})
	if _, err := io.Copy(deadlineWriter{w: w, rc: rc}, tmp); err != nil {
		s.log.Warn("export cut short", "model", m.Key, "err", err) // the client sees a short body
	}
	return nil
}

// writeExport writes an export into a temporary file, holding one of maxExports slots,
// and returns the file rewound and its size.
func (s *Server) writeExport(ctx context.Context, log *warehouse.RecordLog, m *store.Model, rng warehouse.ExportRange, format string) (*os.File, int64, error) {
	select {
	case s.exports <- struct{}{}:
		defer func() { <-s.exports }()
	default:
		return nil, 0, retryAfter{err: errf(store.CodeUnavailable, "%d exports are being written: try again shortly", maxExports), after: 5 * time.Second}
	}
	tmp, err := s.records.ExportFile()
	if err != nil {
		return nil, 0, err
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if log == nil {
		_, err = warehouse.ExportEmpty(m, format, bw)
	} else {
		_, err = log.Export(ctx, m, rng, format, bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	var size int64
	if err == nil {
		size, err = tmp.Seek(0, io.SeekCurrent)
	}
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		tmp.Close()
		return nil, 0, err
	}
	return tmp, size, nil
}

// maxExports bounds the exports being written at once.
const maxExports = 2

func (s *Server) handleQuery(w http.ResponseWriter, r *http.Request, c *call) error {
	corsHeaders(w.Header())
	id, err := s.auth.AuthenticateRuntime(runtimeRequest(r, store.ClientQuery, store.TransportHTTP))
	if err != nil {
		return err
	}
	if ok, wait := s.queryQuotas.Allow(id.Client.ID, id.Client.Quota.RequestsPerMinute, 1); !ok {
		return retryAfter{err: errf(store.CodeRateLimited, "this client's quota of %d queries a minute is spent", id.Client.Quota.RequestsPerMinute), after: wait}
	}
	caller := query.Caller{Client: id.Client}
	if id.Key != nil {
		caller.KeyModels = id.Key.Models
	}
	return s.serveQuery(w, r, func(ctx context.Context, body *query.Body) (*query.Result, string, error) {
		return s.query.Run(ctx, caller, body)
	})
}

func (s *Server) handleConsoleQuery(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.serveQuery(w, r, func(ctx context.Context, body *query.Body) (*query.Result, string, error) {
		return s.query.RunConsole(ctx, c.project.ID, body)
	})
}

// serveQuery reads and decodes a query body, runs it under the query deadline, counts it
// and answers: the part the runtime and console routes share.
func (s *Server) serveQuery(w http.ResponseWriter, r *http.Request, run func(context.Context, *query.Body) (*query.Result, string, error)) error {
	raw, err := readBody(w, r)
	if err != nil {
		return err
	}
	setReadDeadline(w, time.Time{})
	// Duplicate keys are refused as on every other JSON route: one reader must not see
	// a different query than another.
	if err := checkDuplicateKeys(raw); err != nil {
		return err
	}
	body, err := query.Decode(raw)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.queryTimeout)
	defer cancel()
	start := time.Now()
	res, form, err := run(ctx, body)
	if form != "" {
		s.metrics.queried(form, time.Since(start).Seconds(), res)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, query.ErrDeadline) {
		return retryAfter{err: errf(store.CodeUnavailable, "the query ran past its %s deadline (--query-timeout): narrow its time_range or filters", s.queryTimeout), after: time.Second}
	}
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

// modelStats is one model's line in the project stats.
type modelStats struct {
	ModelID  string `json:"model_id"`
	ModelKey string `json:"model_key"`
	Status   string `json:"status"`
	warehouse.ModelStats
	// Sink is how far the model's records are shipped, for a model of an external
	// warehouse.
	Sink *sink.Status `json:"sink,omitempty"`
}

func (s *Server) handleProjectStats(w http.ResponseWriter, r *http.Request, c *call) error {
	out := []modelStats{}
	shipping := map[string]sink.Status{}
	if s.sink != nil {
		for _, st := range s.sink.Statuses() {
			shipping[st.WarehouseID+"/"+st.ModelID] = st
		}
	}
	page := store.Page{Limit: 200}
	for {
		models, next, err := s.store.ListModels(c.project.ID, "", page)
		if err != nil {
			return err
		}
		for _, m := range models {
			line := modelStats{ModelID: m.ID, ModelKey: m.Key, Status: m.Status}
			if st, ok := shipping[m.WarehouseID+"/"+m.ID]; ok {
				line.Sink = &st
			}
			data, err := s.records.Existing(m.WarehouseID)
			switch {
			case errors.Is(err, warehouse.ErrNoFile): // no records yet: zero figures
			case err != nil:
				return err
			default:
				if line.ModelStats, err = data.Stats(m.ID); err != nil {
					return err
				}
			}
			out = append(out, line)
		}
		if next == "" {
			break
		}
		page.After = next
	}
	writeData(w, http.StatusOK, map[string]any{"project_id": c.project.ID, "models": out})
	return nil
}

// handleActivity is the console overview's time series: records each active model received
// per hour over the last ?hours= (default 24, at most 96), and the alerting tallies of the
// last ?days= (default 14, at most 90).
func (s *Server) handleActivity(w http.ResponseWriter, r *http.Request, c *call) error {
	hours, err := intParam(r, "hours", 24, 1, query.MaxActivitySteps)
	if err != nil {
		return err
	}
	days, err := intParam(r, "days", 14, 1, 90)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	from := now.Truncate(time.Hour).Add(-time.Duration(hours-1) * time.Hour)
	ctx, cancel := context.WithTimeout(r.Context(), s.queryTimeout)
	defer cancel()
	recs, err := s.query.Activity(ctx, c.project.ID, from, time.Hour, hours)
	if err != nil {
		return err
	}
	al, err := s.alerts.Activity(c.project.ID, days)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"project_id": c.project.ID, "from": from, "step_seconds": 3600, "records": recs, "alerts": al})
	return nil
}
