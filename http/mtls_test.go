package http

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"lookout/internal/testclock"
)

// issue makes a certificate signed by ca: a CA (intermediate) when uris is nil and isCA,
// else a client certificate with those URI SANs.
func (ca *testCA) issue(t testing.TB, cn string, isCA bool, uris ...string) (*testCA, tls.Certificate) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: testclock.Start.Add(-time.Hour), NotAfter: testclock.Start.Add(12 * time.Hour)}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	} else {
		tmpl.KeyUsage, tmpl.ExtKeyUsage = x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, u := range uris {
		pu, _ := url.Parse(u)
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), cert: cert, key: key},
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestCertificateOnlyMTLS: a certificate presented alone must name exactly one client, and
// another tenant cannot break (or take) a project's certificate-only clients by uploading
// the same CA. Configuration refuses what would be ambiguous, with 409; the steps run in
// order on one server, each reading what the earlier ones set up.
func TestCertificateOnlyMTLS(t *testing.T) {
	h, w, all, _ := newResourceHarness(t)
	p1, p2 := w.p1.ID, w.p2.ID
	mg := "/management/v1"
	h.created(all, mg+"/models", map[string]any{"project_id": p2, "key": "orders", "fields": []map[string]any{{"name": "id", "type": "string"}}})
	shared := newTestCA(t, "Shared CA")
	inter, _ := shared.issue(t, "Shared Intermediate", true)
	_, certA := shared.issue(t, "device-a", false, "spiffe://x/a")
	_, certB := shared.issue(t, "device-b", false, "spiffe://x/b")
	_, certAB := shared.issue(t, "device-ab", false, "spiffe://x/a", "spiffe://x/b")
	ca1 := h.created(all, mg+"/client-cas", map[string]any{"project_id": p1, "name": "shared", "certificate_pem": shared.pem})
	ca1again := h.created(all, mg+"/client-cas", map[string]any{"project_id": p1, "name": "shared again", "certificate_pem": shared.pem})
	ca2 := h.created(all, mg+"/client-cas", map[string]any{"project_id": p2, "name": "the same CA", "certificate_pem": shared.pem})
	ca2inter := h.created(all, mg+"/client-cas", map[string]any{"project_id": p2, "name": "its intermediate", "certificate_pem": inter.pem})
	client := func(project, name string) string {
		return h.created(all, mg+"/ingest-clients", map[string]any{"project_id": project, "name": name, "models": []string{"orders"}})
	}
	a, b, foreign := client(p1, "a"), client(p1, "b"), client(p2, "foreign")
	certOnly := func(ca string, uris ...string) map[string]any {
		return map[string]any{"methods": []string{"mtls"}, "mtls": map[string]any{"client_ca_ids": []string{ca}, "allowed_uris": uris}}
	}
	setAuth := func(id string, pol map[string]any) *response {
		return h.do("PUT", mg+"/ingest-clients/"+id+"/authentication", all, pol)
	}
	if r := setAuth(a, certOnly(ca1, "spiffe://x/a")); r.status != 200 {
		t.Fatalf("client a: %s", r.body)
	}
	send := func(cert tls.Certificate) *response { return h.runtime(ingestReq{body: `{"id":"1"}`, cert: &cert}) }

	for _, st := range []struct {
		name   string
		client string
		policy map[string]any
		status int
		want   string
	}{
		{"another project, the same CA", foreign, certOnly(ca2), 409, "another project"},
		{"another project, an intermediate of the CA", foreign, certOnly(ca2inter), 409, "another project"},
		{"another project, the same CA with a second method required", foreign, map[string]any{"mode": "all", "methods": []string{"api_key", "mtls"}, "mtls": map[string]any{"client_ca_ids": []string{ca2}}}, 200, ""},
		{"same project, no allowlist", b, certOnly(ca1), 409, a},
		{"same project, the same URI", b, certOnly(ca1, "spiffe://x/a"), 409, a},
		{"same project, the same CA uploaded twice", b, certOnly(ca1again, "spiffe://x/a", "spiffe://x/c"), 409, a},
		{"same project, mode any with a key as well", b, map[string]any{"methods": []string{"api_key", "mtls"}, "mtls": map[string]any{"client_ca_ids": []string{ca1}}}, 409, a},
		{"same project, disjoint URIs", b, certOnly(ca1again, "spiffe://x/b"), 200, ""},
	} {
		r := setAuth(st.client, st.policy)
		if r.status != st.status || !strings.Contains(r.body, st.want) {
			t.Fatalf("%s: %d %s; want %d containing %q", st.name, r.status, r.body, st.status, st.want)
		}
		if r.status == 409 && (r.env.Code != "conflict" || strings.Contains(r.body, foreign) && st.client != foreign) {
			t.Fatalf("%s: %s", st.name, r.body)
		}
	}

	for _, st := range []struct {
		name   string
		cert   tls.Certificate
		status int
		want   string
	}{
		{"a's certificate reaches a", certA, 202, ""},
		{"b's certificate reaches b", certB, 202, ""},
		{"a certificate with both URIs is refused, not guessed", certAB, 401, "several clients"},
	} {
		if r := send(st.cert); r.status != st.status || !strings.Contains(r.body, st.want) {
			t.Fatalf("%s: %d %s", st.name, r.status, r.body)
		}
	}
	// Which client a certificate reached shows once b is disabled: only b's answer changes,
	// on the very next request.
	h.do("PUT", mg+"/ingest-clients/"+b, all, map[string]any{"enabled": false})
	if r := send(certB); r.status != 403 || !strings.Contains(r.body, "disabled") {
		t.Fatalf("b disabled: %d %s", r.status, r.body)
	}
	if r := send(certA); r.status != 202 {
		t.Fatalf("a after b was disabled: %d %s", r.status, r.body)
	}
	// Narrowing a's allowlist is seen at once too.
	setAuth(a, certOnly(ca1, "spiffe://x/z"))
	if r := send(certA); r.status != 401 || !strings.Contains(r.body, "not trusted") {
		t.Fatalf("a narrowed: %d %s", r.status, r.body)
	}
}
