package http

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/julienschmidt/httprouter"
)

// consoleFiles is the web console: plain ES modules, HTML and CSS, no build step. The
// binary carries it, so the console works air-gapped.
//
//go:embed console
var consoleFiles embed.FS

// consoleCSP keeps the console to its own origin: scripts, styles, images and API calls all
// come from the binary's listener, nothing is inlined, and no other site may frame it.
const consoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// MaxConsoleAssets is the budget of the console's files, uncompressed (issue 11): a test
// keeps the embedded tree under it.
const MaxConsoleAssets = 400 << 10

// webapp is the console's files, read once: each with a strong ETag and a gzip copy made
// at start, so a request costs a map lookup.
type webapp struct {
	// prefix is /assets/<hash>/: the hash covers every file, so a file under it never
	// changes and may be cached for good; index.html names the prefix and is revalidated.
	prefix string
	index  *asset
	files  map[string]*asset // by path under console/, e.g. "js/main.js"
	size   int
}

type asset struct {
	ctype        string
	body, gz     []byte
	etag, etagGz string
}

var (
	consoleOnce sync.Once
	consoleApp  *webapp
)

// console returns the web app, built on first use from the embedded files.
func console() *webapp {
	consoleOnce.Do(func() {
		app, err := loadWebapp(consoleFiles, "console")
		if err != nil {
			// The files are compiled in: failing here is a broken build, not a runtime state.
			panic("console assets: " + err.Error())
		}
		consoleApp = app
	})
	return consoleApp
}

func loadWebapp(fsys fs.FS, root string) (*webapp, error) {
	raw := map[string][]byte{}
	var names []string
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, root+"/")
		raw[name] = b
		names = append(names, name)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	h := sha256.New()
	app := &webapp{files: map[string]*asset{}}
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(raw[n])
		h.Write([]byte{0})
		app.size += len(raw[n])
	}
	app.prefix = "/assets/" + hex.EncodeToString(h.Sum(nil))[:16] + "/"
	for _, n := range names {
		if n == "index.html" {
			continue
		}
		app.files[n] = newAsset(n, raw[n])
	}
	index, ok := raw["index.html"]
	if !ok {
		return nil, fs.ErrNotExist
	}
	app.index = newAsset("index.html", bytes.ReplaceAll(index, []byte("/assets/-/"), []byte(app.prefix)))
	return app, nil
}

func newAsset(name string, body []byte) *asset {
	ctype := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	case ".js", ".mjs":
		ctype = "text/javascript; charset=utf-8"
	case ".css":
		ctype = "text/css; charset=utf-8"
	case ".html":
		ctype = "text/html; charset=utf-8"
	case ".svg":
		ctype = "image/svg+xml"
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	sum := sha256.Sum256(body)
	tag := hex.EncodeToString(sum[:])[:24]
	a := &asset{ctype: ctype, body: body, etag: `"` + tag + `"`}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(body)
	_ = zw.Close()
	if buf.Len() < len(body) {
		// A gzip body is another representation: it gets its own strong validator.
		a.gz, a.etagGz = buf.Bytes(), `"`+tag+`-gz"`
	}
	return a
}

// registerConsoleApp serves the web console: its files under the hashed prefix, the app's
// page for every other GET outside the APIs, and the app's bootstrap route.
func (s *Server) registerConsoleApp(m *mux) {
	app := console()
	// Every GET outside the APIs is the app's page (client-side routing); the APIs keep
	// their JSON 404.
	notFound := m.r.NotFound
	page := withoutParams(m.wrap("app", route{}, func(w http.ResponseWriter, r *http.Request, c *call) error {
		s.serveIndex(w, r)
		return nil
	}))
	m.r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isAppPath(r) {
			page.ServeHTTP(w, r)
			return
		}
		notFound.ServeHTTP(w, r)
	})
	m.r.Handle(http.MethodGet, "/assets/:hash/*file", s.serveAsset(app))
	m.r.Handle(http.MethodHead, "/assets/:hash/*file", s.serveAsset(app))
	m.handle(http.MethodGet, "/api/v1/console", route{}, s.handleConsoleConfig)
}

// serveAsset answers one file of the app. A stale hash (a page loaded before an upgrade)
// is a 404 rather than today's file under yesterday's immutable name.
func (s *Server) serveAsset(app *webapp) func(http.ResponseWriter, *http.Request, httprouter.Params) {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		a := app.files[strings.TrimPrefix(ps.ByName("file"), "/")]
		if a == nil || "/assets/"+ps.ByName("hash")+"/" != app.prefix {
			s.writeError(w, r, errNoRoute(r.URL.Path))
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		a.serve(w, r)
	}
}

// isAppPath says whether a GET of this unmatched path gets the app: everything but the
// APIs, the assets and the runtime paths, which keep their JSON 404.
func isAppPath(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	for _, api := range []string{"/api/", "/management/", "/assets/", "/ws/", "/v1/"} {
		if strings.HasPrefix(p, api) {
			return false
		}
	}
	return p != "/api" && p != "/management"
}

// serveIndex answers the app's page: revalidated on every load (it names the hashed
// assets), never framed.
func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	console().index.serve(w, r)
}

func (a *asset) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Type", a.ctype)
	body, tag := a.body, a.etag
	if a.gz != nil {
		h.Set("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			body, tag = a.gz, a.etagGz
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", tag)
	if etagMatches(r.Header.Get("If-None-Match"), tag) {
		h.Del("Content-Type")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reads Accept-Encoding: gzip (or *) with a q-value above zero.
func acceptsGzip(v string) bool {
	for _, part := range strings.Split(v, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "gzip" && name != "*" {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
					q = f
				}
			}
		}
		return q > 0
	}
	return false
}

// etagMatches is If-None-Match's weak comparison (RFC 9110 §13.1.2) against one tag.
func etagMatches(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == tag {
			return true
		}
	}
	return false
}

// handleConsoleConfig tells the app, before anyone signs in, what it needs to draw its
// first screen: whether the appliance still waits for its owner, and where the runtime
// listeners are (for the ingest examples).
func (s *Server) handleConsoleConfig(w http.ResponseWriter, r *http.Request, c *call) error {
	setup := s.store.RegistrationOpen() == nil
	writeData(w, http.StatusOK, map[string]any{
		"version":        s.version,
		"setup_required": setup,
		"ingest_url":     s.ingestURL,
		"query_url":      s.queryURL,
	})
	return nil
}
