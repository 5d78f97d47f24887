// Package http is Lookout's transport: one Server builds the routers of the three listeners
// (console + Management API, ingest, query), the middleware and the error table. Handlers
// translate between HTTP and the services; they hold no business rules.
package http

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"lookout/alerts"
	"lookout/auth"
	"lookout/ingest"
	"lookout/limits"
	"lookout/query"
	"lookout/store"
	"lookout/warehouse"
	"lookout/warehouse/sink"
)

// Server holds the services the handlers call and builds the listeners' handlers.
type Server struct {
	alerts  *alerts.Service
	exports chan struct{} // a slot per export running (maxExports)
	store   *store.Store
	auth    *auth.Service
	log     *slog.Logger
	now     func() time.Time
	ready   func() error
	version string

	loginLimit    *limits.Keyed
	registerLimit *limits.Keyed
	metrics       *metrics
	ingest        *ingest.Service
	wsIngestPath  string
	records       *warehouse.RecordStore
	sink          *sink.Manager
	wsDiscover    bool
	ingestURL     string
	queryURL      string
	// metricsToken is the SHA-256 of the token /metrics requires; nil leaves it open.
	metricsToken []byte

	bodyReadTimeout time.Duration // console, Management, query: the whole body
	ingestReadIdle  time.Duration // ingest: each read
	ingestMinRate   int64         // ingest: bytes per second over the body, 0 = no rule
	sockets         *sockets
	cursors         cursorCodec

	query        *query.Service
	queryTimeout time.Duration
	queryQuotas  *limits.Quotas

	testWarehouse func(ctx context.Context, w store.Warehouse, username, secret string) error
}

// Config wires a Server.
type Config struct {
	Store *store.Store
	Auth  *auth.Service
	Log   *slog.Logger
	// Now is the clock (tests inject one); nil means time.Now.
	Now func() time.Time
	// Ready reports whether the service can take traffic; nil means always.
	Ready   func() error
	Version string
	// Ingest is the ingest runtime; WSIngestPath is where WebSocket ingest listens
	// (default /ws/ingest).
	Ingest       *ingest.Service
	WSIngestPath string
	// Records holds the embedded warehouse files (admin backup and check).
	Records *warehouse.RecordStore
	// WSDiscover enables /ws/discover on the ingest listener.
	WSDiscover bool
	// IngestURL is the ingest listener's address, for the OpenAPI documents.
	IngestURL string
	// WSMaxConns and WSMaxConnsPerClient cap open runtime WebSockets, overall and per
	// client (0: DefaultWSMaxConns, DefaultWSMaxConnsPerID).
	WSMaxConns, WSMaxConnsPerClient int
	// CursorKey authenticates list cursors (derive it from the master key so cursors
	// survive a restart); nil means a random key for this process.
	CursorKey []byte
	// MetricsToken, when set, is required as "Authorization: Bearer <token>" on /metrics.
	MetricsToken string
	// BodyReadTimeout bounds reading a whole request body on the console, Management and
	// query listeners (0: DefaultBodyReadTimeout). IngestReadIdle bounds each read of an
	// ingest body (0: DefaultIngestReadIdle) and IngestMinRate is the least average rate,
	// in bytes per second, an ingest body must keep (0: DefaultIngestMinRate; negative:
	// no rate rule). See deadline.go.
	BodyReadTimeout time.Duration
	IngestReadIdle  time.Duration
	IngestMinRate   int64
	// Query is the query runtime; QueryTimeout bounds one query (0: DefaultQueryTimeout).
	Query        *query.Service
	QueryTimeout time.Duration
	// Sealer, when set, feeds the warehouse metrics.
	Sealer *warehouse.Sealer
	// Sink, when set, feeds the sink metrics and the stats' shipping lines.
	Sink *sink.Manager
	// Alerts is the alerting service; nil means one over Store with Now.
	Alerts *alerts.Service
	// TestWarehouse connects to an external warehouse (postgres, clickhouse) as the user
	// name and secret of its credential, and returns nil when the engine answers and
	// accepts them; main passes one that opens the engine, pings it and closes it. Its
	// error should be a warehouse/external Error, whose message is the engine's own with
	// secrets taken out (any other error shows as a generic sentence). Creating or
	// updating an external warehouse calls it before anything is written, and
	// POST /warehouses/{id}/test calls it on demand, each with a context that ends after
	// 10 s. nil skips the check on writes (tests, tools), and the test route answers 503.
	TestWarehouse func(ctx context.Context, w store.Warehouse, username, secret string) error
}

// NewServer returns a Server.
func NewServer(c Config) *Server {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Ready == nil {
		c.Ready = func() error { return nil }
	}
	s := &Server{
		store: c.Store, auth: c.Auth, log: c.Log, now: c.Now, ready: c.Ready, version: c.Version,
		// Ten sign-in attempts a minute per client address blunts password guessing without
		// getting in a person's way.
		loginLimit: limits.NewKeyed(10, time.Minute, c.Now),
		// Registration succeeds once per appliance; ten tries a minute per address is
		// plenty for a person and keeps a script from hammering it.
		registerLimit: limits.NewKeyed(10, time.Minute, c.Now),
		ingest:        c.Ingest, wsIngestPath: c.WSIngestPath, records: c.Records, wsDiscover: c.WSDiscover, ingestURL: c.IngestURL,
		cursors: newCursorCodec(c.CursorKey),
		alerts:  c.Alerts,
		exports: make(chan struct{}, maxExports),
	}
	s.testWarehouse = c.TestWarehouse
	if s.alerts == nil {
		s.alerts = alerts.New(alerts.Config{Store: c.Store, Clock: alerts.ClockOf(c.Now), Log: c.Log})
	}
	s.bodyReadTimeout, s.ingestReadIdle, s.ingestMinRate = c.BodyReadTimeout, c.IngestReadIdle, c.IngestMinRate
	if s.bodyReadTimeout <= 0 {
		s.bodyReadTimeout = DefaultBodyReadTimeout
	}
	if s.ingestReadIdle <= 0 {
		s.ingestReadIdle = DefaultIngestReadIdle
	}
	switch {
	case s.ingestMinRate == 0:
		s.ingestMinRate = DefaultIngestMinRate
	case s.ingestMinRate < 0:
		s.ingestMinRate = 0
	}
	s.query, s.queryTimeout, s.queryQuotas = c.Query, c.QueryTimeout, limits.NewQuotas(c.Now)
	if s.queryTimeout <= 0 {
		s.queryTimeout = DefaultQueryTimeout
	}
	s.sockets = newSockets(c.WSMaxConns, c.WSMaxConnsPerClient)
	if s.wsIngestPath == "" {
		s.wsIngestPath = "/ws/ingest"
	}
	s.sink = c.Sink
	s.metrics = newMetrics(func() float64 { return float64(c.Store.Size()) }, c.Sealer, s.alerts)
	if c.Sink != nil {
		s.metrics.reg.MustRegister(sinkCollector{c.Sink})
	}
	if c.MetricsToken != "" {
		sum := sha256.Sum256([]byte(c.MetricsToken))
		s.metricsToken = sum[:]
	}
	return s
}

// GoAway closes every runtime WebSocket with 1001 (going away) once the message it is
// handling has been answered, refuses new ones, and waits for their handlers until ctx
// ends. Main calls it at shutdown: http.Server.Shutdown does not track hijacked
// connections.
func (s *Server) GoAway(ctx context.Context) { s.sockets.goAway(ctx) }

// SetIngestURL tells the console where the ingest listener is, for the OpenAPI documents.
// Call it before the console listener starts serving.
func (s *Server) SetIngestURL(u string) { s.ingestURL = u }

// SetQueryURL tells the console where the query listener is, for its examples. Call it
// before the console listener starts serving.
func (s *Server) SetQueryURL(u string) { s.queryURL = u }

// ConsoleHandler serves the console API (/api/v1), the Management API (/management/v1),
// health and metrics.
func (s *Server) ConsoleHandler() http.Handler {
	m := s.newMux("console")
	s.registerConsoleApp(m)
	m.handle(http.MethodGet, "/metrics", route{}, s.handleMetrics(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})))
	s.registerAuthRoutes(m)
	s.registerWorkspaceRoutes(m)
	s.registerTokenRoutes(m)
	s.registerDiscoveryRoutes(m)
	if s.query != nil {
		s.registerConsoleQueryRoutes(m)
	}
	for _, b := range []base{consoleBase, managementBase} {
		s.registerProjectRoutes(m, b)
		s.registerResourceRoutes(m, b)
		s.registerAlertRoutes(m, b)
	}
	return m.r
}

// handleMetrics serves the Prometheus registry, behind the metrics token when one is set.
// Both sides are hashed before the constant-time compare, so neither the token's bytes nor
// its length show in the timing.
func (s *Server) handleMetrics(prom http.Handler) handler {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		if s.metricsToken != nil {
			scheme, tok, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
			sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
			if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], s.metricsToken) != 1 {
				return errf(store.CodeUnauthenticated, "/metrics requires Authorization: Bearer <metrics token>")
			}
		}
		prom.ServeHTTP(w, r)
		return nil
	}
}

// IngestHandler serves the ingest runtime listener.
func (s *Server) IngestHandler() http.Handler {
	m := s.newMux("ingest")
	if s.ingest != nil {
		s.registerIngestRoutes(m)
	}
	return m.r
}

// QueryHandler serves the query runtime listener.
func (s *Server) QueryHandler() http.Handler {
	m := s.newMux("query")
	if s.query != nil {
		s.registerQueryRoutes(m)
	}
	return m.r
}

// base is one of the two API roots that share resource routes.
type base struct {
	prefix string
	auth   authKind
}

var (
	consoleBase    = base{prefix: "/api/v1", auth: authSession}
	managementBase = base{prefix: "/management/v1", auth: authToken}
)

type authKind int

const (
	authNone    authKind = iota
	authSession          // console session JWT
	authToken            // Management Token
)

// target says where a route's workspace or project comes from, so access is decided before
// the handler runs.
type target int

const (
	targetNone           target = iota
	targetWorkspaceQuery        // ?workspace_id=
	targetNewProjectBody        // body workspace_id, and the caller may create projects there
	targetProjectParam          // the {id} of /projects/{id}
	targetProjectQuery          // ?project_id=
	targetProjectBody           // body project_id
	targetResourceParam         // the project of the stored resource {id} of route.kind
	targetResourceAction        // targetResourceParam on a bodiless POST (registration only)
)

// route describes one endpoint.
type route struct {
	auth   authKind
	family string // Management scope family
	target target
	kind   store.Kind // for targetResourceParam
	body   bool       // reads a JSON body
	// perAddress, when set, limits requests per client address before anything else is
	// done (the body is not even read), with refusal as the 429's message.
	perAddress *limits.Keyed
	refusal    string
	// readOnly marks a POST that only reads (a query): read access suffices.
	readOnly bool
}

// call is what the middleware learned about a request before its handler runs.
type call struct {
	params  httprouter.Params
	p       *auth.Principal
	body    []byte
	role    string        // the caller's role in the target workspace
	project store.Project // the target project, when the route has one
}

type handler func(w http.ResponseWriter, r *http.Request, c *call) error

type mux struct {
	s        *Server
	r        *httprouter.Router
	listener string
}

func (s *Server) newMux(listener string) *mux {
	m := &mux{s: s, listener: listener, r: httprouter.New()}
	// An API answers where it was asked; it never redirects to a "fixed" path.
	m.r.RedirectTrailingSlash = false
	m.r.RedirectFixedPath = false
	m.r.HandleOPTIONS = false
	m.r.HandleMethodNotAllowed = true
	m.r.NotFound = withoutParams(m.wrap("unmatched", route{}, func(w http.ResponseWriter, r *http.Request, c *call) error {
		return errNoRoute(r.URL.Path)
	}))
	m.r.MethodNotAllowed = withoutParams(m.wrap("unmatched", route{}, func(w http.ResponseWriter, r *http.Request, c *call) error {
		return errMethodNotAllowed(r.Method)
	}))
	m.r.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		s.log.Error("panic", "method", r.Method, "path", redact(r.URL.Path), "panic", v, "stack", string(debug.Stack()))
		s.writeError(w, r, errf(store.CodeInternal, "internal error"))
	}
	m.handle(http.MethodGet, "/healthz", route{}, func(w http.ResponseWriter, r *http.Request, c *call) error {
		writeData(w, http.StatusOK, map[string]string{"status": "ok", "version": s.version})
		return nil
	})
	m.handle(http.MethodGet, "/readyz", route{}, func(w http.ResponseWriter, r *http.Request, c *call) error {
		if err := s.ready(); err != nil {
			return errf(store.CodeUnavailable, "not ready: %s", err.Error())
		}
		writeData(w, http.StatusOK, map[string]string{"status": "ready"})
		return nil
	})
	return m
}

func (m *mux) handle(method, path string, rt route, h handler) {
	m.r.Handle(method, path, m.wrap(path, rt, h))
}

func withoutParams(h httprouter.Handle) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, nil) })
}

// wrap is the one adapter from handler to http.Handler: panic recovery, metrics, logging,
// authentication, the scope check, the body cap and the target's access check, in the
// order of CONTRACTS §2 (401, then 403, then the handler).
func (m *mux) wrap(pattern string, rt route, h handler) httprouter.Handle {
	s := m.s
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic", "method", r.Method, "path", redact(r.URL.Path), "panic", v, "stack", string(debug.Stack()))
				if sw.status == 0 {
					s.writeError(sw, r, errf(store.CodeInternal, "internal error"))
				}
			}
			d := time.Since(start)
			s.metrics.observe(m.listener, pattern, r.Method, sw.code(), d.Seconds())
			if s.log.Enabled(r.Context(), slog.LevelDebug) {
				s.log.Debug("request", "listener", m.listener, "method", r.Method, "path", redact(r.URL.Path), "status", sw.code(), "duration", d)
			}
		}()
		if hasBody(r) {
			// Bound the body's arrival before anything reads it; this also bounds the
			// server's drain of a body the handler leaves unread (see deadline.go).
			if m.listener == "ingest" {
				setReadDeadline(sw, time.Now().Add(s.ingestReadIdle))
				r2 := *r
				r2.Body = &idleBody{ReadCloser: r.Body, rc: http.NewResponseController(sw), idle: s.ingestReadIdle, minRate: s.ingestMinRate}
				r = &r2
			} else {
				setReadDeadline(sw, time.Now().Add(s.bodyReadTimeout))
			}
		}
		c := &call{params: ps}
		if err := s.prepare(sw, r, rt, c); err != nil {
			s.writeError(sw, r, err)
			return
		}
		if err := h(sw, r, c); err != nil {
			s.writeError(sw, r, err)
		}
	}
}

func (s *Server) prepare(w http.ResponseWriter, r *http.Request, rt route, c *call) error {
	if rt.perAddress != nil {
		if ok, wait := rt.perAddress.Allow(addressKey(r)); !ok {
			return retryAfter{err: errf(store.CodeRateLimited, "%s", rt.refusal), after: wait}
		}
	}
	var err error
	switch rt.auth {
	case authSession:
		c.p, err = s.auth.AuthenticateSession(r.Header.Get("Authorization"))
	case authToken:
		if c.p, err = s.auth.AuthenticateToken(r.Header.Get("Authorization")); err == nil {
			err = auth.RequireScope(c.p, auth.RouteScope(rt.family, r.Method))
		}
	}
	if err != nil {
		return err
	}
	if rt.body {
		if c.body, err = readBody(w, r); err != nil {
			return err
		}
		// The body is in: a deadline left set would cancel the handler's context once it
		// passes (the server's background read fails on it).
		setReadDeadline(w, time.Time{})
	}
	write := auth.IsWrite(r.Method) && !rt.readOnly
	switch rt.target {
	case targetWorkspaceQuery:
		var ws string
		if ws, err = queryString(r, "workspace_id"); err == nil {
			c.role, err = s.auth.Workspace(c.p, ws, write)
		}
	case targetNewProjectBody:
		// A project-restricted token is refused whatever its body says.
		if err = s.auth.CreateProjectAllowed(c.p); err != nil {
			return err
		}
		var ws string
		if ws, err = bodyString(c.body, "workspace_id"); err == nil {
			_, err = s.auth.Workspace(c.p, ws, true)
		}
	case targetProjectParam:
		c.project, err = s.auth.Project(c.p, c.params.ByName("id"), write)
	case targetProjectQuery:
		var pid string
		if pid, err = queryString(r, "project_id"); err == nil {
			c.project, err = s.auth.Project(c.p, pid, write)
		}
	case targetProjectBody:
		// The body names the project; ?project_id= is accepted when the body does not, and
		// must agree when both do.
		pid, present, ferr := bodyField(c.body, "project_id")
		qpid := r.URL.Query().Get("project_id")
		switch {
		case ferr != nil:
			return ferr
		case !present && qpid == "":
			return store.Invalid(store.FieldError{Field: "project_id", Message: "is required"})
		case !present:
			pid = qpid
		case qpid != "" && qpid != pid:
			return store.Invalid(store.FieldError{Field: "project_id", Message: "differs between the query and the body"})
		}
		c.project, err = s.auth.Project(c.p, pid, write)
	case targetResourceParam:
		var pid string
		if pid, err = s.store.ResourceProject(rt.kind, c.params.ByName("id")); err == nil {
			c.project, err = s.auth.Project(c.p, pid, write)
			if store.IsCode(err, store.CodeNotFound) {
				// A resource of a project the caller may not see answers what an unknown
				// id of this kind answers, byte for byte.
				err = store.NotFound(rt.kind.Name)
			}
		}
	}
	return err
}

// bodyField reads one string field of a JSON object body, for access checks that must run
// before the handler decodes the whole body. present is false when the body lacks the
// field; a field that is present must be a non-empty string.
func bodyField(body []byte, field string) (v string, present bool, err error) {
	// Access is decided from this field: a body that names it twice is refused before
	// anyone can disagree about which one counts.
	if err := checkDuplicateKeys(body); err != nil {
		return "", false, err
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] != '{' {
			return "", false, errf(store.CodeInvalidJSON, "request body must be a JSON object")
		}
		return "", false, jsonErrorIn(err, body, nil)
	}
	raw, ok := probe[field]
	switch {
	case !ok:
		return "", false, nil
	case string(raw) == "null":
		return "", true, store.Invalid(store.FieldError{Field: field, Message: "is required"})
	case json.Unmarshal(raw, &v) != nil || v == "":
		return "", true, store.Invalid(store.FieldError{Field: field, Message: "must be a non-empty string"})
	}
	return v, true, nil
}

// bodyString is bodyField for a required field.
func bodyString(body []byte, field string) (string, error) {
	v, present, err := bodyField(body, field)
	if err == nil && !present {
		err = store.Invalid(store.FieldError{Field: field, Message: "is required"})
	}
	return v, err
}

// queryString reads a required query parameter.
func queryString(r *http.Request, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return "", store.Invalid(store.FieldError{Field: name, Message: "is required"})
	}
	return v, nil
}

// addressKey is what per-address limits count by: the peer's IPv4 address, or the /64 of
// an IPv6 one (one host commonly holds a whole /64, so single IPv6 addresses would let it
// make fresh keys at will).
func addressKey(r *http.Request) string {
	ip, err := netip.ParseAddr(clientIP(r))
	if err != nil {
		return clientIP(r)
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// clientIP is the peer address of a request (Lookout trusts no forwarding headers).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// statusWriter remembers the status a handler wrote, for metrics and logs.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer (flush, hijack, deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
