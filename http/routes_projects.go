package http

import (
	"net/http"

	"lookout/store"
)

// registerProjectRoutes mounts the project routes under one API root (console or
// Management); both share handlers, and the root decides how callers authenticate.
func (s *Server) registerProjectRoutes(m *mux, b base) {
	const fam = "projects"
	p := b.prefix
	m.handle(http.MethodGet, p+"/projects", route{auth: b.auth, family: fam, target: targetWorkspaceQuery}, s.handleListProjects)
	m.handle(http.MethodPost, p+"/projects", route{auth: b.auth, family: fam, target: targetNewProjectBody, body: true}, s.handleCreateProject)
	m.handle(http.MethodGet, p+"/projects/:id", route{auth: b.auth, family: fam, target: targetProjectParam}, s.handleGetProject)
	m.handle(http.MethodPut, p+"/projects/:id", route{auth: b.auth, family: fam, target: targetProjectParam, body: true}, s.handleUpdateProject)
	if b.auth == authSession {
		// Who is listed on a restricted project is team membership: console only.
		m.handle(http.MethodGet, p+"/projects/:id/members", route{auth: b.auth, target: targetProjectParam}, s.handleListProjectMembers)
		m.handle(http.MethodPut, p+"/projects/:id/members", route{auth: b.auth, target: targetProjectParam, body: true}, s.handleSetProjectMembers)
	}
}

func (s *Server) handleListProjects(w http.ResponseWriter, r *http.Request, c *call) error {
	page, err := s.pageParams(r)
	if err != nil {
		return err
	}
	wsID := r.URL.Query().Get("workspace_id")
	ps, next, err := s.store.ListProjects(s.auth.ProjectFilter(c.p, wsID, c.role), page)
	if err != nil {
		return err
	}
	s.writePage(w, r, ps, next)
	return nil
}

func (s *Server) handleCreateProject(w http.ResponseWriter, r *http.Request, c *call) error {
	var in store.ProjectInput
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	p, err := s.store.CreateProject(in)
	if err != nil {
		return err
	}
	writeResource(w, http.StatusCreated, p, p.Version)
	return nil
}

func (s *Server) handleGetProject(w http.ResponseWriter, r *http.Request, c *call) error {
	writeResource(w, http.StatusOK, c.project, c.project.Version)
	return nil
}

func (s *Server) handleUpdateProject(w http.ResponseWriter, r *http.Request, c *call) error {
	var in store.ProjectInput
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	p, err := s.store.UpdateProject(c.project.ID, in, ifMatch(r))
	if err != nil {
		return err
	}
	writeResource(w, http.StatusOK, p, p.Version)
	return nil
}

func (s *Server) handleListProjectMembers(w http.ResponseWriter, r *http.Request, c *call) error {
	ms, err := s.store.ProjectMembers(c.project.ID)
	if err != nil {
		return err
	}
	writeList(w, ms, "")
	return nil
}

func (s *Server) handleSetProjectMembers(w http.ResponseWriter, r *http.Request, c *call) error {
	var in struct {
		UserIDs []string `json:"user_ids"`
	}
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	if err := s.store.SetProjectMembers(c.project.ID, in.UserIDs); err != nil {
		return err
	}
	ms, err := s.store.ProjectMembers(c.project.ID)
	if err != nil {
		return err
	}
	writeList(w, ms, "")
	return nil
}
