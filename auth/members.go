package auth

import "lookout/store"

// MemberRequest is the body that adds someone to a workspace.
type MemberRequest struct {
	Email    string `json:"email"`
	Name     string `json:"name"`
	Password string `json:"password"`
	Role     string `json:"role"`
}

// AddMember adds an account to a workspace (creating it when the e-mail address is new).
// Owners and admins add members; only an owner adds an owner.
// Returns validation_failed, forbidden, not_found, conflict, unavailable (ErrBusy).
func (s *Service) AddMember(p *Principal, wsID string, req MemberRequest) (store.Member, error) {
	role, err := s.Workspace(p, wsID, true)
	if err != nil {
		return store.Member{}, err
	}
	if req.Role == "" {
		req.Role = store.RoleMember
	}
	if !store.ValidRole(req.Role) {
		return store.Member{}, store.Invalid(store.FieldError{Field: "role", Message: "must be owner, admin or member"})
	}
	if req.Role == store.RoleOwner && role != store.RoleOwner {
		return store.Member{}, forbidden("only an owner may add an owner")
	}
	if err := store.ValidateEmail(store.NormalizeEmail(req.Email)); err != nil {
		return store.Member{}, err
	}
	nu := store.NewUser{Email: req.Email, Name: req.Name}
	if _, err := s.store.UserByEmail(req.Email); store.IsCode(err, store.CodeNotFound) {
		// A new account: the appliance sends no invitations, so the adder sets a password.
		if err := ValidatePassword(req.Password); err != nil {
			return store.Member{}, err
		}
		var herr error
		if err := s.withHashSlot(func() { nu.PasswordHash, herr = HashPassword(req.Password) }); err != nil {
			return store.Member{}, err
		}
		if herr != nil {
			return store.Member{}, herr
		}
	} else if err != nil {
		return store.Member{}, err
	} else if req.Password != "" {
		return store.Member{}, store.Invalid(store.FieldError{Field: "password", Message: "must be empty: the account exists and keeps its own password"})
	}
	return s.store.AddMember(wsID, nu, req.Role)
}

// SetRole changes a member's role; only an owner changes roles. Demotion below admin
// revokes the member's write-scoped tokens for good.
// Returns validation_failed, forbidden, not_found, conflict.
func (s *Service) SetRole(p *Principal, wsID, userID, role string) (store.Member, error) {
	mine, err := s.Workspace(p, wsID, true)
	if err != nil {
		return store.Member{}, err
	}
	if mine != store.RoleOwner {
		return store.Member{}, forbidden("only an owner may change roles")
	}
	return s.store.SetRole(wsID, userID, role)
}

// RemoveMember removes someone from a workspace. Owners and admins remove members and
// admins; only an owner removes an owner. Returns forbidden, not_found, conflict.
func (s *Service) RemoveMember(p *Principal, wsID, userID string) error {
	mine, err := s.Workspace(p, wsID, true)
	if err != nil {
		return err
	}
	m, err := s.store.Membership(wsID, userID)
	if err != nil {
		return err
	}
	if m.Role == store.RoleOwner && mine != store.RoleOwner {
		return forbidden("only an owner may remove an owner")
	}
	return s.store.RemoveMember(wsID, userID)
}
