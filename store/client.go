package store

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Runtime client kinds.
const (
	ClientIngest = "ingest"
	ClientQuery  = "query"
)

// Quota bounds what one runtime client may send; 0 means unlimited.
type Quota struct {
	RequestsPerMinute int `json:"requests_per_minute"`
	RecordsPerMinute  int `json:"records_per_minute"`
}

// JWTConfig is how a client's runtime JWTs are verified. The HS256 secret is write-only:
// reads say only whether one is set.
type JWTConfig struct {
	Algorithms     []string `json:"algorithms"`
	HS256SecretSet bool     `json:"hs256_secret_set"`
	PublicKeyPEM   string   `json:"public_key_pem,omitempty"`
	Issuer         string   `json:"issuer,omitempty"`
	Audience       string   `json:"audience,omitempty"`
}

// MTLSConfig is which client certificates a client accepts.
type MTLSConfig struct {
	ClientCAIDs     []string `json:"client_ca_ids"`
	AllowedURIs     []string `json:"allowed_uris"`
	AllowedSubjects []string `json:"allowed_subjects"`
}

// ClientAuthentication is a runtime client's authentication policy (CONTRACTS §3, §4).
type ClientAuthentication struct {
	Mode              string      `json:"mode"`
	Methods           []string    `json:"methods"`
	JWT               *JWTConfig  `json:"jwt,omitempty"`
	MTLS              *MTLSConfig `json:"mtls,omitempty"`
	AllowedCIDRs      []string    `json:"allowed_cidrs"`
	AllowedUserAgents []string    `json:"allowed_user_agents"`
	Transports        []string    `json:"transports"`
}

// Authentication modes, methods and transports.
const (
	ModeAny         = "any"
	ModeAll         = "all"
	MethodAPIKey    = "api_key"
	MethodJWT       = "jwt"
	MethodMTLS      = "mtls"
	TransportHTTP   = "http"
	TransportWS     = "websocket"
	AlgorithmHS256  = "HS256"
	AlgorithmRS256  = "RS256"
	AlgorithmES256  = "ES256"
	minHS256KeySize = 32
)

// DefaultAuthentication is a new client's policy: its runtime API keys, over any transport.
func DefaultAuthentication() ClientAuthentication {
	return ClientAuthentication{Mode: ModeAny, Methods: []string{MethodAPIKey}, AllowedCIDRs: []string{},
		AllowedUserAgents: []string{}, Transports: []string{TransportHTTP, TransportWS}}
}

// QueryOptions are the settings only query clients have.
type QueryOptions struct {
	AnalyticsAPIs   []string `json:"analytics_apis"`
	AdhocModels     []string `json:"adhoc_models"`
	RequiredFilters []Filter `json:"required_filters"`
}

// Client is an ingest or query client: who may send records or run queries, and how it
// proves it. Query clients carry QueryOptions; for ingest clients it is nil (and absent
// from JSON).
type Client struct {
	Meta
	Kind           string               `json:"kind"`
	Name           string               `json:"name"`
	Models         []string             `json:"models"`
	Enabled        bool                 `json:"enabled"`
	Quota          Quota                `json:"quota"`
	Authentication ClientAuthentication `json:"authentication"`
	*QueryOptions
}

type clientRecord struct {
	Client
	SealedHS256 []byte `json:"sealed_hs256_secret,omitempty"`
}

// ClientInput is a client's writable fields (authentication has its own route).
type ClientInput struct {
	ProjectID       *string   `json:"project_id"`
	Name            *string   `json:"name"`
	Models          *[]string `json:"models"`
	Enabled         *bool     `json:"enabled"`
	Quota           *Quota    `json:"quota"`
	AnalyticsAPIs   *[]string `json:"analytics_apis"`
	AdhocModels     *[]string `json:"adhoc_models"`
	RequiredFilters *[]Filter `json:"required_filters"`
}

// JWTInput is the jwt part of an authentication body; HS256Secret is write-only.
type JWTInput struct {
	Algorithms   []string `json:"algorithms"`
	HS256Secret  *string  `json:"hs256_secret"`
	PublicKeyPEM string   `json:"public_key_pem"`
	Issuer       string   `json:"issuer"`
	Audience     string   `json:"audience"`
}

// AuthenticationInput is the body of PUT /{clients}/{id}/authentication: it replaces the
// policy. An HS256 secret may be left out to keep the stored one.
type AuthenticationInput struct {
	Mode              string      `json:"mode"`
	Methods           []string    `json:"methods"`
	JWT               *JWTInput   `json:"jwt"`
	MTLS              *MTLSConfig `json:"mtls"`
	AllowedCIDRs      []string    `json:"allowed_cidrs"`
	AllowedUserAgents []string    `json:"allowed_user_agents"`
	Transports        []string    `json:"transports"`
}

func clientKind(kind string) Kind {
	if kind == ClientQuery {
		return KindQuery
	}
	return KindIngest
}

// validateKeys checks that every key of a list names an existing resource (by a key index)
// in the project, without repeats.
func validateKeys(f *fieldErrors, tx *bolt.Tx, index []byte, projectID, field, what string, keys []string) {
	seen := map[string]bool{}
	for i, k := range keys {
		at := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case seen[k]:
			f.add(at, "repeats %q", k)
		case tx.Bucket(index).Get(pairKey(projectID, k)) == nil:
			f.add(at, "%q is not %s of this project", k, what)
		}
		seen[k] = true
	}
}

func (c *clientRecord) apply(in ClientInput) {
	if in.Name != nil {
		c.Name = strings.TrimSpace(*in.Name)
	}
	if in.Models != nil {
		c.Models = append([]string{}, (*in.Models)...)
	}
	if in.Enabled != nil {
		c.Enabled = *in.Enabled
	}
	if in.Quota != nil {
		c.Quota = *in.Quota
	}
	if q := c.QueryOptions; q != nil {
		if in.AnalyticsAPIs != nil {
			q.AnalyticsAPIs = append([]string{}, (*in.AnalyticsAPIs)...)
		}
		if in.AdhocModels != nil {
			q.AdhocModels = append([]string{}, (*in.AdhocModels)...)
		}
		if in.RequiredFilters != nil {
			q.RequiredFilters = append([]Filter{}, (*in.RequiredFilters)...)
		}
	}
}

func (c *clientRecord) validate(tx *bolt.Tx, in ClientInput, rules QueryRules) error {
	var f fieldErrors
	if n := utf8.RuneCountInString(c.Name); n == 0 || n > 200 {
		f.add("name", "must be 1 to 200 characters")
	}
	f.name("name", c.Name)
	validateKeys(&f, tx, bucketModelKeys, c.ProjectID, "models", "a model", c.Models)
	if c.Quota.RequestsPerMinute < 0 || c.Quota.RequestsPerMinute > 1_000_000 {
		f.add("quota.requests_per_minute", "must be 0 (unlimited) to 1000000")
	}
	if c.Quota.RecordsPerMinute < 0 || c.Quota.RecordsPerMinute > 1_000_000_000 {
		f.add("quota.records_per_minute", "must be 0 (unlimited) to 1000000000")
	}
	if q := c.QueryOptions; q != nil {
		validateKeys(&f, tx, bucketAPIKeys, c.ProjectID, "analytics_apis", "an Analytics API", q.AnalyticsAPIs)
		validateKeys(&f, tx, bucketModelKeys, c.ProjectID, "adhoc_models", "a model", q.AdhocModels)
		if len(q.RequiredFilters) > 0 && rules == nil {
			return errNoQueryRules
		}
		for i, flt := range q.RequiredFilters {
			for _, e := range rules.ValidateFilter(flt) {
				f.add(fmt.Sprintf("required_filters[%d].%s", i, e.Field), "%s", e.Message)
			}
		}
	} else {
		for field, set := range map[string]bool{"analytics_apis": in.AnalyticsAPIs != nil, "adhoc_models": in.AdhocModels != nil, "required_filters": in.RequiredFilters != nil} {
			if set {
				f.add(field, "applies to query clients only")
			}
		}
	}
	return f.err()
}

// CreateClient creates an ingest or query client. It starts enabled and accepting its
// runtime API keys. Returns validation_failed, not_found.
func (s *Store) CreateClient(kind, projectID string, in ClientInput) (Client, error) {
	var c clientRecord
	err := s.updateRuntime(func(tx *bolt.Tx) error {
		c = clientRecord{Client: Client{Meta: Meta{ProjectID: projectID}, Kind: kind, Models: []string{}, Enabled: true, Authentication: DefaultAuthentication()}}
		if kind == ClientQuery {
			c.QueryOptions = &QueryOptions{AnalyticsAPIs: []string{}, AdhocModels: []string{}, RequiredFilters: []Filter{}}
		}
		c.apply(in)
		if tx.Bucket(bucketProjects).Get([]byte(projectID)) == nil {
			return NotFound("project")
		}
		if err := c.validate(tx, in, s.rules); err != nil {
			return err
		}
		return s.insertRes(tx, clientKind(kind), &c, s.now())
	})
	return c.Client, err
}

// UpdateClient replaces a client's writable fields. Returns validation_failed, not_found,
// precondition_failed.
func (s *Store) UpdateClient(kind, projectID, id string, in ClientInput, ifMatch int) (Client, error) {
	c, err := updateRes(s, clientKind(kind), projectID, id, ifMatch, func(tx *bolt.Tx, c *clientRecord) error {
		c.apply(in)
		return c.validate(tx, in, s.rules)
	})
	return c.Client, err
}

// SetClientAuthentication replaces a client's authentication policy. The HS256 secret is
// sealed with the client id as additional data; left out, the stored one is kept.
// Returns validation_failed, not_found, precondition_failed.
func (s *Store) SetClientAuthentication(kind, projectID, id string, in AuthenticationInput, ifMatch int) (Client, error) {
	c, err := updateRes(s, clientKind(kind), projectID, id, ifMatch, func(tx *bolt.Tx, c *clientRecord) error {
		a, sealed, err := s.buildAuthentication(tx, c, in)
		if err != nil {
			return err
		}
		if err := checkCertificateOnly(tx, c, a); err != nil {
			return err
		}
		c.Authentication, c.SealedHS256 = a, sealed
		return nil
	})
	return c.Client, err
}

func (s *Store) buildAuthentication(tx *bolt.Tx, c *clientRecord, in AuthenticationInput) (ClientAuthentication, []byte, error) {
	var f fieldErrors
	a := ClientAuthentication{Mode: in.Mode, Methods: []string{}, AllowedCIDRs: []string{}, AllowedUserAgents: []string{}, Transports: []string{}}
	if a.Mode == "" {
		a.Mode = ModeAny
	}
	if a.Mode != ModeAny && a.Mode != ModeAll {
		f.add("mode", "must be any or all")
	}
	methods := map[string]bool{}
	if len(in.Methods) == 0 {
		f.add("methods", "must name at least one of api_key, jwt, mtls")
	}
	for i, m := range in.Methods {
		switch {
		case m != MethodAPIKey && m != MethodJWT && m != MethodMTLS:
			f.add(fmt.Sprintf("methods[%d]", i), "must be api_key, jwt or mtls")
		case methods[m]:
			f.add(fmt.Sprintf("methods[%d]", i), "repeats %s", m)
		default:
			methods[m] = true
			a.Methods = append(a.Methods, m)
		}
	}
	var sealed []byte
	switch {
	case methods[MethodJWT] && in.JWT == nil:
		f.add("jwt", "is required when methods include jwt")
	case !methods[MethodJWT] && in.JWT != nil:
		f.add("jwt", "is set but methods do not include jwt")
	case in.JWT != nil:
		j, sec, errs := s.buildJWT(c, in.JWT)
		f = append(f, errs...)
		a.JWT, sealed = j, sec
	}
	switch {
	case methods[MethodMTLS] && in.MTLS == nil:
		f.add("mtls", "is required when methods include mtls")
	case !methods[MethodMTLS] && in.MTLS != nil:
		f.add("mtls", "is set but methods do not include mtls")
	case in.MTLS != nil:
		m := MTLSConfig{ClientCAIDs: nonNil(in.MTLS.ClientCAIDs), AllowedURIs: nonNil(in.MTLS.AllowedURIs), AllowedSubjects: nonNil(in.MTLS.AllowedSubjects)}
		if len(m.ClientCAIDs) == 0 {
			f.add("mtls.client_ca_ids", "must name at least one Client CA")
		}
		for i, id := range m.ClientCAIDs {
			if _, err := getInProject[ClientCA](tx, KindClientCA, c.ProjectID, id); err != nil {
				f.add(fmt.Sprintf("mtls.client_ca_ids[%d]", i), "is not a Client CA of this project")
			}
		}
		for i, u := range m.AllowedURIs {
			if pu, err := url.Parse(u); err != nil || pu.Scheme == "" || len(u) > 2048 {
				f.add(fmt.Sprintf("mtls.allowed_uris[%d]", i), "must be an absolute URI such as spiffe://example.org/ingest")
			}
		}
		for i, sub := range m.AllowedSubjects {
			if sub == "" || len(sub) > 1024 {
				f.add(fmt.Sprintf("mtls.allowed_subjects[%d]", i), "must be 1 to 1024 characters")
			}
		}
		a.MTLS = &m
	}
	for i, cidr := range in.AllowedCIDRs {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			if addr, aerr := netip.ParseAddr(cidr); aerr == nil {
				p, err = addr.Prefix(addr.BitLen())
			}
		}
		if err != nil {
			f.add(fmt.Sprintf("allowed_cidrs[%d]", i), "must be a CIDR such as 10.0.0.0/8 or an IP address")
			continue
		}
		a.AllowedCIDRs = append(a.AllowedCIDRs, p.Masked().String())
	}
	for i, ua := range in.AllowedUserAgents {
		if ua == "" || len(ua) > 512 {
			f.add(fmt.Sprintf("allowed_user_agents[%d]", i), "must be 1 to 512 characters")
			continue
		}
		a.AllowedUserAgents = append(a.AllowedUserAgents, ua)
	}
	if in.Transports == nil {
		a.Transports = []string{TransportHTTP, TransportWS}
	} else if len(in.Transports) == 0 {
		f.add("transports", "must name at least one of http, websocket")
	}
	for i, t := range in.Transports {
		if t != TransportHTTP && t != TransportWS {
			f.add(fmt.Sprintf("transports[%d]", i), "must be http or websocket")
		} else if !contains(a.Transports, t) {
			a.Transports = append(a.Transports, t)
		}
	}
	return a, sealed, f.err()
}

func (s *Store) buildJWT(c *clientRecord, in *JWTInput) (*JWTConfig, []byte, fieldErrors) {
	var f fieldErrors
	j := &JWTConfig{Algorithms: []string{}, Issuer: in.Issuer, Audience: in.Audience}
	algs := map[string]bool{}
	if len(in.Algorithms) == 0 {
		f.add("jwt.algorithms", "must name at least one of HS256, RS256, ES256")
	}
	for i, alg := range in.Algorithms {
		if alg != AlgorithmHS256 && alg != AlgorithmRS256 && alg != AlgorithmES256 {
			f.add(fmt.Sprintf("jwt.algorithms[%d]", i), "must be HS256, RS256 or ES256")
		} else if !algs[alg] {
			algs[alg] = true
			j.Algorithms = append(j.Algorithms, alg)
		}
	}
	if len(in.Issuer) > 512 {
		f.add("jwt.issuer", "must be at most 512 characters")
	}
	if len(in.Audience) > 512 {
		f.add("jwt.audience", "must be at most 512 characters")
	}
	var sealed []byte
	if algs[AlgorithmHS256] {
		switch {
		case in.HS256Secret != nil && len(*in.HS256Secret) < minHS256KeySize:
			f.add("jwt.hs256_secret", "must be at least %d bytes", minHS256KeySize)
		case in.HS256Secret != nil && len(*in.HS256Secret) > 4096:
			f.add("jwt.hs256_secret", "must be at most 4096 bytes")
		case in.HS256Secret != nil:
			var err error
			if sealed, err = s.seal(c.ID, *in.HS256Secret); err != nil {
				f.add("jwt.hs256_secret", "cannot be stored: %s", err.Error())
			}
		case c.SealedHS256 != nil:
			sealed = c.SealedHS256 // left out: keep the stored secret
		default:
			f.add("jwt.hs256_secret", "is required for HS256")
		}
		j.HS256SecretSet = true
	} else if in.HS256Secret != nil {
		f.add("jwt.hs256_secret", "is set but algorithms do not include HS256")
	}
	if algs[AlgorithmRS256] && algs[AlgorithmES256] {
		f.add("jwt.algorithms", "RS256 and ES256 need different public keys; choose one")
	} else if algs[AlgorithmRS256] || algs[AlgorithmES256] {
		if msg := checkPublicKey(in.PublicKeyPEM, algs[AlgorithmRS256]); msg != "" {
			f.add("jwt.public_key_pem", "%s", msg)
		}
		j.PublicKeyPEM = in.PublicKeyPEM
	} else if in.PublicKeyPEM != "" {
		f.add("jwt.public_key_pem", "is set but algorithms include neither RS256 nor ES256")
	}
	return j, sealed, f
}

// checkPublicKey parses a PEM public key for RS256 (RSA, at least 2048 bits) or ES256
// (ECDSA P-256) and says what is wrong, or "".
func checkPublicKey(pemText string, rsaKey bool) string {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return "must be a PEM PUBLIC KEY"
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return "is not a parseable public key"
	}
	if rsaKey {
		k, ok := key.(*rsa.PublicKey)
		if !ok {
			return "must be an RSA key for RS256"
		}
		if k.N.BitLen() < 2048 {
			return "must be an RSA key of at least 2048 bits"
		}
		return ""
	}
	if k, ok := key.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		return "must be an ECDSA P-256 key for ES256"
	}
	return ""
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Client returns one client (masked). Returns not_found.
func (s *Store) Client(kind, projectID, id string) (Client, error) {
	c, err := readOne[clientRecord](s, clientKind(kind), projectID, id)
	return c.Client, err
}

// ClientHS256Secret unseals a client's HS256 JWT secret, for runtime authentication.
// Returns not_found.
func (s *Store) ClientHS256Secret(kind, projectID, id string) ([]byte, error) {
	c, err := readOne[clientRecord](s, clientKind(kind), projectID, id)
	if err != nil {
		return nil, err
	}
	if c.SealedHS256 == nil || s.sealer == nil {
		return nil, NotFound("HS256 secret")
	}
	return s.sealer.Unseal(c.SealedHS256, []byte(c.ID))
}

// ListClients lists a project's clients of one kind; enabled filters when not nil.
func (s *Store) ListClients(kind, projectID string, enabled *bool, page Page) ([]Client, string, error) {
	var recs []clientRecord
	var next string
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		recs, next, err = listRes[clientRecord](tx, clientKind(kind), projectID, page, func(c *clientRecord) bool {
			return enabled == nil || c.Enabled == *enabled
		})
		return err
	})
	out := make([]Client, len(recs))
	for i := range recs {
		out[i] = recs[i].Client
	}
	return out, next, err
}

// DeleteClient deletes a client for good and revokes its runtime API keys in the same
// transaction. Returns not_found.
func (s *Store) DeleteClient(kind, projectID, id string) error {
	return s.updateRuntime(func(tx *bolt.Tx) error {
		c, err := getInProject[clientRecord](tx, clientKind(kind), projectID, id)
		if err != nil {
			return err
		}
		now := s.now()
		err = eachRes[runtimeKeyRecord](tx, KindRuntimeKey, projectID, func(k *runtimeKeyRecord) error {
			if k.ClientID != id || k.RevokedAt != nil {
				return nil
			}
			k.RevokedAt = &now
			return touchRes(tx, KindRuntimeKey, k, now)
		})
		if err != nil {
			return err
		}
		if kind == ClientIngest { // a session waiting for the client would wait for ever
			d, err := waitingSession(tx, projectID, id)
			if err != nil {
				return err
			}
			if d != nil {
				d.State = DiscoveryDiscarded
				if err := endDiscovery(tx, d); err != nil {
					return err
				}
				if err := touchRes(tx, KindDiscovery, d, now); err != nil {
					return err
				}
			}
		}
		return deleteRes(tx, clientKind(kind), &c)
	})
}

// ClientByID returns a client of a kind by id alone, for runtime authentication, which
// learns the project from the client. Returns not_found.
func (s *Store) ClientByID(kind, id string) (Client, error) {
	c, err := readOne[clientRecord](s, clientKind(kind), "", id)
	return c.Client, err
}

// CertificateOnly reports whether the policy lets a client certificate alone, with no other
// credential naming the client, authenticate a request: mtls is a method and either one
// method suffices (mode any) or mtls is the only method.
func (a ClientAuthentication) CertificateOnly() bool {
	return a.MTLS != nil && contains(a.Methods, MethodMTLS) && (a.Mode != ModeAll || len(a.Methods) == 1)
}

// CertificateClient is a client that accepts certificate-only mTLS, with the Client CAs its
// policy names.
type CertificateClient struct {
	Client
	CAs []ClientCA
}

// CertificateClients lists every client of a kind, in any project, that accepts
// certificate-only mTLS, with its Client CAs (each of the client's own project): the
// candidates for a request that presents only a certificate. One read transaction.
func (s *Store) CertificateClients(kind string) ([]CertificateClient, error) {
	var out []CertificateClient
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(clientKind(kind).bucket).ForEach(func(_, v []byte) error {
			var c clientRecord
			if err := getJSONBytes(v, &c); err != nil {
				return err
			}
			if !c.Authentication.CertificateOnly() {
				return nil
			}
			cc := CertificateClient{Client: c.Client}
			for _, id := range c.Authentication.MTLS.ClientCAIDs {
				if ca, err := getInProject[ClientCA](tx, KindClientCA, c.ProjectID, id); err == nil {
					cc.CAs = append(cc.CAs, ca)
				}
			}
			out = append(out, cc)
			return nil
		})
	})
	return out, err
}

// checkCertificateOnly enforces, when a client's new policy accepts certificate-only mTLS,
// the rule that makes a certificate presented alone name at most one client
// (docs/api.md, "Certificate-only mTLS"): no client of the same kind in another project may
// accept certificate-only mTLS through a related CA (the same public key, or one CA signed
// the other), and no other such client of the same project may, unless the two clients'
// allowed_uris or allowed_subjects are disjoint. Returns conflict naming the other client
// of the project (another project's client is never named).
func checkCertificateOnly(tx *bolt.Tx, c *clientRecord, a ClientAuthentication) error {
	if !a.CertificateOnly() {
		return nil
	}
	mine := map[string]*x509.Certificate{}
	for _, id := range a.MTLS.ClientCAIDs {
		ca, err := getInProject[ClientCA](tx, KindClientCA, c.ProjectID, id)
		if err != nil {
			continue // buildAuthentication reported it
		}
		if cert := parseStoredCA(ca); cert != nil {
			mine[id] = cert
		}
	}
	k := clientKind(c.Kind)
	return tx.Bucket(k.bucket).ForEach(func(_, v []byte) error {
		var o clientRecord
		if err := getJSONBytes(v, &o); err != nil {
			return err
		}
		if o.ID == c.ID || !o.Authentication.CertificateOnly() {
			return nil
		}
		for _, oid := range o.Authentication.MTLS.ClientCAIDs {
			oca, err := getInProject[ClientCA](tx, KindClientCA, o.ProjectID, oid)
			if err != nil {
				continue
			}
			ocert := parseStoredCA(oca)
			for id, cert := range mine {
				if ocert == nil || !RelatedCAs(cert, ocert) {
					continue
				}
				if o.ProjectID != c.ProjectID {
					return Errorf(CodeConflict, "the Client CA %s (or a CA related to it: the same key, its issuer or one it issued) already identifies certificate-only %ss of another project, so a certificate presented alone could not tell the projects apart; use a CA of this project's own, or mode all with a second method", id, k.Name)
				}
				if mtlsOverlap(a.MTLS, o.Authentication.MTLS) {
					return Errorf(CodeConflict, "%s %s (%s) already accepts certificate-only mTLS through the Client CA %s or a CA related to it, with allowed_uris and allowed_subjects that overlap this policy's, so one certificate could fit both clients; give the two clients disjoint allowed_uris or allowed_subjects", k.Name, o.ID, o.Name, oid)
				}
			}
		}
		return nil
	})
}

// parseStoredCA parses a stored Client CA's certificate (it parsed when it was stored).
func parseStoredCA(ca ClientCA) *x509.Certificate {
	block, _ := pem.Decode([]byte(ca.CertificatePEM))
	if block == nil {
		return nil
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil
	}
	return cert
}

// RelatedCAs reports whether one certificate could be trusted through both CAs by a
// relation that can be seen from the two alone: the same public key, or one CA's
// signature made with the other's key.
func RelatedCAs(a, b *x509.Certificate) bool {
	return bytes.Equal(a.RawSubjectPublicKeyInfo, b.RawSubjectPublicKeyInfo) ||
		a.CheckSignatureFrom(b) == nil || b.CheckSignatureFrom(a) == nil
}

// mtlsOverlap reports whether one certificate could pass both allowlists. Two lists are
// disjoint only when both are non-empty and share no entry; for subjects, an entry that is
// a whole subject also meets the entry equal to its CN (both match the same certificate).
func mtlsOverlap(a, b *MTLSConfig) bool {
	disjoint := func(x, y []string, same func(p, q string) bool) bool {
		if len(x) == 0 || len(y) == 0 {
			return false
		}
		for _, p := range x {
			for _, q := range y {
				if same(p, q) {
					return false
				}
			}
		}
		return true
	}
	eq := func(p, q string) bool { return p == q }
	subj := func(p, q string) bool {
		return p == q || strings.Contains(","+p+",", ",CN="+q+",") || strings.Contains(","+q+",", ",CN="+p+",")
	}
	return !disjoint(a.AllowedURIs, b.AllowedURIs, eq) && !disjoint(a.AllowedSubjects, b.AllowedSubjects, subj)
}

// ClientCACertificates returns the PEM certificates of a project's Client CAs by id
// (missing ones are skipped).
func (s *Store) ClientCACertificates(projectID string, ids []string) ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, id := range ids {
			if ca, err := getInProject[ClientCA](tx, KindClientCA, projectID, id); err == nil {
				out = append(out, ca.CertificatePEM)
			}
		}
		return nil
	})
	return out, err
}
