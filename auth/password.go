// Package auth decides who a caller is and what they may do: passwords, console sessions,
// Management Tokens and their scopes, and the access rules of workspaces and projects. It
// knows principals and policies and returns *store.Error values; it serves no HTTP.
package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"

	"lookout/store"
)

// Argon2id parameters: OWASP's recommended minimum (19 MiB, 2 passes, 1 lane). They are
// stored with every hash, so raising them later keeps old hashes verifiable.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// dummyHash is verified against when an e-mail address is unknown, so a failed login costs
// the same time whether or not the account exists.
// It is made on first use, so commands that never log anyone in do not pay for it.
var dummyHash = sync.OnceValue(func() string {
	h, err := HashPassword("lookout-timing-equaliser")
	if err != nil {
		panic(err)
	}
	return h
})

// ValidatePassword enforces the password policy: 8 to 1024 characters.
// Returns validation_failed.
func ValidatePassword(pw string) error {
	if n := utf8.RuneCountInString(pw); n < 8 || len(pw) > 1024 {
		return store.Invalid(store.FieldError{Field: "password", Message: "must be 8 to 1024 characters"})
	}
	return nil
}

// HashPassword returns an argon2id hash in the PHC string format.
func HashPassword(pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// VerifyPassword reports whether pw matches a PHC argon2id hash, in constant time.
func VerifyPassword(hash, pw string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var version int
	var mem, iters uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &iters, &threads); err != nil || mem == 0 || iters == 0 || threads == 0 || mem > 1<<22 || iters > 64 {
		return false
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil {
		return false
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 128 {
		return false
	}
	got := argon2.IDKey([]byte(pw), salt, iters, mem, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}
