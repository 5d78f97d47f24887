package http

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsNeverLeak seeds canary values into every secret-bearing field — a warehouse
// credential's secret, a client's HS256 JWT secret, a runtime API key — and then checks
// that no API response (other than the one that hands a runtime key out), no log line, no
// error message and no byte of the data directory holds any of them.
func TestSecretsNeverLeak(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	p := w.p1.ID
	mg := "/management/v1"
	credCanary := "CANARY-credential-5f1e9a7c3b"
	jwtCanary := "CANARY-jwt-hs256-0d9c8b7a6f5e4d3c2b1a"
	var bodies []string
	record := func(r *response) *response { bodies = append(bodies, r.body); return r }

	cred := h.created(all, mg+"/warehouse-credentials", map[string]any{"project_id": p, "name": "canary", "type": "token", "secret": credCanary})
	record(h.do("PUT", mg+"/warehouse-credentials/"+cred, all, map[string]any{"secret": credCanary + "-rotated"}))
	record(h.do("PUT", mg+"/ingest-clients/"+f.ingest+"/authentication", all, map[string]any{
		"methods": []string{"jwt"}, "jwt": map[string]any{"algorithms": []string{"HS256"}, "hs256_secret": jwtCanary}}))
	r := h.do("POST", mg+"/runtime-api-keys", all, map[string]any{"project_id": p, "name": "canary", "kind": "ingest", "client_id": f.ingest})
	var created struct{ ID, Key string }
	r.data(t, &created)
	keyCanary := created.Key
	if keyCanary == "" {
		t.Fatal("no runtime key")
	}
	canaries := []string{credCanary, jwtCanary, keyCanary}

	// Bad inputs that carry the secrets must not echo them in their errors.
	for _, req := range []struct {
		method, url string
		body        any
	}{
		{"PUT", mg + "/ingest-clients/" + f.ingest + "/authentication", map[string]any{"methods": []string{"api_key"}, "jwt": map[string]any{"algorithms": []string{"RS256"}, "hs256_secret": jwtCanary}}},
		{"PUT", mg + "/ingest-clients/" + f.ingest + "/authentication", map[string]any{"methods": []string{"jwt"}, "jwt": map[string]any{"algorithms": []string{"HS256"}, "hs256_secret": jwtCanary[:20]}}},
		{"POST", mg + "/warehouse-credentials", map[string]any{"project_id": p, "name": "", "type": "token", "secret": credCanary}},
		{"POST", mg + "/warehouse-credentials", map[string]any{"project_id": p, "name": "x", "type": "token", "secret": strings.Repeat(credCanary, 200)}},
		{"POST", mg + "/warehouse-credentials", `{"project_id":"` + p + `","secret":"` + credCanary + `","name":1}`},
		{"GET", mg + "/runtime-api-keys/" + keyCanary, nil},
	} {
		if rr := record(h.do(req.method, req.url, all, req.body)); rr.status < 400 {
			t.Fatalf("%s %s: %d", req.method, req.url, rr.status)
		}
	}
	record(h.do("GET", mg+"/projects/"+p+"?key="+keyCanary, all, nil))
	record(h.do("GET", mg+"/no-such-route/"+keyCanary, all, nil))
	// A runtime key used where a Management Token belongs.
	record(h.do("GET", mg+"/projects/"+p, "Bearer "+keyCanary, nil))
	record(h.do("GET", mg+"/projects/"+p, "ApiKey "+keyCanary, nil))

	// Every read of every resource.
	for _, path := range []string{
		"/warehouse-credentials?project_id=" + p, "/warehouse-credentials/" + cred,
		"/ingest-clients?project_id=" + p, "/ingest-clients/" + f.ingest,
		"/query-clients?project_id=" + p, "/query-clients/" + f.query,
		"/runtime-api-keys?project_id=" + p, "/runtime-api-keys/" + created.ID,
		"/warehouses?project_id=" + p, "/warehouses/" + f.warehouse, "/models?project_id=" + p,
		"/analytics-apis?project_id=" + p, "/analytics-bindings?project_id=" + p, "/client-cas?project_id=" + p,
	} {
		for _, root := range []string{mg, "/api/v1"} {
			authz := all
			if root == "/api/v1" {
				authz = bearer(w.ownerSes)
			}
			if rr := record(h.do("GET", root+path, authz, nil)); rr.status != 200 {
				t.Fatalf("GET %s%s: %d %s", root, path, rr.status, rr.body)
			}
		}
	}
	if err := h.auth.FlushUsage(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.logs.String(), "request") {
		t.Fatal("no request logs: the log check would prove nothing")
	}
	var files [][]byte
	filepath.WalkDir(h.dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			files = append(files, b)
		}
		return nil
	})
	if len(files) == 0 || len(files[0]) == 0 {
		t.Fatal("no data files read")
	}
	for _, c := range canaries {
		for _, b := range bodies {
			if strings.Contains(b, c) || strings.Contains(b, c[:16]) {
				t.Errorf("a response holds canary %.12s…: %.300s", c, b)
			}
		}
		if strings.Contains(h.logs.String(), c[:16]) {
			t.Errorf("the log holds canary %.12s…", c)
		}
		for _, b := range files {
			if bytes.Contains(b, []byte(c[:16])) {
				t.Errorf("the data directory holds canary %.12s… in plaintext", c)
			}
		}
	}
}
