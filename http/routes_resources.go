package http

import (
	"net/http"
	"net/url"

	"lookout/auth"
	"lookout/store"
)

// registerResourceRoutes mounts every project resource of the Management table under one
// API root. Collection routes take project_id (query for GET, body for POST); /{id} routes
// find the project from the stored resource. Access is decided before any handler runs.
func (s *Server) registerResourceRoutes(m *mux, b base) {
	st := s.store
	r := func(method, path, family string, t target, kind store.Kind, h handler) {
		body := method == http.MethodPost || method == http.MethodPut
		if t == targetResourceAction {
			t, body = targetResourceParam, false
		}
		m.handle(method, b.prefix+path, route{auth: b.auth, family: family, target: t, kind: kind, body: body}, h)
	}
	none := store.Kind{}

	r("GET", "/models", "models", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.Model, string, error) {
		return st.ListModels(pid, q.Get("status"), p)
	}))
	r("POST", "/models", "models", targetProjectBody, none, createH(st.CreateModel))
	r("GET", "/models/:id", "models", targetResourceParam, store.KindModel, getH(st.Model))
	r("PUT", "/models/:id", "models", targetResourceParam, store.KindModel, updateH(st.UpdateModel))
	r("DELETE", "/models/:id", "models", targetResourceParam, store.KindModel, deleteH(st.ArchiveModel))

	r("GET", "/warehouses", "warehouses", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.Warehouse, string, error) {
		return st.ListWarehouses(pid, q.Get("type"), p)
	}))
	r("POST", "/warehouses", "warehouses", targetProjectBody, none, s.handleCreateWarehouse)
	r("GET", "/warehouses/:id", "warehouses", targetResourceParam, store.KindWarehouse, getH(st.Warehouse))
	r("PUT", "/warehouses/:id", "warehouses", targetResourceParam, store.KindWarehouse, s.handleUpdateWarehouse)
	r("POST", "/warehouses/:id/test", "warehouses", targetResourceAction, store.KindWarehouse, s.handleTestWarehouse)

	r("GET", "/warehouse-credentials", "warehouses", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.WarehouseCredential, string, error) {
		return st.ListCredentials(pid, q.Get("type"), p)
	}))
	r("POST", "/warehouse-credentials", "warehouses", targetProjectBody, none, createH(st.CreateCredential))
	r("GET", "/warehouse-credentials/:id", "warehouses", targetResourceParam, store.KindCredential, getH(st.Credential))
	r("PUT", "/warehouse-credentials/:id", "warehouses", targetResourceParam, store.KindCredential, updateH(st.UpdateCredential))

	for _, c := range []struct {
		kind string
		path string
		k    store.Kind
	}{{store.ClientIngest, "/ingest-clients", store.KindIngest}, {store.ClientQuery, "/query-clients", store.KindQuery}} {
		kind := c.kind
		r("GET", c.path, "clients", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.Client, string, error) {
			enabled, err := boolParam(q, "enabled")
			if err != nil {
				return nil, "", err
			}
			return st.ListClients(kind, pid, enabled, p)
		}))
		r("POST", c.path, "clients", targetProjectBody, none, createH(func(pid string, in store.ClientInput) (store.Client, error) {
			return st.CreateClient(kind, pid, in)
		}))
		r("GET", c.path+"/:id", "clients", targetResourceParam, c.k, getH(func(pid, id string) (store.Client, error) {
			return st.Client(kind, pid, id)
		}))
		r("PUT", c.path+"/:id", "clients", targetResourceParam, c.k, updateH(func(pid, id string, in store.ClientInput, v int) (store.Client, error) {
			return st.UpdateClient(kind, pid, id, in, v)
		}))
		r("DELETE", c.path+"/:id", "clients", targetResourceParam, c.k, hardDeleteH(func(pid, id string) error {
			return st.DeleteClient(kind, pid, id)
		}))
		r("PUT", c.path+"/:id/authentication", "clients", targetResourceParam, c.k, updateH(func(pid, id string, in store.AuthenticationInput, v int) (store.Client, error) {
			return st.SetClientAuthentication(kind, pid, id, in, v)
		}))
	}

	r("GET", "/runtime-api-keys", "clients", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.RuntimeKey, string, error) {
		return st.ListRuntimeKeys(pid, store.RuntimeKeyFilter{ClientID: q.Get("client_id"), Kind: q.Get("kind"), Status: q.Get("status")}, p)
	}))
	r("POST", "/runtime-api-keys", "clients", targetProjectBody, none, s.handleCreateRuntimeKey)
	r("GET", "/runtime-api-keys/:id", "clients", targetResourceParam, store.KindRuntimeKey, getH(st.RuntimeKey))
	r("PUT", "/runtime-api-keys/:id", "clients", targetResourceParam, store.KindRuntimeKey, updateH(st.UpdateRuntimeKey))
	r("DELETE", "/runtime-api-keys/:id", "clients", targetResourceParam, store.KindRuntimeKey, deleteH(st.RevokeRuntimeKey))

	r("GET", "/analytics-apis", "analytics", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.AnalyticsAPI, string, error) {
		return st.ListAnalyticsAPIs(pid, q.Get("status"), q.Get("model_key"), p)
	}))
	r("POST", "/analytics-apis", "analytics", targetProjectBody, none, createH(st.CreateAnalyticsAPI))
	r("GET", "/analytics-apis/:id", "analytics", targetResourceParam, store.KindAPI, getH(st.AnalyticsAPI))
	r("PUT", "/analytics-apis/:id", "analytics", targetResourceParam, store.KindAPI, updateH(st.UpdateAnalyticsAPI))
	r("DELETE", "/analytics-apis/:id", "analytics", targetResourceParam, store.KindAPI, deleteH(st.ArchiveAnalyticsAPI))

	r("GET", "/analytics-bindings", "analytics", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.Binding, string, error) {
		return st.ListBindings(pid, q.Get("analytics_api_id"), q.Get("state"), p)
	}))
	r("POST", "/analytics-bindings", "analytics", targetProjectBody, none, createH(st.CreateBinding))
	r("GET", "/analytics-bindings/:id", "analytics", targetResourceParam, store.KindBinding, getH(st.Binding))
	r("POST", "/analytics-bindings/:id/promote", "analytics", targetResourceAction, store.KindBinding, actionH(st.PromoteBinding))

	r("GET", "/client-cas", "security", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.ClientCA, string, error) {
		return st.ListClientCAs(pid, p)
	}))
	r("POST", "/client-cas", "security", targetProjectBody, none, createH(st.CreateClientCA))
	r("GET", "/client-cas/:id", "security", targetResourceParam, store.KindClientCA, getH(st.ClientCA))
	r("DELETE", "/client-cas/:id", "security", targetResourceParam, store.KindClientCA, hardDeleteH(st.DeleteClientCA))
}

// versioned is a resource that can answer with an ETag.
type versioned interface{ CurrentVersion() int }

func listH[T any](s *Server, fn func(projectID string, q url.Values, page store.Page) ([]T, string, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		page, err := s.pageParams(r)
		if err != nil {
			return err
		}
		items, next, err := fn(c.project.ID, r.URL.Query(), page)
		if err != nil {
			return err
		}
		s.writePage(w, r, items, next)
		return nil
	}
}

func createH[In any, T versioned](fn func(projectID string, in In) (T, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		var in In
		if err := decodeJSON(c.body, &in); err != nil {
			return err
		}
		v, err := fn(c.project.ID, in)
		if err != nil {
			return err
		}
		writeResource(w, http.StatusCreated, v, v.CurrentVersion())
		return nil
	}
}

func getH[T versioned](fn func(projectID, id string) (T, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		v, err := fn(c.project.ID, c.params.ByName("id"))
		if err != nil {
			return err
		}
		writeResource(w, http.StatusOK, v, v.CurrentVersion())
		return nil
	}
}

// updateH decodes a PUT body and applies it with the request's If-Match. A project_id in
// the body may repeat the resource's project but not move it.
func updateH[In any, T versioned](fn func(projectID, id string, in In, ifMatch int) (T, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		var in In
		if err := decodeJSON(c.body, &in); err != nil {
			return err
		}
		if pid, present, _ := bodyField(c.body, "project_id"); present && pid != c.project.ID {
			return store.Invalid(store.FieldError{Field: "project_id", Message: "cannot change: a resource stays in its project"})
		}
		res, err := fn(c.project.ID, c.params.ByName("id"), in, ifMatch(r))
		if err != nil {
			return err
		}
		writeResource(w, http.StatusOK, res, res.CurrentVersion())
		return nil
	}
}

// deleteH archives or revokes: the resource stays and is returned.
func deleteH[T versioned](fn func(projectID, id string) (T, error)) handler {
	return getH(fn)
}

// actionH runs a bodiless state change (promote) and returns the resource.
func actionH[T versioned](fn func(projectID, id string) (T, error)) handler {
	return getH(fn)
}

// hardDeleteH deletes for good and answers {"id", "deleted": true}.
func hardDeleteH(fn func(projectID, id string) error) handler {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		id := c.params.ByName("id")
		if err := fn(c.project.ID, id); err != nil {
			return err
		}
		writeData(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
		return nil
	}
}

// createdRuntimeKey is the create response: the key, this once, beside the record.
type createdRuntimeKey struct {
	store.RuntimeKey
	Key string `json:"key"`
}

func (s *Server) handleCreateRuntimeKey(w http.ResponseWriter, r *http.Request, c *call) error {
	var in store.RuntimeKeyInput
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	for {
		key, prefix, hash := auth.NewRuntimeKey()
		k, err := s.store.CreateRuntimeKey(c.project.ID, in, hash, prefix)
		if store.IsCode(err, store.CodeConflict) {
			continue // 256 random bits collided: draw again
		}
		if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "no-store")
		writeResource(w, http.StatusCreated, createdRuntimeKey{RuntimeKey: k, Key: key}, k.Version)
		return nil
	}
}

// boolParam reads an optional true/false query parameter.
func boolParam(q url.Values, name string) (*bool, error) {
	switch q.Get(name) {
	case "":
		return nil, nil
	case "true":
		t := true
		return &t, nil
	case "false":
		f := false
		return &f, nil
	}
	return nil, store.Invalid(store.FieldError{Field: name, Message: "must be true or false"})
}
