package auth

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"sync"
	"sync/atomic"

	"github.com/golang-jwt/jwt/v5"

	"lookout/store"
)

// runtimeCache holds what runtime authentication reads from the store, decoded and parsed,
// for one runtime generation (store.RuntimeGeneration): any write to projects, models,
// warehouses, clients, runtime keys or Client CAs makes the next request start a new one.
// Only records that exist are cached (an unknown key costs a read every time, as before),
// so its size is bounded by what is stored. Time-dependent checks (key expiry, JWT exp,
// certificate validity) are made on every request, never cached.
type runtimeCache struct {
	gen     uint64
	keys    sync.Map // string(SHA-256 of the key) -> *cachedKey
	clients sync.Map // kind + "/" + id -> *cachedClient
	certs   [2]certIndexSlot
}

type certIndexSlot struct {
	mu  sync.Mutex
	idx atomic.Pointer[certIndex]
}

type cachedKey struct {
	key    store.RuntimeKey
	client *cachedClient // nil when the key's client no longer exists
}

// cachedClient is a client with what verifying its credentials needs, parsed once.
type cachedClient struct {
	client store.Client
	roots  *x509.CertPool // its Client CAs; nil without mtls
	// jwtKey is the HS256 secret or the parsed public key for each allowed algorithm;
	// jwtErr the reason one could not be had (the token is then invalid).
	jwtKey map[string]any
	jwtErr map[string]error
}

// runtimeCache returns the cache of the store's current runtime generation. The generation
// is read before any record, so a record read during a concurrent write is kept under the
// older generation and dropped at the next request.
func (s *Service) runtimeCache() *runtimeCache {
	gen := s.store.RuntimeGeneration()
	cur := s.rt.Load()
	if cur != nil && cur.gen == gen {
		return cur
	}
	fresh := &runtimeCache{gen: gen}
	if cur == nil || cur.gen < gen {
		s.rt.CompareAndSwap(cur, fresh) // losing the race only costs the loser's reads
	}
	return fresh
}

// cachedKey returns a runtime key by its hash with its client. Returns not_found.
func (s *Service) cachedKey(rc *runtimeCache, hash []byte) (*cachedKey, error) {
	if v, ok := rc.keys.Load(string(hash)); ok {
		return v.(*cachedKey), nil
	}
	k, err := s.store.RuntimeKeyByHash(hash)
	if err != nil {
		return nil, err
	}
	c, err := s.cachedClient(rc, k.Kind, k.ClientID)
	if err != nil && !store.IsCode(err, store.CodeNotFound) {
		return nil, err
	}
	ck := &cachedKey{key: k, client: c} // client nil: it no longer exists
	rc.keys.Store(string(hash), ck)
	return ck, nil
}

// cachedClient returns a client by kind and id, with its Client CAs and JWT keys parsed.
// Returns not_found.
func (s *Service) cachedClient(rc *runtimeCache, kind, id string) (*cachedClient, error) {
	ck := kind + "/" + id
	if v, ok := rc.clients.Load(ck); ok {
		return v.(*cachedClient), nil
	}
	c, err := s.store.ClientByID(kind, id)
	if err != nil {
		return nil, err
	}
	cc := &cachedClient{client: c}
	a := c.Authentication
	if a.MTLS != nil {
		pems, err := s.store.ClientCACertificates(c.ProjectID, a.MTLS.ClientCAIDs)
		if err != nil {
			return nil, err
		}
		cc.roots = x509.NewCertPool()
		for _, p := range pems {
			cc.roots.AppendCertsFromPEM([]byte(p))
		}
	}
	if j := a.JWT; j != nil {
		cc.jwtKey, cc.jwtErr = map[string]any{}, map[string]error{}
		for _, alg := range j.Algorithms {
			var key any
			var err error
			switch alg {
			case store.AlgorithmHS256:
				key, err = s.store.ClientHS256Secret(c.Kind, c.ProjectID, c.ID)
			case store.AlgorithmRS256:
				key, err = jwt.ParseRSAPublicKeyFromPEM([]byte(j.PublicKeyPEM))
			case store.AlgorithmES256:
				key, err = jwt.ParseECPublicKeyFromPEM([]byte(j.PublicKeyPEM))
			}
			cc.jwtKey[alg], cc.jwtErr[alg] = key, err
		}
	}
	rc.clients.Store(ck, cc)
	return cc, nil
}

// certIndex finds the clients that accept certificate-only mTLS for a presented chain
// without trying every client: Client CAs are indexed by subject (a chain names its
// issuers by subject) and grouped by fingerprint, so a chain is verified at most once per
// distinct stored CA that could have issued one of its certificates.
type certIndex struct {
	bySubject map[string][]*indexedCA // raw subject -> CAs with that subject
}

type indexedCA struct {
	cert    *x509.Certificate
	roots   *x509.CertPool // just this CA
	clients []store.Client // certificate-only clients that name a CA with this fingerprint
}

func clientKindIndex(kind string) int {
	if kind == store.ClientQuery {
		return 1
	}
	return 0
}

// certIndex returns the index of certificate-only clients of a kind, built once per
// generation (by the first request that needs it; the others wait for it).
func (s *Service) certIndex(rc *runtimeCache, kind string) (*certIndex, error) {
	slot := &rc.certs[clientKindIndex(kind)]
	if idx := slot.idx.Load(); idx != nil {
		return idx, nil
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if idx := slot.idx.Load(); idx != nil {
		return idx, nil
	}
	cands, err := s.store.CertificateClients(kind)
	if err != nil {
		return nil, err // not kept: the next request tries again
	}
	idx := &certIndex{bySubject: map[string][]*indexedCA{}}
	byPrint := map[[32]byte]*indexedCA{}
	for _, c := range cands {
		for _, ca := range c.CAs {
			block, _ := pem.Decode([]byte(ca.CertificatePEM))
			if block == nil {
				continue
			}
			fp := sha256.Sum256(block.Bytes)
			e := byPrint[fp]
			if e == nil {
				cert, err := x509.ParseCertificate(block.Bytes)
				if err != nil {
					continue
				}
				e = &indexedCA{cert: cert, roots: x509.NewCertPool()}
				e.roots.AddCert(cert)
				byPrint[fp] = e
				idx.bySubject[string(cert.RawSubject)] = append(idx.bySubject[string(cert.RawSubject)], e)
			}
			if n := len(e.clients); n == 0 || e.clients[n-1].ID != c.ID {
				e.clients = append(e.clients, c.Client)
			}
		}
	}
	slot.idx.Store(idx)
	return idx, nil
}
