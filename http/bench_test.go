package http

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkManagementGetProject is the Management API hot path without the network:
// token authentication, scope and allowlist checks, the project read and the envelope.
func BenchmarkManagementGetProject(b *testing.B) {
	h := newHarness(b)
	h.logs.Reset()
	h.srv.log = discardLogger()
	w := h.world()
	handler := h.srv.ConsoleHandler()
	req, _ := http.NewRequest("GET", "/management/v1/projects/"+w.p1.ID, nil)
	req.Header.Set("Authorization", bearer(w.tokens["allowed"]))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			if rec.Code != 200 {
				b.Fatalf("status %d", rec.Code)
			}
		}
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
