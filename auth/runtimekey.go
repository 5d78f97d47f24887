package auth

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
)

// RuntimeKeyPrefix starts every runtime API key: lk_ak_<43 chars base64url>.
const RuntimeKeyPrefix = "lk_ak_"

// NewRuntimeKey returns a fresh runtime API key, the prefix shown in lists (enough to tell
// keys apart, far too little to guess the rest) and the hash that is stored.
func NewRuntimeKey() (key, displayPrefix string, hash []byte) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	key = RuntimeKeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return key, key[:len(RuntimeKeyPrefix)+8], HashSecret(key)
}

// ParseRuntimeKey checks the form of a runtime API key.
func ParseRuntimeKey(key string) bool {
	rest, ok := strings.CutPrefix(key, RuntimeKeyPrefix)
	if !ok || len(rest) != 43 {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	return err == nil && len(b) == 32
}
