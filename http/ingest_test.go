package http

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"lookout/ingest"
	"lookout/internal/testclock"
	"lookout/warehouse"
)

// testCA is a certificate authority for mTLS tests.
type testCA struct {
	pem  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t testing.TB, cn string) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: testclock.Start.Add(-time.Hour), NotAfter: testclock.Start.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), cert: cert, key: key}
}

// leaf issues a client certificate with a subject CN and an optional URI SAN.
func (ca *testCA) leaf(t testing.TB, cn, uri string) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: testclock.Start.Add(-time.Hour), NotAfter: testclock.Start.Add(12 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if uri != "" {
		u, _ := url.Parse(uri)
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// ingestReq is one runtime request.
type ingestReq struct {
	method, path string
	header       map[string]string
	body         string
	cert         *tls.Certificate
}

func (h *harness) runtime(rq ingestReq) *response {
	h.t.Helper()
	r, err := h.tryRuntime(rq)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// tryRuntime is runtime that returns its failure: safe from any goroutine.
func (h *harness) tryRuntime(rq ingestReq) (*response, error) {
	if rq.method == "" {
		rq.method = "POST"
	}
	if rq.path == "" {
		rq.path = "/ingest?schema=orders"
	}
	tr := h.ingestTLS.Client().Transport.(*http.Transport).Clone()
	if rq.cert != nil {
		c := *rq.cert
		tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(rq.method, h.ingestURL+rq.path, strings.NewReader(rq.body))
	if rq.body != "" {
		req.Header.Set("Content-Type", "application/x-ndjson")
	}
	for k, v := range rq.header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := &response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	if len(raw) > 0 {
		json.Unmarshal(raw, &r.env)
	}
	return r, nil
}

type runtimeWorld struct {
	*harness
	w         *world
	all       string
	f         fixtures
	project   string
	hsSecret  string
	esKey     *ecdsa.PrivateKey
	rsKey     *rsa.PrivateKey
	ca, rogue *testCA
	keys      map[string]string // name -> lk_ak_ key
	clients   map[string]string // name -> client id
}

// newRuntimeWorld makes clients with every kind of policy in one project.
func newRuntimeWorld(t *testing.T) *runtimeWorld {
	h, w, all, f := newResourceHarness(t)
	rw := &runtimeWorld{harness: h, w: w, all: all, f: f, project: w.p1.ID, hsSecret: strings.Repeat("s", 40),
		ca: newTestCA(t, "Devices CA"), rogue: newTestCA(t, "Rogue CA"), keys: map[string]string{}, clients: map[string]string{}}
	rw.esKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rw.rsKey, _ = rsa.GenerateKey(rand.Reader, 2048)
	mg := "/management/v1"
	h.created(all, mg+"/models", map[string]any{"project_id": rw.project, "key": "clicks", "fields": []map[string]any{{"name": "id", "type": "string"}}})
	caID := h.created(all, mg+"/client-cas", map[string]any{"project_id": rw.project, "name": "devices", "certificate_pem": rw.ca.pem})
	pub := func(k any) string {
		der, _ := x509.MarshalPKIXPublicKey(k)
		return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	}
	policies := map[string]map[string]any{
		"keys":    nil,
		"hs256":   {"methods": []string{"jwt"}, "jwt": map[string]any{"algorithms": []string{"HS256"}, "hs256_secret": rw.hsSecret, "issuer": "https://id.example", "audience": "lookout"}},
		"es256":   {"methods": []string{"jwt"}, "jwt": map[string]any{"algorithms": []string{"ES256"}, "public_key_pem": pub(&rw.esKey.PublicKey)}},
		"rs256":   {"methods": []string{"jwt"}, "jwt": map[string]any{"algorithms": []string{"RS256"}, "public_key_pem": pub(&rw.rsKey.PublicKey)}},
		"mtls":    {"methods": []string{"mtls"}, "mtls": map[string]any{"client_ca_ids": []string{caID}, "allowed_uris": []string{"spiffe://example.org/edge"}}},
		"both":    {"mode": "all", "methods": []string{"api_key", "mtls"}, "mtls": map[string]any{"client_ca_ids": []string{caID}, "allowed_subjects": []string{"both-device"}}},
		"cidr":    {"methods": []string{"api_key"}, "allowed_cidrs": []string{"10.0.0.0/8"}},
		"ua":      {"methods": []string{"api_key"}, "allowed_user_agents": []string{"edge-agent/"}},
		"wsonly":  {"methods": []string{"api_key"}, "transports": []string{"websocket"}},
		"jwtonly": {"methods": []string{"jwt"}, "jwt": map[string]any{"algorithms": []string{"HS256"}, "hs256_secret": rw.hsSecret}},
	}
	for name, pol := range policies {
		id := h.created(all, mg+"/ingest-clients", map[string]any{"project_id": rw.project, "name": name, "models": []string{"orders", "clicks"}})
		rw.clients[name] = id
		if pol != nil {
			if r := h.do("PUT", mg+"/ingest-clients/"+id+"/authentication", all, pol); r.status != 200 {
				t.Fatalf("policy %s: %s", name, r.body)
			}
		}
		rw.keys[name] = rw.newKey(id, "ingest", nil)
	}
	rw.keys["orders only"] = rw.newKey(rw.clients["keys"], "ingest", []string{"orders"})
	rw.keys["query"] = rw.newKey(f.query, "query", nil)
	return rw
}

func (rw *runtimeWorld) newKey(client, kind string, models []string) string {
	body := map[string]any{"project_id": rw.project, "name": "k", "kind": kind, "client_id": client}
	if models != nil {
		body["models"] = models
	}
	r := rw.do("POST", "/management/v1/runtime-api-keys", rw.all, body)
	var k struct{ Key, ID string }
	r.data(rw.t, &k)
	if k.Key == "" {
		rw.t.Fatalf("key: %s", r.body)
	}
	return k.Key
}

func (rw *runtimeWorld) jwt(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		rw.t.Fatal(err)
	}
	return s
}

// otherKey is a well-formed key that always differs from k: its first secret character
// changed (a fixed replacement of the last ones equalled the real key once in a while).
func otherKey(k string) string {
	i := len("lk_ak_")
	c := byte('A')
	if k[i] == 'A' {
		c = 'B'
	}
	return k[:i] + string(c) + k[i+1:]
}

const oneRecord = `{"id":"o-1","amount":3.5,"country":"NL","ts":"2026-11-21T12:00:00Z"}` + "\n"

func TestRuntimeAuthentication(t *testing.T) {
	rw := newRuntimeWorld(t)
	now := rw.clock.Now()
	hs := func(c jwt.MapClaims) string { return rw.jwt(jwt.SigningMethodHS256, []byte(rw.hsSecret), c) }
	valid := jwt.MapClaims{"client_id": rw.clients["hs256"], "exp": now.Add(time.Hour).Unix(), "iss": "https://id.example", "aud": "lookout"}
	with := func(base jwt.MapClaims, k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for a, b := range base {
			c[a] = b
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	revoked := rw.newKey(rw.clients["keys"], "ingest", nil)
	var rk struct{ ID string }
	list := rw.do("GET", "/management/v1/runtime-api-keys?client_id="+rw.clients["keys"]+"&project_id="+rw.project, rw.all, nil)
	var keys []struct {
		ID        string
		KeyPrefix string `json:"key_prefix"`
	}
	list.data(t, &keys)
	for _, k := range keys {
		if strings.HasPrefix(revoked, k.KeyPrefix) {
			rk.ID = k.ID
		}
	}
	rw.do("DELETE", "/management/v1/runtime-api-keys/"+rk.ID, rw.all, nil)
	exp := rw.clock.Now().Add(time.Minute)
	expiring := rw.do("POST", "/management/v1/runtime-api-keys", rw.all, map[string]any{"project_id": rw.project, "name": "e", "kind": "ingest", "client_id": rw.clients["keys"], "expires_at": exp})
	var ek struct{ Key string }
	expiring.data(t, &ek)
	disabled := rw.newKey(rw.f.ingest, "ingest", nil)
	rw.do("PUT", "/management/v1/ingest-clients/"+rw.f.ingest, rw.all, map[string]any{"enabled": false})
	rw.clock.Advance(2 * time.Minute)

	edge := rw.ca.leaf(t, "edge-device", "spiffe://example.org/edge")
	wrongURI := rw.ca.leaf(t, "edge-device", "spiffe://example.org/other")
	rogue := rw.rogue.leaf(t, "edge-device", "spiffe://example.org/edge")
	bothDev := rw.ca.leaf(t, "both-device", "")
	apikey := func(name string) map[string]string {
		return map[string]string{"Authorization": "ApiKey " + rw.keys[name]}
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	for _, tc := range []struct {
		name   string
		rq     ingestReq
		status int
		want   string
	}{
		{"no credential", ingestReq{body: oneRecord}, 401, "missing runtime credential"},
		{"cookie only", ingestReq{body: oneRecord, header: map[string]string{"Cookie": "session=" + rw.keys["keys"]}}, 401, "missing"},
		{"basic scheme", ingestReq{body: oneRecord, header: map[string]string{"Authorization": "Basic eDp5"}}, 401, "unsupported"},
		{"malformed key", ingestReq{body: oneRecord, header: map[string]string{"Authorization": "ApiKey lk_ak_short"}}, 401, "malformed"},
		{"unknown key", ingestReq{body: oneRecord, header: map[string]string{"Authorization": "ApiKey " + otherKey(rw.keys["keys"])}}, 401, "invalid runtime API key"},
		{"revoked key", ingestReq{body: oneRecord, header: map[string]string{"Authorization": "ApiKey " + revoked}}, 401, "revoked"},
		{"expired key", ingestReq{body: oneRecord, header: map[string]string{"Authorization": "ApiKey " + ek.Key}}, 401, "expired"},
		{"query key", ingestReq{body: oneRecord, header: apikey("query")}, 403, "query key"},
		{"disabled client", ingestReq{body: oneRecord, header: map[string]string{"Authorization": "ApiKey " + disabled}}, 403, "disabled"},
		{"api key", ingestReq{body: oneRecord, header: apikey("keys")}, 202, `"accepted":1`},
		{"key narrower than the model", ingestReq{path: "/ingest?schema=clicks", body: `{"id":"c"}`, header: apikey("orders only")}, 403, "clicks"},
		{"key for its model", ingestReq{path: "/ingest?schema=orders", body: oneRecord, header: apikey("orders only")}, 202, ""},
		{"model outside the client", ingestReq{path: "/ingest?schema=ghost", body: `{"id":"c"}`, header: apikey("keys")}, 403, "ghost"},
		{"api key where only jwt is allowed", ingestReq{body: oneRecord, header: apikey("jwtonly")}, 403, "api_key is not an allowed method"},
		{"hs256", ingestReq{body: oneRecord, header: bearer(hs(valid))}, 202, ""},
		{"hs256 wrong secret", ingestReq{body: oneRecord, header: bearer(rw.jwt(jwt.SigningMethodHS256, []byte(strings.Repeat("x", 40)), valid))}, 401, "invalid runtime JWT"},
		{"hs256 expired", ingestReq{body: oneRecord, header: bearer(hs(with(valid, "exp", now.Add(-time.Hour).Unix())))}, 401, "expired"},
		{"hs256 within the leeway", ingestReq{body: oneRecord, header: bearer(hs(with(valid, "exp", rw.clock.Now().Add(-30*time.Second).Unix())))}, 202, ""},
		{"hs256 without exp", ingestReq{body: oneRecord, header: bearer(hs(with(valid, "exp", nil)))}, 401, "exp"},
		{"hs256 wrong issuer", ingestReq{body: oneRecord, header: bearer(hs(with(valid, "iss", "https://evil.example")))}, 401, "issuer"},
		{"hs256 wrong audience", ingestReq{body: oneRecord, header: bearer(hs(with(valid, "aud", "other")))}, 401, "audience"},
		{"hs256 unknown client", ingestReq{body: oneRecord, header: bearer(hs(with(valid, "client_id", "ic_nope")))}, 401, "unknown client"},
		{"alg none", ingestReq{body: oneRecord, header: bearer(rw.jwt(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid))}, 401, ""},
		{"es256", ingestReq{body: oneRecord, header: bearer(rw.jwt(jwt.SigningMethodES256, rw.esKey, jwt.MapClaims{"client_id": rw.clients["es256"], "exp": now.Add(time.Hour).Unix()}))}, 202, ""},
		{"es256 signed by another key", ingestReq{body: oneRecord, header: bearer(rw.jwt(jwt.SigningMethodES256, mustEC(), jwt.MapClaims{"client_id": rw.clients["es256"], "exp": now.Add(time.Hour).Unix()}))}, 401, ""},
		{"rs256", ingestReq{body: oneRecord, header: bearer(rw.jwt(jwt.SigningMethodRS256, rw.rsKey, jwt.MapClaims{"client_id": rw.clients["rs256"], "exp": now.Add(time.Hour).Unix()}))}, 202, ""},
		{"hs256 token for an rs256 client", ingestReq{body: oneRecord, header: bearer(hs(jwt.MapClaims{"client_id": rw.clients["rs256"], "exp": now.Add(time.Hour).Unix()}))}, 401, ""},
		{"mtls", ingestReq{body: oneRecord, cert: &edge}, 202, ""},
		{"mtls wrong uri", ingestReq{body: oneRecord, cert: &wrongURI}, 401, "not trusted"},
		{"mtls rogue ca", ingestReq{body: oneRecord, cert: &rogue}, 401, "not trusted"},
		{"all: key without certificate", ingestReq{body: oneRecord, header: apikey("both")}, 401, "requires mtls"},
		{"all: key with certificate", ingestReq{body: oneRecord, header: apikey("both"), cert: &bothDev}, 202, ""},
		{"all: key with a rogue certificate", ingestReq{body: oneRecord, header: apikey("both"), cert: &rogue}, 401, "requires mtls"},
		{"cidr outside", ingestReq{body: oneRecord, header: apikey("cidr")}, 403, "address"},
		{"user agent refused", ingestReq{body: oneRecord, header: map[string]string{"Authorization": "ApiKey " + rw.keys["ua"], "User-Agent": "curl/8"}}, 403, "user agent"},
		{"user agent allowed", ingestReq{body: oneRecord, header: map[string]string{"Authorization": "ApiKey " + rw.keys["ua"], "User-Agent": "edge-agent/1.4"}}, 202, ""},
		{"transport refused", ingestReq{body: oneRecord, header: apikey("wsonly")}, 403, "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rw.runtime(tc.rq)
			if r.status != tc.status || !strings.Contains(r.body, tc.want) {
				t.Fatalf("%d %s; want %d containing %q", r.status, r.body, tc.status, tc.want)
			}
			if r.header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("no CORS header on /ingest")
			}
			if r.status == 401 && r.env.Code != "unauthenticated" || r.status == 403 && r.env.Code != "forbidden" {
				t.Errorf("code %q", r.env.Code)
			}
		})
	}
	// The CIDR policy admits loopback once it lists it.
	rw.do("PUT", "/management/v1/ingest-clients/"+rw.clients["cidr"]+"/authentication", rw.all, map[string]any{"methods": []string{"api_key"}, "allowed_cidrs": []string{"127.0.0.0/8", "::1"}})
	if r := rw.runtime(ingestReq{body: oneRecord, header: apikey("cidr")}); r.status != 202 {
		t.Fatalf("loopback allowed: %d %s", r.status, r.body)
	}
}

func mustEC() *ecdsa.PrivateKey { k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader); return k }

func TestBrowserRules(t *testing.T) {
	rw := newRuntimeWorld(t)
	r := rw.runtime(ingestReq{method: "OPTIONS", path: "/ingest", header: map[string]string{"Origin": "https://shop.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}})
	want := map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "Authorization, Content-Type", "Access-Control-Allow-Methods": "POST, OPTIONS", "Access-Control-Max-Age": "600"}
	if r.status != 204 {
		t.Fatalf("preflight %d", r.status)
	}
	for k, v := range want {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if r.header.Get("Access-Control-Allow-Credentials") != "" {
		t.Error("credentialed CORS offered")
	}
	r = rw.runtime(ingestReq{body: oneRecord, header: map[string]string{"Origin": "https://shop.example", "Authorization": "ApiKey " + rw.keys["keys"]}})
	if r.status != 202 || r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("cross-origin POST: %d %v", r.status, r.header)
	}
	// Console and Management routes send no CORS headers, and answer no preflight.
	c := rw.do("OPTIONS", "/management/v1/projects", "", nil, "Origin", "https://shop.example")
	m := rw.do("GET", "/management/v1/projects/"+rw.project, rw.all, nil, "Origin", "https://shop.example")
	for _, resp := range []*response{c, m} {
		if resp.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("CORS header outside /ingest: %v", resp.header)
		}
	}
	if c.status == 204 || c.status == 200 {
		t.Fatalf("Management preflight answered %d", c.status)
	}
}

func TestIngestBodies(t *testing.T) {
	rw := newRuntimeWorld(t)
	var mu sync.Mutex
	var committed int
	var badSpans []string
	// The hook gets, beside each record, where the watched fields' values sit in it.
	rw.ingest.WatchFields = func(projectID, model string) []string { return []string{"amount", "id", "not_a_field"} }
	rw.ingest.OnCommit = func(c ingestCommitted) {
		mu.Lock()
		defer mu.Unlock()
		committed += len(c.Records)
		if len(c.Spans) != len(c.Watched)*len(c.Records) || len(c.Watched) != 3 {
			badSpans = append(badSpans, fmt.Sprintf("%d spans for %d records of %v", len(c.Spans), len(c.Records), c.Watched))
			return
		}
		for i, rec := range c.Records {
			found := map[string]string{}
			warehouse.EachField(rec, func(k string, v []byte) bool { found[k] = string(v); return true })
			for j, name := range c.Watched {
				sp := c.Spans[i*3+j]
				if got := string(rec[sp.Start:sp.End]); got != found[name] {
					badSpans = append(badSpans, fmt.Sprintf("%s in %s: span %q", name, rec, got))
				}
			}
		}
	}
	key := map[string]string{"Authorization": "ApiKey " + rw.keys["keys"]}
	hdr := func(kv ...string) map[string]string {
		out := map[string]string{"Authorization": key["Authorization"]}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(oneRecord + oneRecord))
	zw.Close()
	long := `{"id":"` + strings.Repeat("x", 10_000_001) + `"}`
	for _, tc := range []struct {
		name   string
		rq     ingestReq
		status int
		want   []string
	}{
		{"json envelope", ingestReq{path: "/ingest", header: hdr("Content-Type", "application/json"), body: `{"schema":"orders","data":[{"id":"a"},{"id":"b","amount":1}]}`}, 202, []string{`"status":"accepted"`, `"accepted":2`, `"ingest_id":"ing_`}},
		{"json schema after data", ingestReq{path: "/ingest", header: hdr("Content-Type", "application/json"), body: `{"data":[{"id":"a"}],"schema":"orders"}`}, 202, []string{`"accepted":1`}},
		{"json partial", ingestReq{path: "/ingest", header: hdr("Content-Type", "application/json"), body: `{"schema":"orders","data":[{"id":"a"},{"id":1},{"nope":true,"id":"x"}]}`}, 202, []string{`"status":"partial"`, `"rejected":2`, `{"index":1,"field":"id","message":"must be a string"}`, `{"index":2,"field":"nope"`}},
		{"json none valid", ingestReq{path: "/ingest", header: hdr("Content-Type", "application/json"), body: `{"schema":"orders","data":[{"id":1}]}`}, 400, []string{`"code":"validation_failed"`, `"accepted":0`, `"rejected":1`, `"index":0`}},
		{"json unknown envelope field", ingestReq{path: "/ingest", header: hdr("Content-Type", "application/json"), body: `{"schema":"orders","records":[]}`}, 400, []string{"records"}},
		{"json not an object", ingestReq{path: "/ingest", header: hdr("Content-Type", "application/json"), body: `[1,2]`}, 400, []string{`"code":"invalid_json"`}},
		{"json empty data", ingestReq{path: "/ingest", header: hdr("Content-Type", "application/json"), body: `{"schema":"orders","data":[]}`}, 400, []string{"no records"}},
		{"ndjson wrapped and direct", ingestReq{path: "/ingest", header: hdr("Content-Type", "application/ndjson"), body: `{"data":{"id":"a"},"schema":"orders"}` + "\n" + `{"id":"b"}` + "\n\n" + `{"data":{"id":"c"}}`}, 202, []string{`"accepted":3`}},
		{"ndjson two schemas", ingestReq{path: "/ingest", body: `{"data":{"id":"a"},"schema":"orders"}` + "\n" + `{"data":{"id":"b"},"schema":"clicks"}`, header: hdr()}, 202, []string{`"status":"partial"`, `{"line":2,"field":"schema"`}},
		{"ndjson without schema", ingestReq{path: "/ingest", body: oneRecord, header: hdr()}, 400, []string{`"field":"schema"`}},
		{"ndjson bad line", ingestReq{body: oneRecord + "{oops\n" + oneRecord, header: hdr()}, 202, []string{`"accepted":2`, `{"line":2,"message":"invalid JSON at byte 1`}},
		{"ndjson line over 10 MB", ingestReq{body: oneRecord + long + "\n" + oneRecord, header: hdr()}, 202, []string{`"accepted":2`, `{"line":2,"message":"line exceeds the 10000000-byte limit"}`}},
		{"gzip", ingestReq{body: gz.String(), header: hdr("Content-Encoding", "gzip")}, 202, []string{`"accepted":2`}},
		{"bad gzip", ingestReq{body: "not gzip", header: hdr("Content-Encoding", "gzip")}, 400, []string{"gzip"}},
		{"other encoding", ingestReq{body: oneRecord, header: hdr("Content-Encoding", "br")}, 415, nil},
		{"other media type", ingestReq{body: oneRecord, header: hdr("Content-Type", "text/csv")}, 415, nil},
		{"unknown model", ingestReq{path: "/ingest?schema=nothing", body: oneRecord, header: hdr()}, 403, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rw.runtime(tc.rq)
			if r.status != tc.status {
				t.Fatalf("%d %.500s", r.status, r.body)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.body, w) {
					t.Errorf("body lacks %s: %.500s", w, r.body)
				}
			}
		})
	}
	// The hook saw every committed record.
	m, _ := rw.st.ModelByKey(rw.project, "orders")
	log, _ := rw.records.Log(m.WarehouseID)
	n, _ := log.Count(m.ID)
	mu.Lock()
	defer mu.Unlock()
	if n == 0 || committed != n {
		t.Fatalf("stored %d, hook saw %d", n, committed)
	}
	if len(badSpans) > 0 {
		t.Fatalf("spans disagree with the records: %v", badSpans)
	}
	// The metrics count what was accepted and rejected.
	resp, err := http.Get(rw.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsText, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metricsText), `lookout_ingest_records_total{result="accepted"}`) || !strings.Contains(string(metricsText), `lookout_ingest_records_total{result="rejected"}`) {
		t.Error("ingest record counters missing from /metrics")
	}
	// Archived models take nothing more.
	rw.do("DELETE", "/management/v1/models/"+m.ID, rw.all, nil)
	if r := rw.runtime(ingestReq{body: oneRecord, header: key}); r.status != 409 {
		t.Fatalf("archived model: %d %s", r.status, r.body)
	}
}

func TestIdempotencyAndQuotas(t *testing.T) {
	rw := newRuntimeWorld(t)
	key := map[string]string{"Authorization": "ApiKey " + rw.keys["keys"], "Idempotency-Key": "order-batch-1"}
	first := rw.runtime(ingestReq{body: oneRecord + oneRecord, header: key})
	second := rw.runtime(ingestReq{body: oneRecord + oneRecord, header: key})
	if first.status != 202 || second.status != 202 || first.body != second.body || second.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay:\n%s\n%s", first.body, second.body)
	}
	// The same key with another body is a client error, and stores nothing.
	if r := rw.runtime(ingestReq{body: oneRecord, header: key}); r.status != 422 || r.env.Code != "unprocessable" || !strings.Contains(r.env.Message, "different request") {
		t.Fatalf("reused key, other body: %d %s", r.status, r.body)
	}
	// Concurrent repeats store once: each is either the first, a replay of it, or told
	// that the first is still in flight.
	key["Idempotency-Key"] = "order-batch-2"
	var wg sync.WaitGroup
	answers := make([]*response, 6)
	errs := make([]error, len(answers))
	for i := range answers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			answers[i], errs[i] = rw.tryRuntime(ingestReq{body: oneRecord, header: key})
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var ok string
	for _, a := range answers {
		switch {
		case a.status == 202 && (ok == "" || a.body == ok):
			ok = a.body
		case a.status == 409 && strings.Contains(a.env.Message, "still being processed"):
		default:
			t.Fatalf("concurrent repeat: %d %s (first %s)", a.status, a.body, ok)
		}
	}
	m, _ := rw.st.ModelByKey(rw.project, "orders")
	log, _ := rw.records.Log(m.WarehouseID)
	if n, _ := log.Count(m.ID); n != 3 {
		t.Fatalf("stored %d records, want 3 (2 + 1)", n)
	}
	// A day later the key is fresh again.
	rw.clock.Advance(25 * time.Hour)
	key["Idempotency-Key"] = "order-batch-1"
	if r := rw.runtime(ingestReq{body: oneRecord, header: key}); r.header.Get("Idempotent-Replayed") != "" || r.body == first.body {
		t.Fatalf("expired key replayed")
	}

	// Quotas: 2 requests a minute, then 429 with Retry-After.
	rw.do("PUT", "/management/v1/ingest-clients/"+rw.clients["keys"], rw.all, map[string]any{"quota": map[string]any{"requests_per_minute": 2, "records_per_minute": 0}})
	k := map[string]string{"Authorization": "ApiKey " + rw.keys["keys"]}
	for i := 0; i < 2; i++ {
		if r := rw.runtime(ingestReq{body: oneRecord, header: k}); r.status != 202 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	r := rw.runtime(ingestReq{body: oneRecord, header: k})
	if r.status != 429 || r.header.Get("Retry-After") == "" || r.env.Code != "rate_limited" {
		t.Fatalf("third request: %d %v %s", r.status, r.header, r.body)
	}
	rw.clock.Advance(time.Minute)
	rw.do("PUT", "/management/v1/ingest-clients/"+rw.clients["keys"], rw.all, map[string]any{"quota": map[string]any{"requests_per_minute": 0, "records_per_minute": 3}})
	// A stream longer than the quota stores what the quota allows, then says where to
	// resume; after the wait the rest fits.
	if r := rw.runtime(ingestReq{body: oneRecord + oneRecord + oneRecord + oneRecord, header: k}); r.status != 429 || !strings.Contains(r.body, `"accepted":3`) || !strings.Contains(r.body, `"resume_line":4`) || r.header.Get("Retry-After") == "" {
		t.Fatalf("records over quota: %d %s", r.status, r.body)
	}
	rw.clock.Advance(time.Minute)
	if r := rw.runtime(ingestReq{body: oneRecord + oneRecord, header: k}); r.status != 202 {
		t.Fatalf("records within quota: %d %s", r.status, r.body)
	}
	// An all-or-nothing request larger than the quota can never fit: 413 naming it.
	rw.clock.Advance(time.Minute)
	k["Idempotency-Key"] = "too-big-for-the-quota"
	if r := rw.runtime(ingestReq{body: oneRecord + oneRecord + oneRecord + oneRecord, header: k}); r.status != 413 || !strings.Contains(r.env.Message, "records_per_minute quota is 3") || r.header.Get("Retry-After") != "" {
		t.Fatalf("idempotent request over the quota: %d %s", r.status, r.body)
	}
}

func TestWebSocketIngest(t *testing.T) {
	rw := newRuntimeWorld(t)
	u := "wss" + strings.TrimPrefix(rw.ingestURL, "https") + "/ws/ingest"
	dial := func(key string) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPClient: rw.ingestTLS.Client(), HTTPHeader: http.Header{"Authorization": {"ApiKey " + key}}})
	}
	if _, resp, err := dial(rw.keys["keys"][:20] + strings.Repeat("A", 29)); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("bad key handshake: %v %v", err, resp)
	}
	conn, _, err := dial(rw.keys["keys"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exchange := func(typ websocket.MessageType, msg string) map[string]any {
		if err := conn.Write(ctx, typ, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, b, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		json.Unmarshal(b, &out)
		return out
	}
	if r := exchange(websocket.MessageText, `{"id":"m1","schema":"orders","data":[{"id":"a"},{"id":2}]}`); r["type"] != "ack" || r["id"] != "m1" || r["accepted"] != 1.0 || r["rejected"] != 1.0 {
		t.Fatalf("ack: %v", r)
	}
	if r := exchange(websocket.MessageText, `{"id":7,"schema":"orders","data":[{"id":1}]}`); r["type"] != "error" || r["id"] != 7.0 {
		t.Fatalf("none valid: %v", r)
	}
	if r := exchange(websocket.MessageText, `not json`); r["type"] != "error" {
		t.Fatalf("bad json: %v", r)
	}
	if r := exchange(websocket.MessageBinary, `{"schema":"orders","data":[{"id":"b"}]}`); r["type"] != "error" {
		t.Fatalf("binary: %v", r)
	}
	if r := exchange(websocket.MessageText, `{"id":"m2","schema":"orders","data":[{"id":"b"}]}`); r["type"] != "ack" {
		t.Fatalf("socket did not stay open: %v", r)
	}
	// Revoking the key closes the socket at the next message.
	list := rw.do("GET", "/management/v1/runtime-api-keys?client_id="+rw.clients["keys"]+"&project_id="+rw.project, rw.all, nil)
	var keys []struct{ ID string }
	list.data(t, &keys)
	for _, k := range keys {
		rw.do("DELETE", "/management/v1/runtime-api-keys/"+k.ID, rw.all, nil)
	}
	conn.Write(ctx, websocket.MessageText, []byte(`{"schema":"orders","data":[{"id":"c"}]}`))
	if _, _, err := conn.Read(ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("after revocation: %v", err)
	}
	m, _ := rw.st.ModelByKey(rw.project, "orders")
	log, _ := rw.records.Log(m.WarehouseID)
	if n, _ := log.Count(m.ID); n != 2 {
		t.Fatalf("stored %d, want 2", n)
	}
}

type ingestCommitted = ingest.Committed

func TestIdempotencyKeysArePruned(t *testing.T) {
	rw := newRuntimeWorld(t)
	key := map[string]string{"Authorization": "ApiKey " + rw.keys["keys"], "Idempotency-Key": "k1"}
	first := rw.runtime(ingestReq{body: oneRecord, header: key})
	rw.clock.Advance(25 * time.Hour)
	if err := rw.ingest.PruneIdempotency(); err != nil {
		t.Fatal(err)
	}
	m, _ := rw.st.ModelByKey(rw.project, "orders")
	log, _ := rw.records.Log(m.WarehouseID)
	if n, _ := log.PruneIdempotency(rw.clock.Now(), 10); n != 0 {
		t.Fatalf("%d expired keys left after pruning", n)
	}
	if r := rw.runtime(ingestReq{body: oneRecord, header: key}); r.body == first.body {
		t.Fatal("a pruned key replayed")
	}
}

func TestIdempotentRequestsAreBounded(t *testing.T) {
	rw := newRuntimeWorld(t)
	line := `{"id":"` + strings.Repeat("x", 1<<20) + `"}` + "\n"
	body := strings.Repeat(line, 65) // over 64 MiB of records
	r := rw.runtime(ingestReq{body: body, header: map[string]string{"Authorization": "ApiKey " + rw.keys["keys"], "Idempotency-Key": "big"}})
	if r.status != 413 || !strings.Contains(r.env.Message, "Idempotency-Key") {
		t.Fatalf("%d %.300s", r.status, r.body)
	}
	m, _ := rw.st.ModelByKey(rw.project, "orders")
	log, _ := rw.records.Log(m.WarehouseID)
	if n, _ := log.Count(m.ID); n != 0 {
		t.Fatalf("a refused idempotent request stored %d records", n)
	}
}

func TestAdminBackupOfUnknownWarehouseCreatesNothing(t *testing.T) {
	rw := newRuntimeWorld(t)
	ts := httptest.NewServer(rw.srv.AdminHandler())
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/v1/backup/warehouses/wh_nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ids, _ := rw.records.Files(); slices.Contains(ids, "wh_nope") {
		t.Fatal("asking for a backup created the warehouse file")
	}
	// A real one streams with its exact length.
	rw.runtime(ingestReq{body: oneRecord, header: map[string]string{"Authorization": "ApiKey " + rw.keys["keys"]}})
	ids, _ := rw.records.Files()
	resp, err = http.Get(ts.URL + "/v1/backup/warehouses/" + ids[0])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || int64(len(b)) != resp.ContentLength || len(b) == 0 {
		t.Fatalf("copy: %d, %d bytes of %d", resp.StatusCode, len(b), resp.ContentLength)
	}
}
