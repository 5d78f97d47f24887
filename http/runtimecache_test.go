package http

import (
	"strings"
	"testing"
)

// TestIngestSeesConfigurationAtOnce: ingest keeps models, validators and warehouses in
// memory by the store's runtime generation, and runtime authentication keeps keys and
// clients the same way; each configuration write must count from the very next request,
// which follows one that filled the caches.
func TestIngestSeesConfigurationAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *harness, all string, f fixtures) *response
		body   string
		status int
		want   string
	}{
		{"a field added to the model validates the next record", func(h *harness, all string, f fixtures) *response {
			return h.do("PUT", "/management/v1/models/"+f.model, all, map[string]any{"fields": []map[string]any{
				{"name": "id", "type": "string", "required": true}, {"name": "amount", "type": "number"}, {"name": "country", "type": "string"},
				{"name": "ts", "type": "timestamp"}, {"name": "qty", "type": "integer"}}})
		}, `{"id":"o-2","qty":"many"}` + "\n", 400, "must be an integer"},
		{"an archived model takes no more records", func(h *harness, all string, f fixtures) *response {
			return h.do("DELETE", "/management/v1/models/"+f.model, all, nil)
		}, oneRecord, 409, "archived"},
		{"a revoked key", func(h *harness, all string, f fixtures) *response {
			return h.do("DELETE", "/management/v1/runtime-api-keys/"+f.key, all, nil)
		}, oneRecord, 401, "revoked"},
		{"a client narrowed to no models", func(h *harness, all string, f fixtures) *response {
			return h.do("PUT", "/management/v1/ingest-clients/"+f.ingest, all, map[string]any{"models": []string{}})
		}, oneRecord, 403, "orders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, w, all, f := newResourceHarness(t)
			var k struct{ Key, ID string }
			h.do("POST", "/management/v1/runtime-api-keys", all, map[string]any{"project_id": w.p1.ID, "name": "k", "kind": "ingest", "client_id": f.ingest}).data(t, &k)
			f.key = k.ID // the key this test sends
			send := func(body string) *response {
				return h.runtime(ingestReq{body: body, header: map[string]string{"Authorization": "ApiKey " + k.Key}})
			}
			if r := send(oneRecord); r.status != 202 {
				t.Fatalf("before: %d %s", r.status, r.body)
			}
			if r := tc.change(h, all, f); r.status >= 300 {
				t.Fatalf("change: %d %s", r.status, r.body)
			}
			if r := send(tc.body); r.status != tc.status || !strings.Contains(r.body, tc.want) {
				t.Fatalf("after: %d %s; want %d containing %q", r.status, r.body, tc.status, tc.want)
			}
		})
	}
}
