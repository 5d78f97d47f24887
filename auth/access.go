package auth

import (
	"lookout/store"
)

// RequireScope is the scope stage of CONTRACTS §2 for a Management Token (a session has no
// scopes: its role decides). Returns forbidden.
func RequireScope(p *Principal, scope string) error {
	if p.Token == nil {
		return nil
	}
	for _, s := range p.Token.Scopes {
		if s == scope {
			return nil
		}
	}
	return forbidden("the Management Token lacks the %s scope", scope)
}

// Workspace checks that the caller may act in a workspace (write: change it) and returns
// their role. A workspace the caller may not see (another workspace than the token's, one
// the user is not a member of) answers not_found exactly like an id that does not exist, so
// ids cannot be probed; a member who may see it but not change it gets forbidden.
// Returns not_found, forbidden.
func (s *Service) Workspace(p *Principal, wsID string, write bool) (string, error) {
	role := p.Role
	if p.Token != nil {
		if wsID != p.Token.WorkspaceID {
			return "", store.NotFound("workspace")
		}
	} else {
		m, err := s.store.Membership(wsID, p.UserID)
		if store.IsCode(err, store.CodeNotFound) {
			return "", store.NotFound("workspace")
		}
		if err != nil {
			return "", err
		}
		role = m.Role
	}
	if write && !store.CanWrite(role) {
		return "", forbidden("only workspace owners and admins may change this")
	}
	return role, nil
}

// Project checks that the caller may act on a project and returns it. A project the caller
// may not see (outside the token's allowlist or workspace, in a workspace the user is not a
// member of, restricted and not listing the user) answers exactly what an unknown id
// answers, not_found "project not found", so nobody learns which ids exist elsewhere. The
// allowlist is checked before the project is read, so a restricted token does not even
// touch other projects. forbidden is kept for a project the caller may see but not change.
// Returns not_found, forbidden.
func (s *Service) Project(p *Principal, projectID string, write bool) (store.Project, error) {
	hidden := store.NotFound("project")
	if t := p.Token; t != nil && t.Restricted() && !contains(t.ProjectIDs, projectID) {
		return store.Project{}, hidden
	}
	a, err := s.store.ProjectAccessFor(projectID, p.UserID)
	if err != nil {
		return store.Project{}, err
	}
	if p.Token != nil && a.Project.WorkspaceID != p.Token.WorkspaceID {
		return store.Project{}, hidden
	}
	if a.Role == "" {
		return store.Project{}, hidden
	}
	if a.Project.AccessMode == store.AccessRestricted && !store.CanWrite(a.Role) && !a.Listed {
		return store.Project{}, hidden
	}
	if write && !store.CanWrite(a.Role) {
		return store.Project{}, forbidden("only workspace owners and admins may change this")
	}
	return a.Project, nil
}

// CreateProjectAllowed checks that the caller may create projects at all: a
// project-restricted token may not (a new project is outside every allowlist). Whether the
// caller may write to the target workspace is Workspace's question. Returns forbidden.
func (s *Service) CreateProjectAllowed(p *Principal) error {
	if p.Token != nil && p.Token.Restricted() {
		return forbidden("creating projects requires a workspace-wide Management Token")
	}
	return nil
}

// ProjectFilter is the list filter that shows a caller only the projects they may access.
func (s *Service) ProjectFilter(p *Principal, wsID, role string) store.ProjectFilter {
	f := store.ProjectFilter{WorkspaceID: wsID, UserID: p.UserID, SeeRestricted: store.CanWrite(role)}
	if p.Token != nil && p.Token.Restricted() {
		f.OnlyIDs = p.Token.ProjectIDs
	}
	return f
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
