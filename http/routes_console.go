package http

import (
	"net/http"

	"lookout/auth"
	"lookout/store"
)

// registerAuthRoutes: registration, sign-in, sign-out and the signed-in user (console only;
// excluded from the Management API by the spec).
func (s *Server) registerAuthRoutes(m *mux) {
	m.handle(http.MethodPost, "/api/v1/auth/register", route{body: true, perAddress: s.registerLimit, refusal: "too many registration attempts from this address; wait and try again"}, s.handleRegister)
	m.handle(http.MethodPost, "/api/v1/auth/login", route{body: true, perAddress: s.loginLimit, refusal: "too many sign-in attempts from this address; wait and try again"}, s.handleLogin)
	m.handle(http.MethodPost, "/api/v1/auth/logout", route{auth: authSession}, s.handleLogout)
	m.handle(http.MethodGet, "/api/v1/me", route{auth: authSession}, s.handleMe)
}

type credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name"`
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request, c *call) error {
	var in credentials
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	u, ws, tok, err := s.auth.Register(in.Email, in.Password, in.Name)
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, map[string]any{"user": u, "workspace": ws, "token": tok})
	return nil
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request, c *call) error {
	var in struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	tok, ses, u, err := s.auth.Login(in.Email, in.Password)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"token": tok, "expires_at": ses.ExpiresAt, "user": u})
	return nil
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.auth.Logout(c.p); err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"signed_out": true})
	return nil
}

func (s *Server) handleMe(w http.ResponseWriter, r *http.Request, c *call) error {
	u, err := s.store.User(c.p.UserID)
	if err != nil {
		return err
	}
	wss, err := s.store.WorkspacesOf(u.ID)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"user": u, "workspaces": wss})
	return nil
}

// registerWorkspaceRoutes: workspaces and their members (console only).
func (s *Server) registerWorkspaceRoutes(m *mux) {
	sess := route{auth: authSession}
	withBody := route{auth: authSession, body: true}
	m.handle(http.MethodGet, "/api/v1/workspaces", sess, s.handleListWorkspaces)
	m.handle(http.MethodPost, "/api/v1/workspaces", withBody, s.handleCreateWorkspace)
	m.handle(http.MethodGet, "/api/v1/workspaces/:id/members", sess, s.handleListMembers)
	m.handle(http.MethodPost, "/api/v1/workspaces/:id/members", withBody, s.handleAddMember)
	m.handle(http.MethodPut, "/api/v1/workspaces/:id/members/:user_id", withBody, s.handleSetRole)
	m.handle(http.MethodDelete, "/api/v1/workspaces/:id/members/:user_id", sess, s.handleRemoveMember)
}

func (s *Server) handleListWorkspaces(w http.ResponseWriter, r *http.Request, c *call) error {
	wss, err := s.store.WorkspacesOf(c.p.UserID)
	if err != nil {
		return err
	}
	writeList(w, wss, "")
	return nil
}

func (s *Server) handleCreateWorkspace(w http.ResponseWriter, r *http.Request, c *call) error {
	var in struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	ws, err := s.store.CreateWorkspace(c.p.UserID, in.Name)
	if err != nil {
		return err
	}
	writeResource(w, http.StatusCreated, ws, ws.Version)
	return nil
}

func (s *Server) handleListMembers(w http.ResponseWriter, r *http.Request, c *call) error {
	wsID := c.params.ByName("id")
	if _, err := s.auth.Workspace(c.p, wsID, false); err != nil {
		return err
	}
	ms, err := s.store.Members(wsID)
	if err != nil {
		return err
	}
	writeList(w, ms, "")
	return nil
}

func (s *Server) handleAddMember(w http.ResponseWriter, r *http.Request, c *call) error {
	var in auth.MemberRequest
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	mem, err := s.auth.AddMember(c.p, c.params.ByName("id"), in)
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, mem)
	return nil
}

func (s *Server) handleSetRole(w http.ResponseWriter, r *http.Request, c *call) error {
	var in struct {
		Role string `json:"role"`
	}
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	mem, err := s.auth.SetRole(c.p, c.params.ByName("id"), c.params.ByName("user_id"), in.Role)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, mem)
	return nil
}

func (s *Server) handleRemoveMember(w http.ResponseWriter, r *http.Request, c *call) error {
	uid := c.params.ByName("user_id")
	if err := s.auth.RemoveMember(c.p, c.params.ByName("id"), uid); err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"id": uid, "deleted": true})
	return nil
}

// registerTokenRoutes: the personal Management Token screen (console only).
func (s *Server) registerTokenRoutes(m *mux) {
	sess := route{auth: authSession}
	m.handle(http.MethodGet, "/api/v1/management-tokens", sess, s.handleListTokens)
	m.handle(http.MethodPost, "/api/v1/management-tokens", route{auth: authSession, body: true}, s.handleCreateToken)
	m.handle(http.MethodGet, "/api/v1/management-tokens/:id", sess, s.handleGetToken)
	m.handle(http.MethodDelete, "/api/v1/management-tokens/:id", sess, s.handleRevokeToken)
	m.handle(http.MethodPost, "/api/v1/management-tokens/:id/disable", sess, s.handleSetTokenEnabled(false))
	m.handle(http.MethodPost, "/api/v1/management-tokens/:id/enable", sess, s.handleSetTokenEnabled(true))
}

// createdToken is the create response: the record plus the whole secret, this once.
type createdToken struct {
	store.ManagementToken
	Token string `json:"token"`
}

func (s *Server) handleCreateToken(w http.ResponseWriter, r *http.Request, c *call) error {
	var in auth.TokenRequest
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	if in.ExpiresAt != nil {
		e := in.ExpiresAt.UTC()
		in.ExpiresAt = &e
	}
	tok, t, err := auth.CreateToken(s.store, c.p.UserID, in)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeResource(w, http.StatusCreated, createdToken{ManagementToken: t, Token: tok}, t.Version)
	return nil
}

func (s *Server) handleListTokens(w http.ResponseWriter, r *http.Request, c *call) error {
	ts, err := s.store.TokensOf(c.p.UserID)
	if err != nil {
		return err
	}
	writeList(w, ts, "")
	return nil
}

func (s *Server) handleGetToken(w http.ResponseWriter, r *http.Request, c *call) error {
	t, err := s.store.Token(c.p.UserID, c.params.ByName("id"))
	if err != nil {
		return err
	}
	writeResource(w, http.StatusOK, t, t.Version)
	return nil
}

func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request, c *call) error {
	t, err := s.store.RevokeToken(c.p.UserID, c.params.ByName("id"), store.ReasonRevoked)
	if err != nil {
		return err
	}
	writeResource(w, http.StatusOK, t, t.Version)
	return nil
}

func (s *Server) handleSetTokenEnabled(enabled bool) handler {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		t, err := s.store.SetTokenEnabled(c.p.UserID, c.params.ByName("id"), enabled)
		if err != nil {
			return err
		}
		writeResource(w, http.StatusOK, t, t.Version)
		return nil
	}
}
