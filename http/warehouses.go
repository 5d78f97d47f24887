package http

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"lookout/store"
	"lookout/warehouse/external"
)

// warehouseTestTimeout bounds one connection test: long enough for a TLS handshake to a
// distant engine, short enough that a request never hangs on a black-holed address.
const warehouseTestTimeout = 10 * time.Second

// warehouseTest is the answer of POST /warehouses/{id}/test.
type warehouseTest struct {
	ID        string `json:"id"`
	OK        bool   `json:"ok"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

// handleCreateWarehouse validates the new warehouse, tests the connection to an external
// one, and only then writes it: a configuration that cannot connect is never stored.
func (s *Server) handleCreateWarehouse(w http.ResponseWriter, r *http.Request, c *call) error {
	var in store.WarehouseInput
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	prepared, err := s.store.PrepareWarehouse(c.project.ID, "", in, 0)
	if err != nil {
		return err
	}
	if _, err := s.connectWarehouse(r.Context(), c.project.ID, prepared, true); err != nil {
		return err
	}
	wh, err := s.store.CreateWarehouse(c.project.ID, in)
	if err != nil {
		return err
	}
	writeResource(w, http.StatusCreated, wh, wh.Version)
	return nil
}

// handleUpdateWarehouse is the PUT of a warehouse: prepare, test, write. The write is
// pinned to the version the test saw, so what is stored is what was tested.
func (s *Server) handleUpdateWarehouse(w http.ResponseWriter, r *http.Request, c *call) error {
	var in store.WarehouseInput
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	if pid, present, _ := bodyField(c.body, "project_id"); present && pid != c.project.ID {
		return store.Invalid(store.FieldError{Field: "project_id", Message: "cannot change: a resource stays in its project"})
	}
	id, im := c.params.ByName("id"), ifMatch(r)
	prepared, err := s.store.PrepareWarehouse(c.project.ID, id, in, im)
	if err != nil {
		return err
	}
	tested, err := s.connectWarehouse(r.Context(), c.project.ID, prepared, true)
	if err != nil {
		return err
	}
	pin := im
	if tested && pin == 0 {
		pin = prepared.Version
	}
	wh, err := s.store.UpdateWarehouse(c.project.ID, id, in, pin)
	if im == 0 && pin != 0 && store.IsCode(err, store.CodePreconditionFailed) {
		return errf(store.CodeConflict, "the warehouse changed while its connection was being tested: read it again and retry")
	}
	if err != nil {
		return err
	}
	writeResource(w, http.StatusOK, wh, wh.Version)
	return nil
}

// handleTestWarehouse runs the connection test of a stored warehouse on demand. An
// embedded warehouse has nothing to connect to and always passes.
func (s *Server) handleTestWarehouse(w http.ResponseWriter, r *http.Request, c *call) error {
	wh, err := s.store.Warehouse(c.project.ID, c.params.ByName("id"))
	if err != nil {
		return err
	}
	if wh.External() && s.testWarehouse == nil {
		return errf(store.CodeUnavailable, "this server is not set up to test warehouse connections")
	}
	start := time.Now()
	if _, err := s.connectWarehouse(r.Context(), c.project.ID, wh, false); err != nil {
		return err
	}
	writeData(w, http.StatusOK, warehouseTest{ID: wh.ID, OK: true, ElapsedMS: time.Since(start).Milliseconds()})
	return nil
}

// connectWarehouse runs TestWarehouse on an external warehouse with its credential and
// reports whether it ran. A failure is a validation error carrying the engine's message,
// with the credential's secret taken out once more in case an engine echoed it in a form
// of its own. On a write (onWrite) no TestWarehouse means no check.
func (s *Server) connectWarehouse(ctx context.Context, projectID string, wh store.Warehouse, onWrite bool) (bool, error) {
	if !wh.External() || (onWrite && s.testWarehouse == nil) {
		return false, nil
	}
	username, secret, err := s.store.WarehouseTarget(projectID, wh)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, warehouseTestTimeout)
	defer cancel()
	if err := s.testWarehouse(ctx, wh, username, secret); err != nil {
		msg := external.Redact(external.Message(err), secret, url.QueryEscape(secret), url.PathEscape(secret))
		s.log.Info("warehouse connection test failed", "project_id", projectID, "warehouse_id", wh.ID, "type", wh.Type, "reason", msg)
		return true, &store.Error{Code: store.CodeValidation, Message: "cannot connect to the warehouse: " + msg,
			Fields: []store.FieldError{{Field: "config", Message: msg}}}
	}
	return true, nil
}
