package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"lookout/alerts"
	"lookout/auth"
	apphttp "lookout/http"
	"lookout/ingest"
	"lookout/query"
	"lookout/store"
	"lookout/warehouse"
	"lookout/warehouse/engines"
	"lookout/warehouse/sink"
)

// serveOptions are serve's flags (each also read from LOOKOUT_<FLAG>).
type serveOptions struct {
	*globalOptions
	addr, ingestAddr, queryAddr string
	tlsCert, tlsKey             string
	ingestTLSCert, ingestTLSKey string
	queryTLSCert, queryTLSKey   string
	logFormat, logLevel         string
	wsIngestPath                string
	wsDiscover                  bool
	ephemeral                   bool
	newMasterKey                bool
	shutdownTimeout             time.Duration
	ingestLimits                ingest.Limits
	wsMaxConns, wsMaxPerClient  int
	metricsToken                string
	readHeaderTimeout           time.Duration
	idleTimeout                 time.Duration
	bodyReadTimeout             time.Duration
	queryTimeout                time.Duration
	sinkMaxLag                  int64
	ingestReadIdle              time.Duration
	ingestMinRate               int64
}

func newServeCommand(g *globalOptions) *cobra.Command {
	o := &serveOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the service: console + Management API, ingest and query listeners",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.ephemeral {
				// A fixture must never collide with a running instance: free ports unless
				// the caller chose them.
				for _, f := range []struct {
					name string
					v    *string
				}{{"addr", &o.addr}, {"ingest-addr", &o.ingestAddr}, {"query-addr", &o.queryAddr}} {
					if !flagGiven(cmd, f.name) {
						*f.v = "127.0.0.1:0"
					}
				}
				if !flagGiven(cmd, "data-dir") {
					o.dataDir = "" // a fresh temporary directory, removed on exit
				}
			}
			// SIGHUP (the terminal went away) shuts down cleanly too: its default would kill
			// the process without removing the socket or an ephemeral data dir.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			return runServe(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "console and Management API listen address")
	f.StringVar(&o.ingestAddr, "ingest-addr", "127.0.0.1:8081", "ingest runtime listen address")
	f.StringVar(&o.queryAddr, "query-addr", "127.0.0.1:8082", "query runtime listen address")
	f.StringVar(&o.tlsCert, "tls-cert", "", "console listener TLS certificate (PEM)")
	f.StringVar(&o.tlsKey, "tls-key", "", "console listener TLS key (PEM)")
	f.StringVar(&o.ingestTLSCert, "ingest-tls-cert", "", "ingest listener TLS certificate (PEM); client certificates are requested for mTLS")
	f.StringVar(&o.ingestTLSKey, "ingest-tls-key", "", "ingest listener TLS key (PEM)")
	f.StringVar(&o.queryTLSCert, "query-tls-cert", "", "query listener TLS certificate (PEM); client certificates are requested for mTLS")
	f.StringVar(&o.queryTLSKey, "query-tls-key", "", "query listener TLS key (PEM)")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&o.wsIngestPath, "ws-ingest-path", "/ws/ingest", "path of WebSocket ingest on the ingest listener")
	f.BoolVar(&o.wsDiscover, "ws-discover", false, "enable discovery over WebSocket at /ws/discover on the ingest listener")
	f.BoolVar(&o.ephemeral, "ephemeral", false, "integration-test fixture: temporary data dir, free ports, an owner and an all-scopes token, printed as one JSON line on stdout")
	f.StringVar(&o.metricsToken, "metrics-token", "", "require Authorization: Bearer <token> on /metrics (at least 16 characters; prefer LOOKOUT_METRICS_TOKEN, as flags show in ps)")
	f.DurationVar(&o.readHeaderTimeout, "read-header-timeout", 10*time.Second, "how long a client may take to send a request's headers (every listener)")
	f.DurationVar(&o.idleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection stays open (every listener)")
	f.DurationVar(&o.queryTimeout, "query-timeout", apphttp.DefaultQueryTimeout, "how long one query may run; past it the query is stopped and answers 503")
	f.Int64Var(&o.sinkMaxLag, "sink-max-lag", sink.DefaultMaxLag, "records a model of an external warehouse may have waiting to ship before ingest answers 503 (Retry-After) instead of filling the disk")
	f.DurationVar(&o.bodyReadTimeout, "body-read-timeout", apphttp.DefaultBodyReadTimeout, "how long a console, Management or query request body may take to arrive in full; slower bodies get 408")
	f.DurationVar(&o.ingestReadIdle, "ingest-read-idle-timeout", apphttp.DefaultIngestReadIdle, "how long an ingest body may send nothing before the request ends (streams have no overall deadline)")
	f.Int64Var(&o.ingestMinRate, "ingest-min-rate", apphttp.DefaultIngestMinRate, "least average rate, in bytes per second, an ingest body must keep beyond its first idle period (-1: no rate rule)")
	f.BoolVar(&o.newMasterKey, "new-master-key", false, "the master key was replaced on purpose (the old one is lost): accept it and store a new key check; secrets sealed with the old key stay unreadable")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long to let in-flight requests finish on SIGINT/SIGTERM")
	f.Int64Var(&o.ingestLimits.MaxBody, "ingest-max-body", ingest.DefaultLimits.MaxBody, "most bytes one ingest request may hold once decompressed (413 past it)")
	f.Int64Var(&o.ingestLimits.MaxRatio, "ingest-max-ratio", ingest.DefaultLimits.MaxRatio, "most times a gzip ingest body may inflate past its compressed size, once past 4 MiB (413 past it)")
	f.Int64Var(&o.ingestLimits.IdempotentMemory, "ingest-idempotent-memory", ingest.DefaultLimits.IdempotentMemory, "bytes shared by all Idempotency-Key requests held in memory until their commit (503 when spent)")
	f.IntVar(&o.wsMaxConns, "ws-max-conns", apphttp.DefaultWSMaxConns, "most runtime WebSockets open at once (503 past it)")
	f.IntVar(&o.wsMaxPerClient, "ws-max-conns-per-client", apphttp.DefaultWSMaxConnsPerID, "most runtime WebSockets one ingest client may have open (429 past it)")
	return cmd
}

// flagGiven reports whether a flag was set on the command line or through its environment
// variable.
func flagGiven(cmd *cobra.Command, name string) bool {
	_, env := os.LookupEnv(envName(name))
	return cmd.Flags().Changed(name) || env
}

func newLogger(format, level string, w *os.File) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

// fixture is the line `serve --ephemeral` prints: everything an integration test needs.
type fixture struct {
	BaseURL         string `json:"base_url"`
	IngestURL       string `json:"ingest_url"`
	QueryURL        string `json:"query_url"`
	DataDir         string `json:"data_dir"`
	WorkspaceID     string `json:"workspace_id"`
	OwnerEmail      string `json:"owner_email"`
	OwnerPassword   string `json:"owner_password"`
	ManagementToken string `json:"management_token"`
}

func runServe(ctx context.Context, o *serveOptions, stdout, stderr interface{ Write([]byte) (int, error) }) error {
	errf, _ := stderr.(*os.File)
	if errf == nil {
		errf = os.Stderr
	}
	log, err := newLogger(o.logFormat, o.logLevel, errf)
	if err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read-header-timeout", o.readHeaderTimeout}, {"idle-timeout", o.idleTimeout}, {"body-read-timeout", o.bodyReadTimeout}, {"ingest-read-idle-timeout", o.ingestReadIdle}, {"query-timeout", o.queryTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("--%s must be a positive duration such as 30s", d.name)
		}
	}
	if o.ingestMinRate == 0 || o.ingestMinRate < -1 {
		return errors.New("--ingest-min-rate must be a positive number of bytes per second, or -1 for no rate rule")
	}
	if o.metricsToken != "" && len(o.metricsToken) < 16 {
		return errors.New("--metrics-token must be at least 16 characters (use a random value, e.g. openssl rand -hex 32)")
	}
	m := &Main{opts: *o, Log: log}
	if err := m.Open(); err != nil {
		return err
	}
	if m.Fixture != nil {
		line, _ := json.Marshal(m.Fixture)
		if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
			m.Close(context.Background())
			return err
		}
	}
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: draining in-flight requests", "timeout", o.shutdownTimeout)
	case serveErr = <-m.errc:
		log.Error("listener failed; shutting down", "err", serveErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := m.Close(sctx); err != nil {
		return err
	}
	log.Info("stopped")
	return serveErr
}

// Main owns the wiring of one running service: it opens the store, starts the workers and
// listeners, and Close shuts them down in reverse order.
type Main struct {
	opts serveOptions
	Log  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	Store   *store.Store
	Records *warehouse.RecordStore
	Ingest  *ingest.Service
	Sealer  *warehouse.Sealer
	Sink    *sink.Manager
	Query   *query.Service
	Auth    *auth.Service
	Alerts  *alerts.Service
	HTTP    *apphttp.Server

	BaseURL, IngestURL, QueryURL string
	Fixture                      *fixture

	dataDir     string
	ownsDataDir bool
	lock        *os.File
	servers     []*http.Server
	admin       *http.Server
	sockPath    string
	errc        chan error
	closing     atomic.Bool
	flushStop   chan struct{}
	flushDone   chan struct{}
	sealStop    context.CancelFunc
	sealDone    chan struct{}
	sinkStop    context.CancelFunc
	sinkDone    chan struct{}
	wg          sync.WaitGroup
}

// Open opens the data dir and starts serving. On error everything opened so far is closed.
func (m *Main) Open() (err error) {
	defer func() {
		if err != nil {
			m.Close(context.Background())
		}
	}()
	if m.Now == nil {
		m.Now = time.Now
	}
	m.errc = make(chan error, 4)
	m.dataDir = m.opts.dataDir
	if m.dataDir == "" {
		if m.dataDir, err = os.MkdirTemp("", "lookout-ephemeral-"); err != nil {
			return err
		}
		m.ownsDataDir = true
	}
	if err := os.MkdirAll(m.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	// The process lock first: nothing in the data dir (socket, key) is touched unless we
	// hold it.
	if m.lock, err = lockDataDir(m.dataDir, lockExclusive, 500*time.Millisecond); err != nil {
		return err
	}
	sealer, err := openSealer(m.opts.globalOptions, m.dataDir)
	if err != nil {
		return err
	}
	if m.Store, err = store.Open(filepath.Join(m.dataDir, "lookout.db"), store.Options{Now: m.Now, LockTimeout: 500 * time.Millisecond, Sealer: sealer, NewMasterKey: m.opts.newMasterKey, QueryRules: query.Rules{}}); err != nil {
		return err
	}
	m.Auth = auth.New(m.Store, sealer.DeriveKey("session-jwt"), m.Now, m.Log)
	if m.Records, err = warehouse.OpenRecordStore(m.dataDir); err != nil {
		return err
	}
	files, err := m.noteWarehouseFiles()
	if err != nil {
		return err
	}
	m.Ingest = ingest.New(m.Store, m.Records, m.Now, m.Log)
	// alerts and ingest do not import each other: main hands the evaluator the post-commit
	// hook.
	m.Alerts = alerts.New(alerts.Config{Store: m.Store, Clock: alerts.ClockOf(m.Now), Log: m.Log})
	m.Ingest.OnCommit = func(c ingest.Committed) {
		m.Alerts.Enqueue(alerts.Batch{ProjectID: c.ProjectID, ModelKey: c.ModelKey, ReceivedAt: c.ReceivedAt, ClientID: c.ClientID,
			Records: c.Records, Watched: c.Watched, Spans: c.Spans})
	}
	m.Ingest.WatchFields = m.Alerts.WatchedFields
	m.Ingest.SetLimits(m.opts.ingestLimits)
	// Open (and upgrade) every warehouse file now, so that ready means ingest answers at
	// once instead of after the first request opened the file under the writer's lock.
	if err := m.Ingest.Open(files); err != nil {
		return err
	}
	m.Sealer = &warehouse.Sealer{Records: m.Records, Now: m.Now, Policy: warehouse.DefaultSealPolicy, Log: m.Log,
		Yield: warehouse.DefaultYield, YieldBacklog: warehouse.DefaultYieldBacklog, YieldAge: warehouse.DefaultYieldAge,
		Model: func(id string) (*store.Model, error) {
			md, err := m.Store.ModelByID(id)
			return &md, err
		}}
	// The sink ships the outboxes of external warehouses; ingest asks it before writing
	// to one (a sink far behind refuses), queries share its engines.
	m.Sink = &sink.Manager{Store: m.Store, Records: m.Records, Dial: engines.Dial, Now: m.Now, Log: m.Log, MaxLag: m.opts.sinkMaxLag}
	m.Ingest.Admit = m.Sink.Admit
	m.Query = &query.Service{Store: m.Store, Records: m.Records, Now: m.Now, Caps: query.DefaultCaps, Engine: m.Sink.Engine}
	m.HTTP = apphttp.NewServer(apphttp.Config{
		Query: m.Query, QueryTimeout: m.opts.queryTimeout, Sealer: m.Sealer, Alerts: m.Alerts, Sink: m.Sink, TestWarehouse: engines.Test,
		Store: m.Store, Auth: m.Auth, Log: m.Log, Now: m.Now, Version: buildVersion(),
		Ingest: m.Ingest, WSIngestPath: m.opts.wsIngestPath, Records: m.Records, WSDiscover: m.opts.wsDiscover,
		WSMaxConns: m.opts.wsMaxConns, WSMaxConnsPerClient: m.opts.wsMaxPerClient,
		CursorKey:       sealer.DeriveKey("list-cursor"),
		MetricsToken:    m.opts.metricsToken,
		BodyReadTimeout: m.opts.bodyReadTimeout, IngestReadIdle: m.opts.ingestReadIdle, IngestMinRate: m.opts.ingestMinRate,
		Ready: func() error {
			if m.closing.Load() {
				return errors.New("shutting down")
			}
			return nil
		},
	})
	if m.opts.ephemeral {
		if m.Fixture, err = bootstrapFixture(m.Store, m.dataDir); err != nil {
			return err
		}
	}

	m.flushStop, m.flushDone = make(chan struct{}), make(chan struct{})
	go m.flushUsage()
	m.Alerts.Start()
	var sealCtx context.Context
	sealCtx, m.sealStop = context.WithCancel(context.Background())
	m.sealDone = make(chan struct{})
	go func() { defer close(m.sealDone); m.Sealer.Run(sealCtx) }()
	var sinkCtx context.Context
	sinkCtx, m.sinkStop = context.WithCancel(context.Background())
	m.sinkDone = make(chan struct{})
	go func() { defer close(m.sinkDone); m.Sink.Run(sinkCtx) }()

	if err := m.startAdminSocket(); err != nil {
		return err
	}
	// The runtimes first: the console's OpenAPI documents name the ingest listener's URL.
	if m.IngestURL, err = m.listen("ingest", m.opts.ingestAddr, m.opts.ingestTLSCert, m.opts.ingestTLSKey, true, m.HTTP.IngestHandler()); err != nil {
		return err
	}
	if m.QueryURL, err = m.listen("query", m.opts.queryAddr, m.opts.queryTLSCert, m.opts.queryTLSKey, true, m.HTTP.QueryHandler()); err != nil {
		return err
	}
	m.HTTP.SetIngestURL(m.IngestURL)
	m.HTTP.SetQueryURL(m.QueryURL)
	if m.BaseURL, err = m.listen("console", m.opts.addr, m.opts.tlsCert, m.opts.tlsKey, false, m.HTTP.ConsoleHandler()); err != nil {
		return err
	}
	if m.Fixture != nil {
		m.Fixture.BaseURL, m.Fixture.IngestURL, m.Fixture.QueryURL = m.BaseURL, m.IngestURL, m.QueryURL
	}
	return nil
}

// masterKeyPath is the key file the options name: --master-key-file, else
// <data-dir>/lookout.key.
func masterKeyPath(g *globalOptions, dataDir string) string {
	if g.masterKeyFile != "" {
		return g.masterKeyFile
	}
	return filepath.Join(dataDir, "lookout.key")
}

// openSealer loads the master key, making one for a new data dir. A data file made with
// another key refuses it at open (its key check, or a stored secret, does not open).
func openSealer(g *globalOptions, dataDir string) (*store.Sealer, error) {
	key, err := store.LoadMasterKey(masterKeyPath(g, dataDir), os.Getenv("LOOKOUT_MASTER_KEY"), store.KeyOptions{InsecurePermissions: g.insecureKeyPerms})
	if err != nil {
		return nil, err
	}
	return store.NewSealer(key)
}

// listen binds one listener and serves it in the background. Runtime listeners with TLS
// request (not require) client certificates, so mTLS clients can present one.
func (m *Main) listen(name, addr, cert, key string, mtls bool, h http.Handler) (string, error) {
	if (cert == "") != (key == "") {
		return "", fmt.Errorf("%s listener: give both a TLS certificate and a key, or neither", name)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s listener: %w", name, err)
	}
	scheme := "http"
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			ln.Close()
			return "", fmt.Errorf("%s listener TLS: %w", name, err)
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		if mtls {
			cfg.ClientAuth = tls.RequestClientCert
		}
		ln = tls.NewListener(ln, cfg)
		scheme = "https"
	}
	// No ReadTimeout: its deadline would also cut 1 GB ingest streams and cancel handlers
	// still working after the body arrived. Bodies get per-request deadlines instead
	// (http/deadline.go: --body-read-timeout, --ingest-read-idle-timeout, --ingest-min-rate).
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: m.opts.readHeaderTimeout,
		IdleTimeout:       m.opts.idleTimeout,
		ErrorLog:          slog.NewLogLogger(m.Log.Handler(), slog.LevelWarn),
	}
	m.servers = append(m.servers, srv)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.errc <- fmt.Errorf("%s listener: %w", name, err)
		}
	}()
	u := scheme + "://" + ln.Addr().String()
	m.Log.Info("listening", "listener", name, "url", u)
	return u, nil
}

// maxSocketPath is the shortest sun_path limit of the supported systems (macOS: 104).
const maxSocketPath = 104

// startAdminSocket serves the admin API on <data-dir>/lookout.sock, mode 0600. A socket
// file left by a killed server is stale (we hold the data file's lock), so it is replaced.
func (m *Main) startAdminSocket() error {
	m.sockPath = filepath.Join(m.dataDir, "lookout.sock")
	if len(m.sockPath) >= maxSocketPath {
		// The kernel limits socket paths (108 bytes on Linux, 104 on macOS). Serving matters
		// more than the socket: the CLI commands then say the socket does not answer.
		m.Log.Warn("data dir path too long for the admin socket; admin, token, backup and check will not work while serving", "path", m.sockPath)
		m.sockPath = ""
		return nil
	}
	_ = os.Remove(m.sockPath)
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", m.sockPath)
	syscall.Umask(old)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(m.sockPath, 0o600); err != nil {
		ln.Close()
		return err
	}
	m.admin = &http.Server{Handler: m.HTTP.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.errc <- fmt.Errorf("admin socket: %w", err)
		}
	}()
	return nil
}

// flushUsage writes batched token last_used_at times every few seconds and drops expired
// Idempotency-Key entries and expired console sessions every minute.
func (m *Main) flushUsage() {
	defer close(m.flushDone)
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	for {
		select {
		case <-t.C:
			if err := m.Auth.FlushUsage(); err != nil {
				m.Log.Error("write token usage", "err", err)
			}
		case <-prune.C:
			if err := m.Ingest.PruneIdempotency(); err != nil {
				m.Log.Error("prune idempotency keys", "err", err)
			}
			if _, err := m.Store.PruneSessions(); err != nil {
				m.Log.Error("prune expired sessions", "err", err)
			}
		case <-m.flushStop:
			return
		}
	}
}

// Close stops accepting, drains in-flight requests until ctx ends, flushes batched
// bookkeeping and closes the store, in reverse order of Open. It is safe to call twice.
func (m *Main) Close(ctx context.Context) error {
	if m.closing.Swap(true) {
		return nil
	}
	var errs []error
	// WebSockets are hijacked connections that http.Server.Shutdown does not track: each
	// gets a close frame (1001) after the message it is handling, while the listeners
	// drain their requests, all within ctx.
	var drain sync.WaitGroup
	if m.HTTP != nil {
		drain.Add(1)
		go func() { defer drain.Done(); m.HTTP.GoAway(ctx) }()
	}
	var mu sync.Mutex
	for _, srv := range m.servers {
		drain.Add(1)
		go func(srv *http.Server) {
			defer drain.Done()
			if err := srv.Shutdown(ctx); err != nil {
				srv.Close()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}(srv)
	}
	drain.Wait()
	if m.admin != nil {
		if err := m.admin.Shutdown(ctx); err != nil {
			m.admin.Close()
		}
	}
	if m.sockPath != "" {
		_ = os.Remove(m.sockPath)
	}
	m.wg.Wait()
	if m.flushStop != nil {
		close(m.flushStop)
		<-m.flushDone
	}
	if m.Ingest != nil {
		m.Ingest.Close(ctx) // commits what is queued, until the shutdown deadline
	}
	if m.Alerts != nil {
		// After ingest: the last commits' matches are written; sends under way get until
		// the shutdown deadline, and those cut go out again after the next start.
		if err := m.Alerts.Close(ctx); err != nil {
			m.Log.Warn("alerts", "err", err)
		}
	}
	if m.sealStop != nil {
		m.sealStop() // a seal under way finishes its transaction first
		<-m.sealDone
	}
	if m.sinkStop != nil {
		m.sinkStop() // a batch under way is abandoned: it is shipped again after the next start
		<-m.sinkDone
	}
	if m.Records != nil {
		if err := m.Records.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.Auth != nil {
		if err := m.Auth.FlushUsage(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.Store != nil {
		if err := m.Store.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.lock != nil {
		m.lock.Close() // never removed: see lockName
	}
	if m.ownsDataDir {
		_ = os.RemoveAll(m.dataDir)
	}
	return errors.Join(errs...)
}

// noteWarehouseFiles records in the control plane every warehouse file on disk (data dirs
// from before such records, or a file whose record a crash lost) and every file created
// from now on, so check can tell a lost warehouse file from one never written. It
// returns the ids of the files on disk.
func (m *Main) noteWarehouseFiles() ([]string, error) {
	ids, err := m.Records.Files()
	if err != nil {
		return nil, err
	}
	if err := m.Store.NoteWarehouseFiles(ids...); err != nil {
		return nil, err
	}
	dir := filepath.Join(m.dataDir, "warehouses")
	m.Records.OnCreate = func(id string) error {
		// The file's directory entry is made durable before the record that says it
		// exists, so a crash never leaves a record without its file.
		if err := syncDir(dir); err != nil {
			return err
		}
		return m.Store.NoteWarehouseFiles(id)
	}
	return ids, nil
}

// bootstrapFixture makes the ephemeral owner and its workspace-wide, all-scopes token.
func bootstrapFixture(st *store.Store, dataDir string) (*fixture, error) {
	var pw [18]byte
	_, _ = rand.Read(pw[:])
	password := base64.RawURLEncoding.EncodeToString(pw[:])
	email := "owner@lookout.local"
	u, ws, err := auth.CreateOwner(st, email, password, "Ephemeral Owner")
	if err != nil {
		return nil, err
	}
	tok, _, err := auth.CreateToken(st, u.ID, auth.TokenRequest{Name: "ephemeral", WorkspaceID: ws.ID, Scopes: auth.AllScopes()})
	if err != nil {
		return nil, err
	}
	return &fixture{DataDir: dataDir, WorkspaceID: ws.ID, OwnerEmail: email, OwnerPassword: password, ManagementToken: tok}, nil
}
