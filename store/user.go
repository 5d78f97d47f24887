package store

import (
	"net/mail"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// User is a console account. Its password hash is kept apart (userRecord) so that a User
// value can never carry it into a response.
type User struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

type userRecord struct {
	User
	PasswordHash string `json:"password_hash"`
}

// NewUser describes an account to create; PasswordHash is already hashed (auth.HashPassword).
type NewUser struct {
	Email        string
	Name         string
	PasswordHash string
}

// NormalizeEmail lower-cases and trims an address; accounts are unique by this form.
func NormalizeEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// ValidateEmail checks an address is a bare, plausible e-mail address.
func ValidateEmail(s string) error {
	var f fieldErrors
	a, err := mail.ParseAddress(s)
	switch {
	case s == "":
		f.add("email", "is required")
	case len(s) > 254 || err != nil || a.Address != s || !strings.Contains(s, "@"):
		f.add("email", "is not a valid e-mail address")
	}
	return f.err()
}

func (u NewUser) validate() error {
	var f fieldErrors
	if err := ValidateEmail(u.Email); err != nil {
		f = append(f, err.(*Error).Fields...)
	}
	if n := strings.TrimSpace(u.Name); len(n) > 200 {
		f.add("name", "must be at most 200 characters")
	}
	f.name("name", strings.TrimSpace(u.Name))
	if u.PasswordHash == "" {
		f.add("password", "is required")
	}
	return f.err()
}

func (s *Store) createUser(tx *bolt.Tx, nu NewUser, now time.Time) (User, error) {
	nu.Email = NormalizeEmail(nu.Email)
	if err := nu.validate(); err != nil {
		return User{}, err
	}
	byEmail := tx.Bucket(bucketUsersByEmail)
	if byEmail.Get([]byte(nu.Email)) != nil {
		return User{}, Errorf(CodeConflict, "an account with this e-mail address already exists")
	}
	name := strings.TrimSpace(nu.Name)
	if name == "" {
		name = nu.Email
	}
	u := User{ID: s.newID("usr_"), Email: nu.Email, Name: name, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := putJSON(tx.Bucket(bucketUsers), []byte(u.ID), userRecord{User: u, PasswordHash: nu.PasswordHash}); err != nil {
		return User{}, err
	}
	return u, byEmail.Put([]byte(nu.Email), []byte(u.ID))
}

func getUser(tx *bolt.Tx, id string) (userRecord, error) {
	var r userRecord
	err := getJSON(tx.Bucket(bucketUsers), []byte(id), "user", &r)
	return r, err
}

// errRegistrationClosed is the answer to a registration once an account exists.
func errRegistrationClosed() error {
	return Errorf(CodeForbidden, "registration is closed: this Lookout already has an owner; ask a workspace owner or admin to add you")
}

// RegistrationOpen reports, in a read transaction, whether console registration is still
// open (no account exists). Returns forbidden when it is closed.
func (s *Store) RegistrationOpen() error {
	return s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketUsers).Cursor().First(); k != nil {
			return errRegistrationClosed()
		}
		return nil
	})
}

// RegisterOwner creates the first account and its first workspace, with the account as owner.
// With firstOnly set it fails with forbidden once any account exists (console registration
// closes after the first user). Returns validation_failed, conflict or forbidden.
func (s *Store) RegisterOwner(nu NewUser, workspaceName string, firstOnly bool) (User, Workspace, error) {
	var u User
	var ws Workspace
	err := s.updateIdentity(func(tx *bolt.Tx) error {
		if firstOnly {
			if k, _ := tx.Bucket(bucketUsers).Cursor().First(); k != nil {
				return errRegistrationClosed()
			}
		}
		now := s.now()
		var err error
		if u, err = s.createUser(tx, nu, now); err != nil {
			return err
		}
		ws, err = s.createWorkspace(tx, u.ID, workspaceName, now)
		return err
	})
	return u, ws, err
}

// UserCredentials returns the account with an e-mail address and its password hash.
// Returns not_found.
func (s *Store) UserCredentials(email string) (User, string, error) {
	var r userRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketUsersByEmail).Get([]byte(NormalizeEmail(email)))
		if id == nil {
			return NotFound("user")
		}
		var err error
		r, err = getUser(tx, string(id))
		return err
	})
	return r.User, r.PasswordHash, err
}

// User returns one account. Returns not_found.
func (s *Store) User(id string) (User, error) {
	var r userRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		r, err = getUser(tx, id)
		return err
	})
	return r.User, err
}

// UserByEmail returns the account with an e-mail address. Returns not_found.
func (s *Store) UserByEmail(email string) (User, error) {
	u, _, err := s.UserCredentials(email)
	return u, err
}
