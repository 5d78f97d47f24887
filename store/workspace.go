package store

import (
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Roles of a workspace membership.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// ValidRole reports whether r is a membership role.
func ValidRole(r string) bool { return r == RoleOwner || r == RoleAdmin || r == RoleMember }

// CanWrite reports whether a role may change a workspace's resources.
func CanWrite(role string) bool { return role == RoleOwner || role == RoleAdmin }

// Workspace groups projects and the people who work on them.
type Workspace struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role,omitempty"` // the reader's role, filled in by lists for one user
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Membership gives a user a role in a workspace.
type Membership struct {
	WorkspaceID string    `json:"workspace_id"`
	UserID      string    `json:"user_id"`
	Role        string    `json:"role"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Member is a membership joined with its account, as the members list shows it.
type Member struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Name   string `json:"name"`
	Role   string `json:"role"`
}

func validateWorkspaceName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return "", Invalid(FieldError{Field: "name", Message: "must be 1 to 200 characters"})
	}
	var f fieldErrors
	f.name("name", name)
	return name, f.err()
}

func (s *Store) createWorkspace(tx *bolt.Tx, ownerID, name string, now time.Time) (Workspace, error) {
	name, err := validateWorkspaceName(name)
	if err != nil {
		return Workspace{}, err
	}
	ws := Workspace{ID: s.newID("ws_"), Name: name, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := putJSON(tx.Bucket(bucketWorkspaces), []byte(ws.ID), ws); err != nil {
		return Workspace{}, err
	}
	if err := putMembership(tx, Membership{WorkspaceID: ws.ID, UserID: ownerID, Role: RoleOwner, CreatedAt: now, UpdatedAt: now}); err != nil {
		return Workspace{}, err
	}
	ws.Role = RoleOwner
	return ws, nil
}

func putMembership(tx *bolt.Tx, m Membership) error {
	if err := putJSON(tx.Bucket(bucketMemberships), pairKey(m.WorkspaceID, m.UserID), m); err != nil {
		return err
	}
	return tx.Bucket(bucketMembershipsByUser).Put(pairKey(m.UserID, m.WorkspaceID), nil)
}

func getMembership(tx *bolt.Tx, wsID, userID string) (Membership, error) {
	var m Membership
	err := getJSON(tx.Bucket(bucketMemberships), pairKey(wsID, userID), "membership", &m)
	return m, err
}

// CreateWorkspace creates a workspace owned by userID. Returns validation_failed, not_found.
func (s *Store) CreateWorkspace(userID, name string) (Workspace, error) {
	var ws Workspace
	err := s.updateIdentity(func(tx *bolt.Tx) error {
		if _, err := getUser(tx, userID); err != nil {
			return err
		}
		var err error
		ws, err = s.createWorkspace(tx, userID, name, s.now())
		return err
	})
	return ws, err
}

// Workspace returns one workspace. Returns not_found.
func (s *Store) Workspace(id string) (Workspace, error) {
	var ws Workspace
	err := s.db.View(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bucketWorkspaces), []byte(id), "workspace", &ws)
	})
	return ws, err
}

// Membership returns a user's membership of a workspace. Returns not_found.
func (s *Store) Membership(wsID, userID string) (Membership, error) {
	var m Membership
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		m, err = getMembership(tx, wsID, userID)
		return err
	})
	return m, err
}

// WorkspacesOf lists the workspaces a user belongs to, with the user's role in each.
func (s *Store) WorkspacesOf(userID string) ([]Workspace, error) {
	out := []Workspace{}
	err := s.db.View(func(tx *bolt.Tx) error {
		p := pairPrefix(userID)
		c := tx.Bucket(bucketMembershipsByUser).Cursor()
		for k, _ := c.Seek(p); k != nil && hasPrefix(k, p); k, _ = c.Next() {
			wsID := pairSecond(k)
			var ws Workspace
			if err := getJSON(tx.Bucket(bucketWorkspaces), []byte(wsID), "workspace", &ws); err != nil {
				return err
			}
			m, err := getMembership(tx, wsID, userID)
			if err != nil {
				return err
			}
			ws.Role = m.Role
			out = append(out, ws)
		}
		return nil
	})
	return out, err
}

// Members lists a workspace's members, ordered by user id (account creation order).
func (s *Store) Members(wsID string) ([]Member, error) {
	out := []Member{}
	err := s.db.View(func(tx *bolt.Tx) error {
		p := pairPrefix(wsID)
		c := tx.Bucket(bucketMemberships).Cursor()
		for k, v := c.Seek(p); k != nil && hasPrefix(k, p); k, v = c.Next() {
			var m Membership
			if err := getJSONBytes(v, &m); err != nil {
				return err
			}
			u, err := getUser(tx, m.UserID)
			if err != nil {
				return err
			}
			out = append(out, Member{UserID: u.ID, Email: u.Email, Name: u.Name, Role: m.Role})
		}
		return nil
	})
	return out, err
}

// AddMember adds an account to a workspace with a role, creating the account when the
// e-mail address is new (nu.PasswordHash must then be set; the appliance sends no
// invitations). Returns validation_failed, not_found, conflict (already a member).
func (s *Store) AddMember(wsID string, nu NewUser, role string) (Member, error) {
	var out Member
	err := s.updateIdentity(func(tx *bolt.Tx) error {
		if !ValidRole(role) {
			return Invalid(FieldError{Field: "role", Message: "must be owner, admin or member"})
		}
		if tx.Bucket(bucketWorkspaces).Get([]byte(wsID)) == nil {
			return NotFound("workspace")
		}
		now := s.now()
		var u User
		if id := tx.Bucket(bucketUsersByEmail).Get([]byte(NormalizeEmail(nu.Email))); id != nil {
			r, err := getUser(tx, string(id))
			if err != nil {
				return err
			}
			u = r.User
			if _, err := getMembership(tx, wsID, u.ID); err == nil {
				return Errorf(CodeConflict, "this account is already a member of the workspace")
			}
		} else {
			var err error
			if u, err = s.createUser(tx, nu, now); err != nil {
				return err
			}
		}
		out = Member{UserID: u.ID, Email: u.Email, Name: u.Name, Role: role}
		return putMembership(tx, Membership{WorkspaceID: wsID, UserID: u.ID, Role: role, CreatedAt: now, UpdatedAt: now})
	})
	return out, err
}

// countOwners counts the owners of a workspace.
func countOwners(tx *bolt.Tx, wsID string) (int, error) {
	n := 0
	p := pairPrefix(wsID)
	c := tx.Bucket(bucketMemberships).Cursor()
	for k, v := c.Seek(p); k != nil && hasPrefix(k, p); k, v = c.Next() {
		var m Membership
		if err := getJSONBytes(v, &m); err != nil {
			return 0, err
		}
		if m.Role == RoleOwner {
			n++
		}
	}
	return n, nil
}

// SetRole changes a member's role. Demoting a member below admin revokes, in the same
// transaction and for good, every Management Token of theirs in this workspace that holds a
// :write scope (reason owner_demoted). A workspace keeps at least one owner.
// Returns validation_failed, not_found, conflict.
func (s *Store) SetRole(wsID, userID, role string) (Member, error) {
	var out Member
	err := s.updateIdentity(func(tx *bolt.Tx) error {
		if !ValidRole(role) {
			return Invalid(FieldError{Field: "role", Message: "must be owner, admin or member"})
		}
		m, err := getMembership(tx, wsID, userID)
		if err != nil {
			return err
		}
		if m.Role == RoleOwner && role != RoleOwner {
			n, err := countOwners(tx, wsID)
			if err != nil {
				return err
			}
			if n <= 1 {
				return Errorf(CodeConflict, "a workspace must keep at least one owner")
			}
		}
		now := s.now()
		if m.Role != role {
			m.Role, m.UpdatedAt = role, now
			if err := putMembership(tx, m); err != nil {
				return err
			}
		}
		if !CanWrite(role) {
			if err := revokeUserTokens(tx, userID, wsID, true, ReasonOwnerDemoted, now); err != nil {
				return err
			}
		}
		u, err := getUser(tx, userID)
		if err != nil {
			return err
		}
		out = Member{UserID: u.ID, Email: u.Email, Name: u.Name, Role: m.Role}
		return nil
	})
	return out, err
}

// RemoveMember removes a user from a workspace, takes them off the workspace's restricted
// projects and revokes their Management Tokens for the workspace (reason owner_removed), so
// adding them back later does not revive old tokens. Returns not_found, conflict (last owner).
func (s *Store) RemoveMember(wsID, userID string) error {
	return s.updateIdentity(func(tx *bolt.Tx) error {
		m, err := getMembership(tx, wsID, userID)
		if err != nil {
			return err
		}
		if m.Role == RoleOwner {
			n, err := countOwners(tx, wsID)
			if err != nil {
				return err
			}
			if n <= 1 {
				return Errorf(CodeConflict, "a workspace must keep at least one owner")
			}
		}
		if err := tx.Bucket(bucketMemberships).Delete(pairKey(wsID, userID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMembershipsByUser).Delete(pairKey(userID, wsID)); err != nil {
			return err
		}
		pm := tx.Bucket(bucketProjectMembers)
		p := pairPrefix(wsID)
		c := tx.Bucket(bucketProjectsByWorkspace).Cursor()
		for k, _ := c.Seek(p); k != nil && hasPrefix(k, p); k, _ = c.Next() {
			if err := pm.Delete(pairKey(pairSecond(k), userID)); err != nil {
				return err
			}
		}
		return revokeUserTokens(tx, userID, wsID, false, ReasonOwnerRemoved, s.now())
	})
}
