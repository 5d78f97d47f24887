package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeCert makes a self-signed certificate for 127.0.0.1 and returns the PEM file paths
// and a pool that trusts it.
func writeCert(t *testing.T, dir, name string) (certFile, keyFile string, pool *x509.CertPool, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	os.WriteFile(certFile, certPEM, 0o600)
	os.WriteFile(keyFile, keyPEM, 0o600)
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	cert, _ = tls.X509KeyPair(certPEM, keyPEM)
	return
}

func TestTLSListeners(t *testing.T) {
	dir := t.TempDir()
	cert, key, pool, _ := writeCert(t, dir, "server")
	_, _, _, clientCert := writeCert(t, dir, "client")
	p := startServe(t, append(freeArgs(filepath.Join(dir, "data")),
		"--tls-cert", cert, "--tls-key", key, "--ingest-tls-cert", cert, "--ingest-tls-key", key)...)
	if p.base[:8] != "https://" {
		t.Fatalf("console URL %q is not https", p.base)
	}
	var requested bool
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			requested = true
			return &clientCert, nil
		},
	}}}
	resp, err := c.Get(p.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if requested {
		t.Fatal("the console listener asked for a client certificate")
	}
	ingest := listenerURL(t, p, "ingest")
	resp, err = c.Get(ingest + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !requested {
		t.Fatal("the ingest listener did not request a client certificate")
	}
	// Requested, not required: a client without one still gets in.
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp, err = plain.Get(ingest + "/healthz"); err != nil {
		t.Fatalf("client without a certificate refused: %v", err)
	}
	resp.Body.Close()
}
