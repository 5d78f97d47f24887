package store

import (
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Credential types.
const (
	CredentialPassword = "password"
	CredentialToken    = "token"
)

// WarehouseCredential is the masked view of a warehouse credential: the secret itself is
// write-only and kept sealed (credentialRecord).
type WarehouseCredential struct {
	Meta
	Name       string     `json:"name"`
	Type       string     `json:"type"`
	Username   string     `json:"username"`
	SecretSet  bool       `json:"secret_set"`
	SecretHint string     `json:"secret_hint"`
	RotatedAt  *time.Time `json:"rotated_at"`
}

type credentialRecord struct {
	WarehouseCredential
	SealedSecret []byte `json:"sealed_secret"`
}

// CredentialInput is a credential's writable fields; Secret is write-only.
type CredentialInput struct {
	ProjectID *string `json:"project_id"`
	Name      *string `json:"name"`
	Type      *string `json:"type"`
	Username  *string `json:"username"`
	Secret    *string `json:"secret"`
}

// secretHint shows the last four characters of a long secret, nothing of a short one.
func secretHint(secret string) string {
	if utf8.RuneCountInString(secret) < 12 {
		return "****"
	}
	r := []rune(secret)
	return "****" + string(r[len(r)-4:])
}

func (c *credentialRecord) apply(in CredentialInput) {
	if in.Name != nil {
		c.Name = strings.TrimSpace(*in.Name)
	}
	if in.Type != nil {
		c.Type = *in.Type
	}
	if in.Username != nil {
		c.Username = *in.Username
	}
}

func (c *credentialRecord) validate(secret *string) error {
	var f fieldErrors
	if n := utf8.RuneCountInString(c.Name); n == 0 || n > 200 {
		f.add("name", "must be 1 to 200 characters")
	}
	f.name("name", c.Name)
	switch c.Type {
	case CredentialPassword:
		if c.Username == "" || len(c.Username) > 200 {
			f.add("username", "must be 1 to 200 characters for a password credential")
		}
	case CredentialToken:
		if len(c.Username) > 200 {
			f.add("username", "must be at most 200 characters")
		}
	default:
		f.add("type", "must be password or token")
	}
	if secret != nil && (*secret == "" || len(*secret) > 4096) {
		f.add("secret", "must be 1 to 4096 bytes")
	}
	return f.err()
}

// seal encrypts a secret for the record with id; the id is the additional data.
func (s *Store) seal(id, secret string) ([]byte, error) {
	if s.sealer == nil {
		return nil, Errorf(CodeInternal, "no master key loaded")
	}
	return s.sealer.Seal([]byte(secret), []byte(id)), nil
}

// CreateCredential stores a warehouse credential with its secret sealed. Returns
// validation_failed, not_found.
func (s *Store) CreateCredential(projectID string, in CredentialInput) (WarehouseCredential, error) {
	var c credentialRecord
	err := s.db.Update(func(tx *bolt.Tx) error {
		c = credentialRecord{WarehouseCredential: WarehouseCredential{Meta: Meta{ProjectID: projectID}}}
		c.apply(in)
		if in.Secret == nil {
			return Invalid(FieldError{Field: "secret", Message: "is required"})
		}
		if err := c.validate(in.Secret); err != nil {
			return err
		}
		c.ID = s.newID(KindCredential.prefix)
		if err := s.setSecret(&c, *in.Secret); err != nil {
			return err
		}
		return s.insertRes(tx, KindCredential, &c, s.now())
	})
	return c.WarehouseCredential, err
}

func (s *Store) setSecret(c *credentialRecord, secret string) error {
	sealed, err := s.seal(c.ID, secret)
	if err != nil {
		return err
	}
	now := s.now()
	c.SealedSecret, c.SecretSet, c.SecretHint, c.RotatedAt = sealed, true, secretHint(secret), &now
	return nil
}

// UpdateCredential replaces a credential's writable fields; a secret in the input rotates
// it (rotated_at moves), no secret keeps the stored one.
// Returns validation_failed, not_found, precondition_failed.
func (s *Store) UpdateCredential(projectID, id string, in CredentialInput, ifMatch int) (WarehouseCredential, error) {
	c, err := updateRes(s, KindCredential, projectID, id, ifMatch, func(_ *bolt.Tx, c *credentialRecord) error {
		c.apply(in)
		if err := c.validate(in.Secret); err != nil {
			return err
		}
		if in.Secret != nil {
			return s.setSecret(c, *in.Secret)
		}
		return nil
	})
	return c.WarehouseCredential, err
}

// Credential returns a credential's masked view. Returns not_found.
func (s *Store) Credential(projectID, id string) (WarehouseCredential, error) {
	c, err := readOne[credentialRecord](s, KindCredential, projectID, id)
	return c.WarehouseCredential, err
}

// CredentialSecret unseals a credential's secret, for the warehouse engine that connects
// with it. Returns not_found.
func (s *Store) CredentialSecret(projectID, id string) (string, error) {
	c, err := readOne[credentialRecord](s, KindCredential, projectID, id)
	if err != nil {
		return "", err
	}
	if s.sealer == nil {
		return "", Errorf(CodeInternal, "no master key loaded")
	}
	pt, err := s.sealer.Unseal(c.SealedSecret, []byte(c.ID))
	return string(pt), err
}

// ListCredentials lists a project's credentials (masked); typ "" lists all.
func (s *Store) ListCredentials(projectID, typ string, page Page) ([]WarehouseCredential, string, error) {
	var recs []credentialRecord
	var next string
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		recs, next, err = listRes[credentialRecord](tx, KindCredential, projectID, page, func(c *credentialRecord) bool {
			return typ == "" || c.Type == typ
		})
		return err
	})
	out := make([]WarehouseCredential, len(recs))
	for i := range recs {
		out[i] = recs[i].WarehouseCredential
	}
	return out, next, err
}
