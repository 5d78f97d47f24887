package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MasterKeySize is the length of the master key in bytes (AES-256).
const MasterKeySize = 32

// KeyOptions loosen LoadMasterKey's checks.
type KeyOptions struct {
	// InsecurePermissions accepts a key file that its group or other accounts may access
	// (--insecure-key-permissions), for file systems that cannot express mode 0600.
	InsecurePermissions bool
}

// ErrKeyPermissions is returned (wrapped) when the master key file is open to its group or
// to other accounts.
var ErrKeyPermissions = errors.New("master key file permissions are too open")

// LoadMasterKey returns the master key. A non-empty env value (base64 or hex of 32 bytes)
// wins; otherwise the key file at path is read, or created with 32 random bytes and mode
// 0600 when it does not exist. The key never goes into the database, so a copy of the data
// file alone discloses no secret. An existing key file that the group or other accounts may
// read or write is refused (ErrKeyPermissions), like ssh refuses an open private key:
// whoever reads it reads every sealed secret, unless o.InsecurePermissions is set.
func LoadMasterKey(path, env string, o KeyOptions) ([]byte, error) {
	key, err := ReadMasterKey(path, env, o)
	if err != nil || key != nil {
		return key, err
	}
	return createKeyFile(path, o)
}

// createKeyFile makes a new key file atomically: the key is written and synced under a
// temporary name, then linked to path, which fails if path exists. So a crash never leaves
// an empty or partial key file, and two processes racing end up with one key.
func createKeyFile(path string, o KeyOptions) ([]byte, error) {
	key := make([]byte, MasterKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".lookout.key-*")
	if err != nil {
		return nil, fmt.Errorf("create master key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(key)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write master key: %w", err)
	}
	if err := os.Link(tmp, path); errors.Is(err, os.ErrExist) {
		return ReadMasterKey(path, "", o) // another process made it first
	} else if err != nil {
		return nil, fmt.Errorf("create master key: %w", err)
	}
	// Sync the directory too: secrets sealed with this key must never outlive the
	// file's directory entry after a crash.
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return nil, fmt.Errorf("sync master key directory: %w", err)
		}
	}
	return key, nil
}

// ReadMasterKey is LoadMasterKey for commands that must change nothing (check): the env
// value wins, else the key file is read, with the same permission rule; a missing file
// gives (nil, nil) and is never created.
func ReadMasterKey(path, env string, o KeyOptions) ([]byte, error) {
	if env = strings.TrimSpace(env); env != "" {
		return parseKey(env)
	}
	raw, err := readKeyFile(path, o)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case errors.Is(err, ErrKeyPermissions):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("read master key: %w", err)
	case len(raw) == MasterKeySize:
		return raw, nil
	}
	return parseKey(strings.TrimSpace(string(raw)))
}

// readKeyFile reads the key file, checking the mode of the file it opened (not of a path
// looked up earlier) so the check and the read concern the same file.
func readKeyFile(path string, o KeyOptions) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && !o.InsecurePermissions {
		return nil, fmt.Errorf("%w: %s has mode %04o, so other accounts may read it; run chmod 600 %s (or start with --insecure-key-permissions where the file system cannot express 0600)", ErrKeyPermissions, path, perm, path)
	}
	return io.ReadAll(io.LimitReader(f, 4096))
}

func parseKey(s string) ([]byte, error) {
	for _, dec := range []func(string) ([]byte, error){
		hex.DecodeString, base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString,
	} {
		if k, err := dec(s); err == nil && len(k) == MasterKeySize {
			return k, nil
		}
	}
	return nil, errors.New("master key must be 32 bytes, given raw in the key file or as hex or base64")
}

// Sealer encrypts secrets at rest with AES-256-GCM. Each value gets a fresh random nonce; the
// caller passes the owning resource's id as additional data, so a sealed value copied onto
// another record does not open.
type Sealer struct {
	aead cipher.AEAD
	key  []byte
}

// NewSealer returns a Sealer for a 32-byte master key.
func NewSealer(masterKey []byte) (*Sealer, error) {
	if len(masterKey) != MasterKeySize {
		return nil, errors.New("master key must be 32 bytes")
	}
	block, err := aes.NewCipher(masterKey)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead, key: append([]byte(nil), masterKey...)}, nil
}

// Seal encrypts plaintext; the result is nonce || ciphertext || tag.
func (s *Sealer) Seal(plaintext, additional []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return s.aead.Seal(nonce, nonce, plaintext, additional)
}

// Unseal reverses Seal; it fails if the value was altered or sealed for other additional data.
func (s *Sealer) Unseal(sealed, additional []byte) ([]byte, error) {
	ns := s.aead.NonceSize()
	if len(sealed) < ns+s.aead.Overhead() {
		return nil, errors.New("sealed value too short")
	}
	pt, err := s.aead.Open(nil, sealed[:ns], sealed[ns:], additional)
	if err != nil {
		return nil, errors.New("sealed value does not open with this master key")
	}
	return pt, nil
}

// DeriveKey returns a 32-byte key for one purpose ("session-jwt"), so the master key itself
// is used for nothing but sealing.
func (s *Sealer) DeriveKey(purpose string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("lookout/" + purpose))
	return m.Sum(nil)
}
