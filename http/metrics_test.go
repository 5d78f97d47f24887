package http

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

// TestMetricsSeriesBounded sends requests with random methods and paths to every kind of
// route and checks the request series stay few: a method or path the server does not know
// must not mint a new series (issue 7, item 9).
func TestMetricsSeriesBounded(t *testing.T) {
	h := newHarness(t)
	rnd := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		b := make([]byte, 8)
		for i := range b {
			b[i] = letters[rnd.IntN(len(letters))]
		}
		return string(b)
	}
	for i := 0; i < 100; i++ {
		for _, path := range []string{"/healthz", "/api/v1/projects", "/" + word(), "/api/v1/projects/" + word()} {
			req, err := http.NewRequest(word(), h.url+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	fams, err := h.srv.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, f := range fams {
		if f.GetName() != "lookout_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			series++
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && l.GetValue() != "other" && !knownMethods[l.GetValue()] {
					t.Errorf("method label %q is neither a known method nor other", l.GetValue())
				}
			}
		}
	}
	// Four route patterns (the two matched ones and "unmatched"), one method label, a few
	// statuses: anything near 400 means every random request made its own series.
	if series == 0 || series > 10 {
		t.Fatalf("%d request series after 400 random requests; want a handful", series)
	}
}

// TestMetricsToken: with --metrics-token, /metrics answers only a matching Bearer token,
// with the 401 envelope otherwise, and never logs the token (issue 7, item 15).
func TestMetricsToken(t *testing.T) {
	const token = "metrics-secret-0123456789"
	h := newHarnessWith(t, func(c *Config) { c.MetricsToken = token })
	for _, tc := range []struct {
		name, authz string
		status      int
	}{
		{"no header", "", 401},
		{"wrong token", "Bearer metrics-secret-0123456788", 401},
		{"prefix of the token", "Bearer metrics-secret", 401},
		{"token with another scheme", "Basic " + token, 401},
		{"empty bearer", "Bearer ", 401},
		{"the token", "Bearer " + token, 200},
		{"the token, scheme in lower case", "bearer " + token, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("GET", "/metrics", tc.authz, nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.status == 401 {
				r.checkEnvelope(t)
				if r.env.Code != "unauthenticated" || strings.Contains(r.body, "lookout_") {
					t.Fatalf("body %s", r.body)
				}
				return
			}
			if !strings.Contains(r.body, "lookout_store_size_bytes") {
				t.Fatalf("no metrics in %q", r.body)
			}
		})
	}
	if strings.Contains(h.logs.String(), token) {
		t.Fatal("the metrics token reached the log")
	}
	// Without a token /metrics stays open, as before.
	if r := newHarness(t).do("GET", "/metrics", "", nil); r.status != 200 {
		t.Fatalf("open /metrics answered %d", r.status)
	}
}
