package store

import (
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Project access modes.
const (
	AccessInherited  = "inherited"  // every workspace member may access
	AccessRestricted = "restricted" // owners, admins and the members listed on the project
)

// Project is the unit every runtime resource belongs to.
type Project struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspace_id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	AccessMode  string    `json:"access_mode"`
	Version     int       `json:"version"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// ProjectInput holds a project's writable fields as a request carries them.
type ProjectInput struct {
	WorkspaceID *string `json:"workspace_id"`
	Name        *string `json:"name"`
	Description *string `json:"description"`
	AccessMode  *string `json:"access_mode"`
}

// Validate checks the writable fields; create is true for POST, where workspace_id and name
// are required. Returns validation_failed listing every bad field.
func (in ProjectInput) Validate(create bool) error {
	var f fieldErrors
	if create && (in.WorkspaceID == nil || *in.WorkspaceID == "") {
		f.add("workspace_id", "is required")
	}
	if in.Name == nil {
		if create {
			f.add("name", "is required")
		}
	} else if n := strings.TrimSpace(*in.Name); n == "" || utf8.RuneCountInString(n) > 200 {
		f.add("name", "must be 1 to 200 characters")
	} else {
		f.name("name", n) // surrounding white space (a trailing newline too) is trimmed
	}
	if in.Description != nil && utf8.RuneCountInString(*in.Description) > 2000 {
		f.add("description", "must be at most 2000 characters")
	} else if in.Description != nil {
		f.text("description", *in.Description)
	}
	if in.AccessMode != nil && *in.AccessMode != AccessInherited && *in.AccessMode != AccessRestricted {
		f.add("access_mode", "must be inherited or restricted")
	}
	return f.err()
}

// CreateProject creates a project in a workspace, with its embedded warehouse "default".
// Returns validation_failed, not_found.
func (s *Store) CreateProject(in ProjectInput) (Project, error) {
	if err := in.Validate(true); err != nil {
		return Project{}, err
	}
	var p Project
	err := s.updateRuntime(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketWorkspaces).Get([]byte(*in.WorkspaceID)) == nil {
			return NotFound("workspace")
		}
		now := s.now()
		p = Project{ID: s.newID("prj_"), WorkspaceID: *in.WorkspaceID, AccessMode: AccessInherited, Version: 1, CreatedAt: now, UpdatedAt: now}
		p.apply(in)
		if err := putJSON(tx.Bucket(bucketProjects), []byte(p.ID), p); err != nil {
			return err
		}
		if err := tx.Bucket(bucketProjectsByWorkspace).Put(pairKey(p.WorkspaceID, p.ID), nil); err != nil {
			return err
		}
		return s.createDefaultWarehouse(tx, p.ID, now)
	})
	return p, err
}

func (p *Project) apply(in ProjectInput) {
	if in.Name != nil {
		p.Name = strings.TrimSpace(*in.Name)
	}
	if in.Description != nil {
		p.Description = *in.Description
	}
	if in.AccessMode != nil {
		p.AccessMode = *in.AccessMode
	}
}

func getProject(tx *bolt.Tx, id string) (Project, error) {
	var p Project
	err := getJSON(tx.Bucket(bucketProjects), []byte(id), "project", &p)
	return p, err
}

// Project returns one project. Returns not_found.
func (s *Store) Project(id string) (Project, error) {
	var p Project
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		p, err = getProject(tx, id)
		return err
	})
	return p, err
}

// IfMatchNever is the If-Match version of a header that no version matches: a weak entity
// tag (RFC 9110 compares If-Match strongly, so W/"1" never matches) or a malformed one.
const IfMatchNever = -1

// checkIfMatch enforces If-Match: ifMatch 0 means "any version". The 412 names the current
// version, so a client can tell a stale read from a malformed header.
func checkIfMatch(ifMatch, current int) error {
	switch {
	case ifMatch == 0 || ifMatch == current:
		return nil
	case ifMatch == IfMatchNever:
		return Errorf(CodePreconditionFailed, "If-Match must be one strong ETag this server sent, such as \"%d\" (the current version; weak W/ tags never match)", current)
	}
	return Errorf(CodePreconditionFailed, "the resource has changed: it is at version %d (ETag \"%d\"), not %d; read it again and retry", current, current, ifMatch)
}

// UpdateProject replaces a project's writable fields; fields absent from in keep their
// value. workspace_id can only be repeated, not changed. ifMatch is the version the caller
// last read (0: unconditional). Returns validation_failed, not_found, precondition_failed.
func (s *Store) UpdateProject(id string, in ProjectInput, ifMatch int) (Project, error) {
	if err := in.Validate(false); err != nil {
		return Project{}, err
	}
	var p Project
	err := s.updateRuntime(func(tx *bolt.Tx) error {
		var err error
		if p, err = getProject(tx, id); err != nil {
			return err
		}
		if in.WorkspaceID != nil && *in.WorkspaceID != p.WorkspaceID {
			return Invalid(FieldError{Field: "workspace_id", Message: "cannot be changed after creation"})
		}
		if err := checkIfMatch(ifMatch, p.Version); err != nil {
			return err
		}
		p.apply(in)
		p.Version++
		p.UpdatedAt = s.now()
		return putJSON(tx.Bucket(bucketProjects), []byte(p.ID), p)
	})
	return p, err
}

// ProjectFilter narrows a project list to what one caller may see.
type ProjectFilter struct {
	WorkspaceID string
	// OnlyIDs, when non-nil, is an allowlist (a project-restricted token).
	OnlyIDs []string
	// UserID and SeeRestricted: restricted projects are listed only when SeeRestricted (an
	// owner or admin) or when UserID is listed on the project.
	UserID        string
	SeeRestricted bool
}

// ListProjects lists a workspace's projects in creation order, one page at a time.
// Returns validation_failed (bad cursor).
func (s *Store) ListProjects(f ProjectFilter, page Page) ([]Project, string, error) {
	var out []Project
	var next string
	err := s.db.View(func(tx *bolt.Tx) error {
		pm := tx.Bucket(bucketProjectMembers)
		var err error
		out, next, err = scanPage(tx.Bucket(bucketProjectsByWorkspace), pairPrefix(f.WorkspaceID), page, func(id string) (Project, bool, error) {
			if f.OnlyIDs != nil && !contains(f.OnlyIDs, id) {
				return Project{}, false, nil
			}
			p, err := getProject(tx, id)
			if err != nil {
				return p, false, err
			}
			if p.AccessMode == AccessRestricted && !f.SeeRestricted && pm.Get(pairKey(id, f.UserID)) == nil {
				return p, false, nil
			}
			return p, true, nil
		})
		return err
	})
	return out, next, err
}

// ProjectAccess is a project with what one user may do with it, read in one transaction.
type ProjectAccess struct {
	Project Project
	// Role is the user's workspace role ("" when not a member).
	Role string
	// Listed says the user is listed on the project (matters when it is restricted).
	Listed bool
}

// ProjectAccessFor reads a project together with a user's role in its workspace and listing
// on it. Returns not_found.
func (s *Store) ProjectAccessFor(projectID, userID string) (ProjectAccess, error) {
	var a ProjectAccess
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		if a.Project, err = getProject(tx, projectID); err != nil {
			return err
		}
		if m, err := getMembership(tx, a.Project.WorkspaceID, userID); err == nil {
			a.Role = m.Role
		}
		a.Listed = tx.Bucket(bucketProjectMembers).Get(pairKey(projectID, userID)) != nil
		return nil
	})
	return a, err
}

// ProjectMembers lists the members listed on a project (those who may see it while it is
// restricted), ordered by user id.
func (s *Store) ProjectMembers(projectID string) ([]Member, error) {
	out := []Member{}
	err := s.db.View(func(tx *bolt.Tx) error {
		p, err := getProject(tx, projectID)
		if err != nil {
			return err
		}
		pre := pairPrefix(projectID)
		c := tx.Bucket(bucketProjectMembers).Cursor()
		for k, _ := c.Seek(pre); k != nil && hasPrefix(k, pre); k, _ = c.Next() {
			uid := pairSecond(k)
			u, err := getUser(tx, uid)
			if err != nil {
				return err
			}
			m, err := getMembership(tx, p.WorkspaceID, uid)
			if err != nil {
				return err
			}
			out = append(out, Member{UserID: uid, Email: u.Email, Name: u.Name, Role: m.Role})
		}
		return nil
	})
	return out, err
}

// SetProjectMembers replaces the list of members listed on a project. Every user must be a
// member of the project's workspace. Returns validation_failed, not_found.
func (s *Store) SetProjectMembers(projectID string, userIDs []string) error {
	return s.updateRuntime(func(tx *bolt.Tx) error {
		p, err := getProject(tx, projectID)
		if err != nil {
			return err
		}
		var f fieldErrors
		for i, uid := range userIDs {
			if _, err := getMembership(tx, p.WorkspaceID, uid); err != nil {
				f.add("user_ids["+itoa(i)+"]", "is not a member of the project's workspace")
			}
		}
		if err := f.err(); err != nil {
			return err
		}
		b := tx.Bucket(bucketProjectMembers)
		pre := pairPrefix(projectID)
		var old [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(pre); k != nil && hasPrefix(k, pre); k, _ = c.Next() {
			old = append(old, append([]byte(nil), k...))
		}
		for _, k := range old {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		for _, uid := range userIDs {
			if err := b.Put(pairKey(projectID, uid), nil); err != nil {
				return err
			}
		}
		return nil
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
