package http

import (
	"math/rand/v2"
	"net/http"
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
