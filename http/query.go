package http

import (
	"context"
	"errors"
	"net/http"
	"time"

	"lookout/query"
	"lookout/store"
	"lookout/warehouse"
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
}

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
}

func (s *Server) handleProjectStats(w http.ResponseWriter, r *http.Request, c *call) error {
	out := []modelStats{}
	page := store.Page{Limit: 200}
	for {
		models, next, err := s.store.ListModels(c.project.ID, "", page)
		if err != nil {
			return err
		}
		for _, m := range models {
			line := modelStats{ModelID: m.ID, ModelKey: m.Key, Status: m.Status}
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
