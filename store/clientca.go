package store

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// ClientCA is a certificate authority whose certificates mTLS runtime clients present.
type ClientCA struct {
	Meta
	Name              string    `json:"name"`
	CertificatePEM    string    `json:"certificate_pem"`
	FingerprintSHA256 string    `json:"fingerprint_sha256"`
	Subject           string    `json:"subject"`
	NotAfter          time.Time `json:"not_after"`
}

// ClientCAInput is a Client CA's writable fields.
type ClientCAInput struct {
	ProjectID      *string `json:"project_id"`
	Name           *string `json:"name"`
	CertificatePEM *string `json:"certificate_pem"`
}

// ParseCACertificate parses one PEM certificate and checks it can act as a CA now.
// Returns validation_failed naming certificate_pem.
func ParseCACertificate(pemText string, now time.Time) (*x509.Certificate, error) {
	bad := func(msg string) error {
		return Invalid(FieldError{Field: "certificate_pem", Message: msg})
	}
	block, rest := pem.Decode([]byte(pemText))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, bad("must be one PEM CERTIFICATE block")
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, bad("must hold exactly one certificate; add each CA separately")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, bad("is not a parseable X.509 certificate")
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, bad("is not a CA certificate (basic constraints CA:TRUE)")
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, bad("may not sign certificates (key usage lacks certSign)")
	}
	if !now.Before(cert.NotAfter) {
		return nil, bad("has expired")
	}
	if now.Before(cert.NotBefore) {
		return nil, bad("is not valid yet")
	}
	return cert, nil
}

// CreateClientCA stores a CA certificate after checking it. Returns validation_failed,
// not_found.
func (s *Store) CreateClientCA(projectID string, in ClientCAInput) (ClientCA, error) {
	var ca ClientCA
	var f fieldErrors
	name := ""
	if in.Name != nil {
		name = strings.TrimSpace(*in.Name)
	}
	if n := utf8.RuneCountInString(name); n == 0 || n > 200 {
		f.add("name", "must be 1 to 200 characters")
	}
	f.name("name", name)
	if in.CertificatePEM == nil {
		f.add("certificate_pem", "is required")
	}
	if err := f.err(); err != nil {
		return ca, err
	}
	cert, err := ParseCACertificate(*in.CertificatePEM, s.Now())
	if err != nil {
		return ca, err
	}
	sum := sha256.Sum256(cert.Raw)
	ca = ClientCA{
		Meta: Meta{ProjectID: projectID}, Name: name,
		CertificatePEM:    string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})),
		FingerprintSHA256: hex.EncodeToString(sum[:]), Subject: cert.Subject.String(),
		NotAfter: cert.NotAfter.UTC(),
	}
	err = s.updateRuntime(func(tx *bolt.Tx) error {
		return s.insertRes(tx, KindClientCA, &ca, s.now())
	})
	return ca, err
}

// ClientCA returns one Client CA. Returns not_found.
func (s *Store) ClientCA(projectID, id string) (ClientCA, error) {
	return readOne[ClientCA](s, KindClientCA, projectID, id)
}

// ListClientCAs lists a project's Client CAs.
func (s *Store) ListClientCAs(projectID string, page Page) ([]ClientCA, string, error) {
	var out []ClientCA
	var next string
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, next, err = listRes[ClientCA](tx, KindClientCA, projectID, page, nil)
		return err
	})
	return out, next, err
}

// DeleteClientCA deletes a Client CA that no ingest or query client references.
// Returns not_found, conflict (naming a referencing client).
func (s *Store) DeleteClientCA(projectID, id string) error {
	return s.updateRuntime(func(tx *bolt.Tx) error {
		ca, err := getInProject[ClientCA](tx, KindClientCA, projectID, id)
		if err != nil {
			return err
		}
		for _, k := range []Kind{KindIngest, KindQuery} {
			err := eachRes[clientRecord](tx, k, projectID, func(c *clientRecord) error {
				if c.Authentication.MTLS != nil && contains(c.Authentication.MTLS.ClientCAIDs, id) {
					return Errorf(CodeConflict, "the Client CA is used by %s %s (%s); remove it from that client's authentication first", k.Name, c.ID, c.Name)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return deleteRes(tx, KindClientCA, &ca)
	})
}
