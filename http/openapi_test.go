package http

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestIngestOpenAPI validates each ingest client's OpenAPI document with a real OpenAPI
// library, then checks that its model schemas accept what ingest accepts and refuse what
// ingest refuses.
func TestIngestOpenAPI(t *testing.T) {
	rw := newRuntimeWorld(t)
	owner := bearer(rw.w.ownerSes)
	url := "/api/v1/ingest-clients/" + rw.clients["keys"] + "/openapi.json"
	if r := rw.do("GET", url, bearer(rw.w.strangerSes), nil); r.status != 404 {
		t.Fatalf("stranger: %d", r.status)
	}
	if r := rw.do("GET", "/management/v1/ingest-clients/"+rw.clients["keys"]+"/openapi.json", rw.all, nil); r.status != 404 {
		t.Fatalf("OpenAPI is not a Management route: %d", r.status)
	}
	r := rw.do("GET", url, owner, nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	doc, err := openapi3.NewLoader().LoadFromData([]byte(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("invalid OpenAPI document: %v", err)
	}
	if doc.Paths.Find("/ingest") == nil || doc.Servers[0].URL != rw.ingestURL {
		t.Fatalf("paths or servers wrong: %v", doc.Servers)
	}
	orders := doc.Components.Schemas["orders"]
	if orders == nil || doc.Components.Schemas["clicks"] == nil {
		t.Fatalf("schemas: %v", doc.Components.Schemas)
	}
	for _, tc := range []struct {
		rec   string
		valid bool
	}{
		{`{"id":"o-1","amount":3.5,"country":"NL","ts":"2026-11-21T12:00:00Z"}`, true},
		{`{"id":"o-1","ts":1767323045000,"amount":null}`, true},
		{`{"amount":3}`, false},
		{`{"id":1}`, false},
		{`{"id":"o","ts":"yesterday"}`, false},
		{`{"id":"o","extra":1}`, false},
	} {
		var v map[string]any
		json.Unmarshal([]byte(tc.rec), &v)
		err := orders.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.EnableFormatValidation())
		if (err == nil) != tc.valid {
			t.Errorf("%s: schema says %v, ingest says valid=%v", tc.rec, err, tc.valid)
		}
		ing := rw.runtime(ingestReq{body: tc.rec, header: map[string]string{"Authorization": "ApiKey " + rw.keys["keys"]}})
		if (ing.status == 202) != tc.valid {
			t.Errorf("%s: ingest answered %d", tc.rec, ing.status)
		}
	}
	if !strings.Contains(r.body, `"Idempotency-Key"`) {
		t.Error("Idempotency-Key header not described")
	}
}
