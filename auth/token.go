package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// Management Token format (CONTRACTS §2): lk_mgmt_<12 chars [a-z0-9]>.<43 chars base64url>.
const (
	TokenPrefix    = "lk_mgmt_"
	tokenIDLen     = 12
	tokenSecretLen = 43 // base64url (no padding) of 32 bytes
)

const prefixAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewManagementToken returns a fresh token string, its lookup prefix and its secret.
func NewManagementToken() (token, prefix, secret string) {
	var p [tokenIDLen]byte
	var r [tokenIDLen]byte
	_, _ = rand.Read(r[:])
	for i := range p {
		// 256 % 36 != 0 biases a few characters by under 1%; the prefix is a lookup key, not
		// the secret, so that bias costs nothing.
		p[i] = prefixAlphabet[int(r[i])%len(prefixAlphabet)]
	}
	var s [32]byte
	_, _ = rand.Read(s[:])
	prefix = string(p[:])
	secret = base64.RawURLEncoding.EncodeToString(s[:])
	return TokenPrefix + prefix + "." + secret, prefix, secret
}

// ParseManagementToken splits a token into its prefix and secret. ok is false for anything
// not exactly of the token's form.
func ParseManagementToken(tok string) (prefix, secret string, ok bool) {
	rest, found := strings.CutPrefix(tok, TokenPrefix)
	if !found || len(rest) != tokenIDLen+1+tokenSecretLen || rest[tokenIDLen] != '.' {
		return "", "", false
	}
	prefix, secret = rest[:tokenIDLen], rest[tokenIDLen+1:]
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return "", "", false
		}
	}
	if b, err := base64.RawURLEncoding.Strict().DecodeString(secret); err != nil || len(b) != 32 {
		return "", "", false
	}
	return prefix, secret, true
}

// HashSecret is how token secrets are stored: 32 random bytes need no slow hash.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}
