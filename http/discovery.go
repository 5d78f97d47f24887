package http

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"lookout/auth"
	"lookout/ingest"
	"lookout/store"
)

// registerDiscoveryRoutes mounts the console's discovery review (console only: the spec
// keeps discovery controls out of the Management API).
func (s *Server) registerDiscoveryRoutes(m *mux) {
	const p = "/api/v1/discovery-sessions"
	st := s.store
	m.handle(http.MethodGet, p, route{auth: authSession, target: targetProjectQuery}, listH(s, func(pid string, q url.Values, pg store.Page) ([]store.DiscoverySession, string, error) {
		return st.ListDiscovery(pid, q.Get("state"), pg)
	}))
	m.handle(http.MethodPost, p, route{auth: authSession, body: true}, s.handleOpenDiscovery)
	m.handle(http.MethodGet, p+"/:id", route{auth: authSession, target: targetResourceParam, kind: store.KindDiscovery}, getH(st.Discovery))
	m.handle(http.MethodPost, p+"/:id/accept", route{auth: authSession, target: targetResourceParam, kind: store.KindDiscovery}, s.handleAcceptDiscovery)
	m.handle(http.MethodPost, p+"/:id/discard", route{auth: authSession, target: targetResourceParam, kind: store.KindDiscovery}, actionH(st.DiscardDiscovery))
	// The per-client OpenAPI document is a console feature (not Management API v1).
	m.handle(http.MethodGet, "/api/v1/ingest-clients/:id/openapi.json", route{auth: authSession, target: targetResourceParam, kind: store.KindIngest}, s.handleIngestOpenAPI)
}

// handleOpenDiscovery opens a session for an ingest client; the project is the client's,
// and opening one is a write to it.
func (s *Server) handleOpenDiscovery(w http.ResponseWriter, r *http.Request, c *call) error {
	var in store.DiscoveryInput
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	if in.IngestClientID == "" {
		return store.Invalid(store.FieldError{Field: "ingest_client_id", Message: "is required"})
	}
	pid, err := s.store.ResourceProject(store.KindIngest, in.IngestClientID)
	if err == nil {
		_, err = s.auth.Project(c.p, pid, true)
	}
	if store.IsCode(err, store.CodeNotFound) {
		// Unknown, or in a project the caller may not see: the same answer either way.
		return store.Invalid(store.FieldError{Field: "ingest_client_id", Message: "is not an ingest client"})
	}
	if err != nil {
		return err
	}
	d, err := s.store.OpenDiscovery(pid, in)
	if err != nil {
		return err
	}
	writeResource(w, http.StatusCreated, d, d.Version)
	return nil
}

func (s *Server) handleAcceptDiscovery(w http.ResponseWriter, r *http.Request, c *call) error {
	d, m, err := s.store.AcceptDiscovery(c.project.ID, c.params.ByName("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"session": d, "model": m})
	return nil
}

// handleDiscover is POST /discover on the ingest listener.
func (s *Server) handleDiscover(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := s.auth.AuthenticateRuntime(runtimeRequest(r, store.ClientIngest, store.TransportHTTP))
	if err != nil {
		return err
	}
	res, err := s.ingest.Discover(caller(id), http.MaxBytesReader(w, r.Body, ingest.MaxDiscover))
	if err != nil {
		return ingestError(err) // a spent quota is 429 with Retry-After, as on /ingest
	}
	writeData(w, http.StatusAccepted, res)
	return nil
}

// handleWSDiscover is /ws/discover: each text message is one object or an array of
// objects, answered with {"type":"ack","session_id","captured","dropped"} or an error message.
func (s *Server) handleWSDiscover(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.runtimeSocket(w, r, ingest.MaxDiscover, func(ctx context.Context, id *auth.RuntimeIdentity, msg []byte) any {
		res, err := s.ingest.Discover(caller(id), bytes.NewReader(msg))
		if err != nil {
			return wsReply{Type: "error", Message: safeMessage(ingestError(err))}
		}
		return map[string]any{"type": "ack", "session_id": res.SessionID, "captured": res.Captured, "dropped": res.Dropped}
	})
}

// handleIngestOpenAPI serves the OpenAPI 3.1 document of one ingest client's /ingest.
func (s *Server) handleIngestOpenAPI(w http.ResponseWriter, r *http.Request, c *call) error {
	cl, err := s.store.Client(store.ClientIngest, c.project.ID, c.params.ByName("id"))
	if err != nil {
		return err
	}
	var models []store.Model
	for _, key := range cl.Models {
		if m, err := s.store.ModelByKey(cl.ProjectID, key); err == nil {
			models = append(models, m)
		}
	}
	b, err := json.MarshalIndent(ingest.OpenAPI(cl, models, s.ingestURL), "", "  ")
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(b)
	return nil
}
