package auth

import (
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"net/netip"
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

// RuntimeIdentity is an authenticated runtime caller.
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
	var (
		client  *store.Client
		key     *store.RuntimeKey
		proven  = map[string]bool{}
		kindErr error
	)
	name := func(c store.Client) error {
		if client != nil && client.ID != c.ID {
			return unauthenticated("the credentials name different clients")
		}
		client = &c
		return nil
	}
	if h := strings.TrimSpace(req.Authorization); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		cred = strings.TrimSpace(cred)
		switch strings.ToLower(scheme) {
		case "apikey":
			k, c, err := s.runtimeKey(cred)
			if err != nil {
				return nil, err
			}
			if k.Kind != req.Kind {
				kindErr = forbidden("a %s key cannot be used for %s", k.Kind, req.Kind)
			}
			key, proven[store.MethodAPIKey] = &k, true
			if err := name(c); err != nil {
				return nil, err
			}
		case "bearer":
			c, err := s.runtimeJWT(cred)
			if err != nil {
				return nil, err
			}
			if c.Kind != req.Kind {
				kindErr = forbidden("%s cannot be used for %s", store.WithArticle(c.Kind+" client"), req.Kind)
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
		if client != nil {
			if s.certFits(*client, req.PeerCertificates) {
				proven[store.MethodMTLS] = true
			}
		} else {
			c, err := s.clientForCertificate(req.Kind, req.PeerCertificates)
			if err != nil {
				return nil, err
			}
			client, proven[store.MethodMTLS] = &c, true
		}
	}
	if client == nil {
		return nil, unauthenticated("missing runtime credential: send Authorization: ApiKey lk_ak_…, a Bearer JWT, or a client certificate")
	}
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

func (s *Service) runtimeKey(cred string) (store.RuntimeKey, store.Client, error) {
	if !ParseRuntimeKey(cred) {
		return store.RuntimeKey{}, store.Client{}, unauthenticated("malformed runtime API key: expected lk_ak_ and 43 characters")
	}
	hash := HashSecret(cred)
	k, err := s.store.RuntimeKeyByHash(hash)
	if store.IsCode(err, store.CodeNotFound) {
		return k, store.Client{}, unauthenticated("invalid runtime API key")
	}
	if err != nil {
		return k, store.Client{}, err
	}
	switch k.Status(s.now()) {
	case store.KeyRevoked:
		return k, store.Client{}, unauthenticated("the runtime API key is revoked")
	case store.KeyExpired:
		return k, store.Client{}, unauthenticated("the runtime API key has expired")
	}
	c, err := s.store.Client(k.Kind, k.ProjectID, k.ClientID)
	if store.IsCode(err, store.CodeNotFound) {
		return k, c, unauthenticated("the runtime API key's client no longer exists")
	}
	return k, c, err
}

// runtimeJWT verifies a Bearer JWT against the policy of the client its client_id names.
func (s *Service) runtimeJWT(tok string) (store.Client, error) {
	bad := unauthenticated("invalid runtime JWT")
	var peek jwt.MapClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &peek); err != nil {
		return store.Client{}, bad
	}
	id, _ := peek["client_id"].(string)
	kind := clientKindOf(id)
	if kind == "" {
		return store.Client{}, unauthenticated("the runtime JWT lacks a client_id naming an ingest or query client")
	}
	c, err := s.store.ClientByID(kind, id)
	if store.IsCode(err, store.CodeNotFound) {
		return c, unauthenticated("the runtime JWT names an unknown client")
	}
	if err != nil {
		return c, err
	}
	cfg := c.Authentication.JWT
	if cfg == nil || len(cfg.Algorithms) == 0 {
		return c, unauthenticated("the client does not accept JWTs")
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
		switch t.Method.Alg() {
		case store.AlgorithmHS256:
			return s.store.ClientHS256Secret(c.Kind, c.ProjectID, c.ID)
		case store.AlgorithmRS256:
			return jwt.ParseRSAPublicKeyFromPEM([]byte(cfg.PublicKeyPEM))
		case store.AlgorithmES256:
			return jwt.ParseECPublicKeyFromPEM([]byte(cfg.PublicKeyPEM))
		}
		return nil, errors.New("algorithm not allowed")
	})
	if err != nil {
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			return c, unauthenticated("the runtime JWT has expired")
		case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
			return c, unauthenticated("the runtime JWT lacks exp")
		case errors.Is(err, jwt.ErrTokenInvalidIssuer), errors.Is(err, jwt.ErrTokenInvalidAudience):
			return c, unauthenticated("the runtime JWT has the wrong issuer or audience")
		}
		return c, bad
	}
	if sub, _ := claims["client_id"].(string); subtle.ConstantTimeCompare([]byte(sub), []byte(c.ID)) != 1 {
		return c, bad
	}
	return c, nil
}

// certFits reports whether a presented chain is trusted by one of the client's Client CAs
// and passes its URI and subject allowlists.
func (s *Service) certFits(c store.Client, chain []*x509.Certificate) bool {
	m := c.Authentication.MTLS
	if m == nil || len(chain) == 0 {
		return false
	}
	pems, err := s.store.ClientCACertificates(c.ProjectID, m.ClientCAIDs)
	if err != nil || len(pems) == 0 {
		return false
	}
	roots := x509.NewCertPool()
	for _, p := range pems {
		roots.AppendCertsFromPEM([]byte(p))
	}
	inter := x509.NewCertPool()
	for _, ic := range chain[1:] {
		inter.AddCert(ic)
	}
	leaf := chain[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: s.now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return false
	}
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
	if len(m.AllowedSubjects) > 0 && !contains(m.AllowedSubjects, leaf.Subject.String()) && !contains(m.AllowedSubjects, leaf.Subject.CommonName) {
		return false
	}
	return true
}

// clientForCertificate finds the one client whose mTLS policy accepts a certificate that
// came without any other credential.
func (s *Service) clientForCertificate(kind string, chain []*x509.Certificate) (store.Client, error) {
	cands, err := s.store.MTLSClients(kind)
	if err != nil {
		return store.Client{}, err
	}
	var found []store.Client
	for _, c := range cands {
		if s.certFits(c, chain) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return store.Client{}, unauthenticated("the client certificate is not trusted by any " + kind + " client")
	case 1:
		return found[0], nil
	}
	return store.Client{}, unauthenticated("the client certificate fits several clients; add a credential that names one")
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
