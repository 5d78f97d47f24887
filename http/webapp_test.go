package http

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestConsoleAppServing checks what the browser gets: the app for console paths (client-side
// routing) with its security headers, the JSON 404 for unknown API paths, immutable hashed
// assets with strong ETags and gzip, and revalidation with 304.
func TestConsoleAppServing(t *testing.T) {
	h := newHarness(t)
	index := h.do("GET", "/p/prj_x/alerts/new", "", nil, "Accept-Encoding", "identity")
	if index.status != 200 || !strings.Contains(index.body, `<script type="module" src="/assets/`) {
		t.Fatalf("console path: %d %.300s", index.status, index.body)
	}
	for k, want := range map[string]string{
		"Content-Security-Policy": "default-src 'self'",
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Cache-Control":           "no-cache",
		"Content-Type":            "text/html; charset=utf-8",
	} {
		if got := index.header.Get(k); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if strings.Contains(index.header.Get("Content-Security-Policy"), "unsafe") {
		t.Error("the CSP allows something unsafe")
	}
	if root := h.do("GET", "/", "", nil); root.status != 200 || root.body != index.body {
		t.Fatalf("/: %d", root.status)
	}
	prefix := regexp.MustCompile(`/assets/[0-9a-f]{16}/`).FindString(index.body)
	if prefix == "" || strings.Contains(index.body, "/assets/-/") {
		t.Fatalf("index.html names no hashed prefix: %s", index.body)
	}
	for _, sc := range []scenario{
		{name: "unknown api path", method: "GET", url: "/api/v1/nothing", status: 404, contains: []string{`"code":"not_found"`}},
		{name: "unknown management path", method: "GET", url: "/management/v1/nothing", status: 404, contains: []string{`"code":"not_found"`}},
		{name: "api root", method: "GET", url: "/api", status: 404, contains: []string{`"code":"not_found"`}},
		{name: "POST to a console path", method: "POST", url: "/p/x", body: map[string]any{}, status: 404, contains: []string{`"code":"not_found"`}},
		{name: "stale asset hash", method: "GET", url: "/assets/0000000000000000/js/main.js", status: 404, contains: []string{`"code":"not_found"`}},
		{name: "unknown asset", method: "GET", url: prefix + "js/nothing.js", status: 404, contains: []string{`"code":"not_found"`}},
		{name: "asset path escape", method: "GET", url: prefix + "../index.html", status: 404},
		{name: "config, anonymous", method: "GET", url: "/api/v1/console", status: 200, contains: []string{`"setup_required":true`, `"ingest_url":`}},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}

	plain := h.do("GET", prefix+"js/main.js", "", nil, "Accept-Encoding", "identity")
	if plain.status != 200 || plain.header.Get("Content-Type") != "text/javascript; charset=utf-8" ||
		plain.header.Get("Cache-Control") != "public, max-age=31536000, immutable" || plain.header.Get("Content-Encoding") != "" {
		t.Fatalf("asset: %d %v", plain.status, plain.header)
	}
	gz := h.do("GET", prefix+"js/main.js", "", nil, "Accept-Encoding", "br, gzip;q=0.8")
	if gz.header.Get("Content-Encoding") != "gzip" || gz.header.Get("ETag") == plain.header.Get("ETag") || gz.header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("gzip: %v", gz.header)
	}
	zr, err := gzip.NewReader(strings.NewReader(gz.body))
	if err != nil {
		t.Fatal(err)
	}
	if unz, _ := io.ReadAll(zr); !bytes.Equal(unz, []byte(plain.body)) {
		t.Fatal("the gzip body is not the file")
	}
	if r := h.do("GET", prefix+"js/main.js", "", nil, "Accept-Encoding", "gzip;q=0"); r.header.Get("Content-Encoding") != "" {
		t.Fatal("gzip;q=0 got gzip")
	}
	for _, tag := range []string{plain.header.Get("ETag"), `W/` + plain.header.Get("ETag"), `"x", ` + plain.header.Get("ETag")} {
		if r := h.do("GET", prefix+"js/main.js", "", nil, "Accept-Encoding", "identity", "If-None-Match", tag); r.status != 304 || r.body != "" {
			t.Fatalf("If-None-Match %s: %d", tag, r.status)
		}
	}
	if r := h.do("GET", "/", "", nil, "Accept-Encoding", "identity", "If-None-Match", index.header.Get("ETag")); r.status != 304 {
		t.Fatalf("index revalidation: %d", r.status)
	}
	if r := h.do("HEAD", prefix+"app.css", "", nil, "Accept-Encoding", "identity"); r.status != 200 || r.body != "" || r.header.Get("Content-Length") == "" {
		t.Fatalf("HEAD: %d %q", r.status, r.body)
	}
}

// TestConsoleAssetsBudget keeps the embedded console under its budget and free of what
// the CSP would refuse or what would reach outside the binary.
func TestConsoleAssetsBudget(t *testing.T) {
	app := console()
	if app.size > MaxConsoleAssets {
		t.Fatalf("console assets are %d bytes, over the %d budget", app.size, MaxConsoleAssets)
	}
	t.Logf("console assets: %d bytes in %d files", app.size, len(app.files)+1)
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?https?:|fonts\.googleapis|cdn\.`)
	_ = fs.WalkDir(consoleFiles, "console", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(consoleFiles, p)
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers outside the binary: %q", p, m)
		}
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function", "document.write", `style="`, "setAttribute('style'"} {
			if bytes.Contains(b, []byte(bad)) {
				t.Errorf("%s uses %s", p, bad)
			}
		}
		return nil
	})
}

// BenchmarkConsoleAsset serves one gzip'd console file and the app's page: the work behind
// a page load once the browser has nothing cached.
func BenchmarkConsoleAsset(b *testing.B) {
	h := newHarness(b)
	handler := h.srv.ConsoleHandler()
	app := console()
	for _, path := range []string{app.prefix + "js/main.js", "/p/prj_x/alerts"} {
		b.Run(path[len(path)-7:], func(b *testing.B) {
			req := httptest.NewRequest("GET", path, nil)
			req.Header.Set("Accept-Encoding", "gzip, deflate, br")
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}
