package http

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"lookout/auth"
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

// BenchmarkIngestOneRecord is the per-request cost of small ingest (the harness's
// "small" step: one record per POST): runtime authentication, the model, decoding,
// validation, the group commit and its fsync, the envelope. Run it with -cpuprofile to
// see where a request goes; the commit wait dominates unless many requests run at once
// (-cpu or SetParallelism), which is how they share an fsync.
func BenchmarkIngestOneRecord(b *testing.B) {
	h := newHarness(b)
	h.srv.log = discardLogger()
	w := h.world()
	all := h.token(w, auth.AllScopes())
	mg := "/management/v1"
	h.created(all, mg+"/models", map[string]any{"project_id": w.p1.ID, "key": "events",
		"fields": []map[string]any{{"name": "id", "type": "string"}, {"name": "n", "type": "integer"}, {"name": "ts", "type": "timestamp"}}, "timestamp_field": "ts"})
	client := h.created(all, mg+"/ingest-clients", map[string]any{"project_id": w.p1.ID, "name": "bench", "models": []string{"events"}})
	var k struct{ Key string }
	h.do("POST", mg+"/runtime-api-keys", all, map[string]any{"project_id": w.p1.ID, "name": "k", "kind": "ingest", "client_id": client}).data(b, &k)
	handler := h.srv.IngestHandler()
	body := []byte(`{"id":"e-1","n":42,"ts":"2026-11-21T12:00:00.000Z"}` + "\n")
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", "/ingest?schema=events", bytes.NewReader(body))
			req.Header.Set("Authorization", "ApiKey "+k.Key)
			req.Header.Set("Content-Type", "application/x-ndjson")
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			if rec.Code != 202 {
				b.Errorf("status %d: %s", rec.Code, rec.Body) // not Fatal: this is not the benchmark's goroutine
				return
			}
		}
	})
}
