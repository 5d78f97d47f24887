package auth

import (
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"lookout/store"
)

// RuntimeRequest is what the runtime may use to authenticate a request (CONTRACTS §4).
// Cookies are never part of it.
type RuntimeRequest struct {
	Authorization    string
	PeerCertificates []*x509.Certificate
	RemoteAddr       netip.Addr
	UserAgent        string
	Transport        string // store.TransportHTTP or store.TransportWS
	Kind             string // store.ClientIngest or store.ClientQuery
}

// RuntimeIdentity is an authenticated runtime caller. Its slices (and a query client's
// QueryOptions) are shared with the runtime authentication cache: read them, never change
// them.
type RuntimeIdentity struct {
	Client store.Client
	// Key is the runtime API key used, if any.
	Key *store.RuntimeKey
	// Methods are the methods the request proved (api_key, jwt, mtls).
	Methods []string
	// Models are the model keys the caller may use: the client's, narrowed by its key.
	Models []string
}

// JWTLeeway is the clock skew allowed on exp, nbf and iat of runtime JWTs.
const JWTLeeway = 60 * time.Second

func clientKindOf(id string) string {
	switch {
	case strings.HasPrefix(id, "ic_"):
		return store.ClientIngest
	case strings.HasPrefix(id, "qc_"):
		return store.ClientQuery
	}
	return ""
}

// AuthenticateRuntime resolves and checks the caller of a runtime request: 401 when no
// credential is presented or a presented one is invalid (unknown, expired, revoked, bad
// signature, untrusted certificate) or one the client's "all" mode requires is missing;
// 403 when the credentials are valid but not allowed here (another kind of client, a
// disabled client, a method, source address, user agent or transport the policy does not
// allow). Returns unauthenticated, forbidden.
func (s *Service) AuthenticateRuntime(req RuntimeRequest) (*RuntimeIdentity, error) {
	rc := s.runtimeCache()
	var (
		cc      *cachedClient
		key     *store.RuntimeKey
		proven  = map[string]bool{}
		kindErr error
	)
	name := func(c *cachedClient) error {
		if cc != nil && cc.client.ID != c.client.ID {
			return unauthenticated("the credentials name different clients")
		}
		cc = c
		return nil
	}
	if h := strings.TrimSpace(req.Authorization); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		cred = strings.TrimSpace(cred)
		switch strings.ToLower(scheme) {
		case "apikey":
			ck, err := s.runtimeKey(rc, cred)
			if err != nil {
				return nil, err
			}
			k := ck.key // a copy: the identity must not share the cached record
			if k.Kind != req.Kind {
				kindErr = forbidden("a %s key cannot be used for %s", k.Kind, req.Kind)
			}
			key, proven[store.MethodAPIKey] = &k, true
			if err := name(ck.client); err != nil {
				return nil, err
			}
		case "bearer":
			c, err := s.runtimeJWT(rc, cred)
			if err != nil {
				return nil, err
			}
			if c.client.Kind != req.Kind {
				kindErr = forbidden("%s cannot be used for %s", store.WithArticle(c.client.Kind+" client"), req.Kind)
			}
			proven[store.MethodJWT] = true
			if err := name(c); err != nil {
				return nil, err
			}
		default:
			return nil, unauthenticated("unsupported Authorization scheme: use ApiKey lk_ak_… or Bearer <JWT>")
		}
	}
	if len(req.PeerCertificates) > 0 {
		if cc != nil {
			if s.certFits(cc, req.PeerCertificates) {
				proven[store.MethodMTLS] = true
			}
		} else {
			c, err := s.clientForCertificate(rc, req.Kind, req.PeerCertificates)
			if err != nil {
				return nil, err
			}
			cc, proven[store.MethodMTLS] = c, true
		}
	}
	if cc == nil {
		return nil, unauthenticated("missing runtime credential: send Authorization: ApiKey lk_ak_…, a Bearer JWT, or a client certificate")
	}
	client := &cc.client
	a := client.Authentication
	if a.Mode == store.ModeAll {
		for _, m := range a.Methods {
			if !proven[m] {
				return nil, unauthenticated("this client requires " + m + " as well")
			}
		}
	}
	if kindErr != nil {
		return nil, kindErr
	}
	var methods []string
	for _, m := range []string{store.MethodAPIKey, store.MethodJWT, store.MethodMTLS} {
		if !proven[m] {
			continue
		}
		if !contains(a.Methods, m) {
			return nil, forbidden("%s is not an allowed method for this client", m)
		}
		methods = append(methods, m)
	}
	if !client.Enabled {
		return nil, forbidden("the client is disabled")
	}
	if len(a.Transports) > 0 && !contains(a.Transports, req.Transport) {
		return nil, forbidden("the client may not use %s", req.Transport)
	}
	if len(a.AllowedCIDRs) > 0 && !inCIDRs(a.AllowedCIDRs, req.RemoteAddr) {
		return nil, forbidden("requests from this address are not allowed for the client")
	}
	if len(a.AllowedUserAgents) > 0 && !uaAllowed(a.AllowedUserAgents, req.UserAgent) {
		return nil, forbidden("this user agent is not allowed for the client")
	}
	id := &RuntimeIdentity{Client: *client, Key: key, Methods: methods, Models: client.Models}
	if key != nil && len(key.Models) > 0 {
		id.Models = nil
		for _, m := range key.Models {
			if contains(client.Models, m) {
				id.Models = append(id.Models, m)
			}
		}
	}
	return id, nil
}

// runtimeKey finds an unrevoked, unexpired runtime key and its client.
func (s *Service) runtimeKey(rc *runtimeCache, cred string) (*cachedKey, error) {
	if !ParseRuntimeKey(cred) {
		return nil, unauthenticated("malformed runtime API key: expected lk_ak_ and 43 characters")
	}
	ck, err := s.cachedKey(rc, HashSecret(cred))
	if store.IsCode(err, store.CodeNotFound) {
		return nil, unauthenticated("invalid runtime API key")
	}
	if err != nil {
		return nil, err
	}
	switch ck.key.Status(s.now()) {
	case store.KeyRevoked:
		return nil, unauthenticated("the runtime API key is revoked")
	case store.KeyExpired:
		return nil, unauthenticated("the runtime API key has expired")
	}
	if ck.client == nil {
		return nil, unauthenticated("the runtime API key's client no longer exists")
	}
	return ck, nil
}

// runtimeJWT verifies a Bearer JWT against the policy of the client its client_id names.
func (s *Service) runtimeJWT(rc *runtimeCache, tok string) (*cachedClient, error) {
	bad := unauthenticated("invalid runtime JWT")
	var peek jwt.MapClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &peek); err != nil {
		return nil, bad
	}
	id, _ := peek["client_id"].(string)
	kind := clientKindOf(id)
	if kind == "" {
		return nil, unauthenticated("the runtime JWT lacks a client_id naming an ingest or query client")
	}
	cc, err := s.cachedClient(rc, kind, id)
	if store.IsCode(err, store.CodeNotFound) {
		return nil, unauthenticated("the runtime JWT names an unknown client")
	}
	if err != nil {
		return nil, err
	}
	cfg := cc.client.Authentication.JWT
	if cfg == nil || len(cfg.Algorithms) == 0 {
		return nil, unauthenticated("the client does not accept JWTs")
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods(cfg.Algorithms), jwt.WithLeeway(JWTLeeway),
		jwt.WithExpirationRequired(), jwt.WithTimeFunc(s.now)}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	var claims jwt.MapClaims
	_, err = jwt.NewParser(opts...).ParseWithClaims(tok, &claims, func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		if err := cc.jwtErr[alg]; err != nil {
			return nil, err
		}
		if key, ok := cc.jwtKey[alg]; ok {
			return key, nil
		}
		return nil, errors.New("algorithm not allowed")
	})
	if err != nil {
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			return nil, unauthenticated("the runtime JWT has expired")
		case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
			return nil, unauthenticated("the runtime JWT lacks exp")
		case errors.Is(err, jwt.ErrTokenInvalidIssuer), errors.Is(err, jwt.ErrTokenInvalidAudience):
			return nil, unauthenticated("the runtime JWT has the wrong issuer or audience")
		}
		return nil, bad
	}
	if sub, _ := claims["client_id"].(string); subtle.ConstantTimeCompare([]byte(sub), []byte(cc.client.ID)) != 1 {
		return nil, bad
	}
	return cc, nil
}

// verifyChain checks that the first certificate of a presented chain is a client
// certificate that chains to one of roots, with the rest of the chain as intermediates.
func (s *Service) verifyChain(roots *x509.CertPool, chain []*x509.Certificate) bool {
	inter := x509.NewCertPool()
	for _, ic := range chain[1:] {
		inter.AddCert(ic)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: s.now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// allowedLeaf reports whether a leaf certificate passes a policy's URI and subject
// allowlists.
func allowedLeaf(m *store.MTLSConfig, leaf *x509.Certificate) bool {
	if len(m.AllowedURIs) > 0 {
		ok := false
		for _, u := range leaf.URIs {
			if contains(m.AllowedURIs, u.String()) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return len(m.AllowedSubjects) == 0 || contains(m.AllowedSubjects, leaf.Subject.String()) || contains(m.AllowedSubjects, leaf.Subject.CommonName)
}

// certFits reports whether a presented chain is trusted by one of the client's Client CAs
// and passes its URI and subject allowlists.
func (s *Service) certFits(cc *cachedClient, chain []*x509.Certificate) bool {
	m := cc.client.Authentication.MTLS
	if m == nil || cc.roots == nil || len(chain) == 0 {
		return false
	}
	return s.verifyChain(cc.roots, chain) && allowedLeaf(m, chain[0])
}

// maxChain bounds the certificates of a presented chain that are looked up as issuers.
const maxChain = 8

// clientForCertificate finds the one client whose policy accepts a certificate that came
// without any other credential. The candidate CAs are the stored Client CAs (of clients
// that accept certificate-only mTLS) whose subject issued one of the chain's certificates;
// the chain is verified once against each. Configuration refuses what would make two
// clients fit (docs/api.md, "Certificate-only mTLS"); what it cannot see (a certificate
// with the URIs of two clients, a CA chain longer than one link) is refused here rather
// than guessed.
func (s *Service) clientForCertificate(rc *runtimeCache, kind string, chain []*x509.Certificate) (*cachedClient, error) {
	idx, err := s.certIndex(rc, kind)
	if err != nil {
		return nil, err
	}
	if len(chain) > maxChain {
		chain = chain[:maxChain]
	}
	var found []store.Client
	var tried []*indexedCA
	for _, c := range chain {
		for _, ca := range idx.bySubject[string(c.RawIssuer)] {
			if slices.Contains(tried, ca) {
				continue
			}
			tried = append(tried, ca)
			if !s.verifyChain(ca.roots, chain) {
				continue
			}
			for _, cl := range ca.clients {
				if allowedLeaf(cl.Authentication.MTLS, chain[0]) && !slices.ContainsFunc(found, func(f store.Client) bool { return f.ID == cl.ID }) {
					found = append(found, cl)
				}
			}
		}
	}
	switch len(found) {
	case 0:
		return nil, unauthenticated("the client certificate is not trusted by any " + kind + " client")
	case 1:
		return s.cachedClient(rc, kind, found[0].ID)
	}
	return nil, unauthenticated("the client certificate fits several clients; add a credential that names one")
}

func inCIDRs(cidrs []string, addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Contains(addr) {
			return true
		}
	}
	return false
}

// uaAllowed: each entry matches a User-Agent that starts with it ("edge-agent/" allows
// every version of edge-agent).
func uaAllowed(allowed []string, ua string) bool {
	for _, a := range allowed {
		if strings.HasPrefix(ua, a) {
			return true
		}
	}
	return false
}
