package http

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/julienschmidt/httprouter"

	"lookout/alerts"
	"lookout/store"
)

// registerAlertRoutes mounts the spec's Alerts table (alerts, simulation, metadata,
// notification channels, incidents and deliveries) under one API root; scope family
// "alerts".
func (s *Server) registerAlertRoutes(m *mux, b base) {
	st, al := s.store, s.alerts
	r := func(method, path string, t target, kind store.Kind, h handler) route {
		body := method == http.MethodPost || method == http.MethodPut
		if t == targetResourceAction {
			t, body = targetResourceParam, false
		}
		rt := route{auth: b.auth, family: "alerts", target: t, kind: kind, body: body}
		if h != nil {
			m.handle(method, b.prefix+path, rt, h)
		}
		return rt
	}
	none := store.Kind{}

	r("GET", "/alerts", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.Alert, string, error) {
		enabled, err := boolParam(q, "enabled")
		if err != nil {
			return nil, "", err
		}
		if tt := q.Get("trigger_type"); tt != "" && tt != store.TriggerEvent {
			return nil, "", store.Invalid(store.FieldError{Field: "trigger_type", Message: "must be event"})
		}
		return st.ListAlerts(pid, store.AlertFilter{Q: q.Get("q"), TriggerType: q.Get("trigger_type"), Enabled: enabled}, p)
	}))
	r("POST", "/alerts", targetProjectBody, none, createH(al.CreateAlert))
	// httprouter cannot hold /alerts/metadata beside /alerts/:id, nor /alerts/simulate beside
	// /alerts/:id/…: one route per method takes the segment and hands the static names on.
	m.split(http.MethodGet, b.prefix+"/alerts/:id", "metadata",
		r("GET", "/alerts/metadata", targetProjectQuery, none, nil), s.handleAlertMetadata,
		r("GET", "/alerts/:id", targetResourceParam, store.KindAlert, nil), getH(st.Alert))
	m.split(http.MethodPost, b.prefix+"/alerts/:id", "simulate",
		r("POST", "/alerts/simulate", targetProjectBody, none, nil), s.handleSimulateDraft, route{}, nil)
	r("PUT", "/alerts/:id", targetResourceParam, store.KindAlert, updateH(al.UpdateAlert))
	r("DELETE", "/alerts/:id", targetResourceParam, store.KindAlert, deleteH(st.ArchiveAlert))
	r("POST", "/alerts/:id/enable", targetResourceAction, store.KindAlert, actionH(func(pid, id string) (store.Alert, error) {
		return st.SetAlertEnabled(pid, id, true)
	}))
	r("POST", "/alerts/:id/disable", targetResourceAction, store.KindAlert, actionH(func(pid, id string) (store.Alert, error) {
		return st.SetAlertEnabled(pid, id, false)
	}))
	r("POST", "/alerts/:id/simulate", targetResourceParam, store.KindAlert, s.handleSimulateAlert)

	r("GET", "/notification-channels", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]alerts.ChannelView, string, error) {
		return al.ListChannels(pid, p)
	}))
	r("POST", "/notification-channels", targetProjectBody, none, func(w http.ResponseWriter, r *http.Request, c *call) error {
		var in alerts.ChannelInput
		if err := decodeJSON(c.body, &in); err != nil {
			return err
		}
		ch, err := al.CreateChannel(c.project.ID, in)
		if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "no-store") // it may carry the signing secret
		writeResource(w, http.StatusCreated, ch, ch.Version)
		return nil
	})
	r("GET", "/notification-channels/:id", targetResourceParam, store.KindChannel, getH(al.Channel))
	r("PUT", "/notification-channels/:id", targetResourceParam, store.KindChannel, updateH(al.UpdateChannel))
	r("POST", "/notification-channels/:id/enable", targetResourceAction, store.KindChannel, actionH(func(pid, id string) (alerts.ChannelView, error) {
		return al.SetChannelEnabled(pid, id, true)
	}))
	r("POST", "/notification-channels/:id/disable", targetResourceAction, store.KindChannel, actionH(func(pid, id string) (alerts.ChannelView, error) {
		return al.SetChannelEnabled(pid, id, false)
	}))
	r("POST", "/notification-channels/:id/test", targetResourceAction, store.KindChannel, func(w http.ResponseWriter, r *http.Request, c *call) error {
		d, err := al.TestChannel(c.project.ID, c.params.ByName("id"))
		if err != nil {
			return err
		}
		writeResource(w, http.StatusAccepted, d, d.Version)
		return nil
	})

	r("GET", "/alert-incidents", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.Incident, string, error) {
		f := store.IncidentFilter{Status: q.Get("status"), Severity: q.Get("severity"), AlertID: q.Get("alert_id")}
		if err := oneOf(q, "status", store.IncidentOpen, store.IncidentAcknowledged, store.IncidentResolved); err != nil {
			return nil, "", err
		}
		if err := oneOf(q, "severity", store.SeverityInfo, store.SeverityWarning, store.SeverityCritical); err != nil {
			return nil, "", err
		}
		return st.ListIncidents(pid, f, p)
	}))
	r("GET", "/alert-incidents/:id", targetResourceParam, store.KindIncident, getH(al.Incident))
	r("POST", "/alert-incidents/:id/acknowledge", targetResourceAction, store.KindIncident, actionH(al.Acknowledge))
	r("POST", "/alert-incidents/:id/resolve", targetResourceAction, store.KindIncident, actionH(al.Resolve))
	r("GET", "/alert-deliveries", targetProjectQuery, none, listH(s, func(pid string, q url.Values, p store.Page) ([]store.Delivery, string, error) {
		if err := oneOf(q, "status", store.DeliveryPending, store.DeliveryDelivering, store.DeliveryDelivered, store.DeliveryFailed, store.DeliveryDeadLetter); err != nil {
			return nil, "", err
		}
		if err := oneOf(q, "kind", store.NoticeOpening, store.NoticeSummary, store.NoticeResolution, store.NoticeTest); err != nil {
			return nil, "", err
		}
		return st.ListDeliveries(pid, store.DeliveryFilter{Status: q.Get("status"), Kind: q.Get("kind"), ChannelID: q.Get("channel_id"), IncidentID: q.Get("incident_id")}, p)
	}))
	r("GET", "/alert-deliveries/:id", targetResourceParam, store.KindDelivery, getH(al.Delivery))
	r("POST", "/alert-deliveries/:id/retry", targetResourceAction, store.KindDelivery, actionH(al.RetryDelivery))
}

// oneOf checks an optional query parameter against its allowed values.
func oneOf(q url.Values, name string, allowed ...string) error {
	v := q.Get(name)
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return store.Invalid(store.FieldError{Field: name, Message: "must be one of " + strings.Join(allowed, ", ")})
}

// split serves pattern (ending in one :id segment) with the static route when the segment
// is name, and with the parameter route otherwise; a nil paramH answers as the router does
// for a method the path does not have (405 with the Allow of the :id path).
func (m *mux) split(method, pattern, name string, staticRt route, staticH handler, paramRt route, paramH handler) {
	static := m.wrap(pattern[:len(pattern)-len(":id")]+name, staticRt, staticH)
	var param httprouter.Handle
	if paramH != nil {
		param = m.wrap(pattern, paramRt, paramH)
	}
	m.r.Handle(method, pattern, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		switch {
		case ps.ByName("id") == name:
			static(w, r, ps)
		case param != nil:
			param(w, r, ps)
		default:
			w.Header().Set("Allow", "DELETE, GET, PUT")
			m.r.MethodNotAllowed.ServeHTTP(w, r)
		}
	})
}

func (s *Server) handleAlertMetadata(w http.ResponseWriter, r *http.Request, c *call) error {
	md, err := s.alerts.Metadata(c.project.ID)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, md)
	return nil
}

// draftBody is the body of /alerts/simulate: the proposed rule plus sample_event.
type draftBody struct {
	store.AlertInput
	SampleEvent json.RawMessage `json:"sample_event"`
}

func (s *Server) handleSimulateDraft(w http.ResponseWriter, r *http.Request, c *call) error {
	var in draftBody
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	res, err := s.alerts.SimulateDraft(c.project.ID, in.AlertInput, in.SampleEvent)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

func (s *Server) handleSimulateAlert(w http.ResponseWriter, r *http.Request, c *call) error {
	var in struct {
		Event json.RawMessage `json:"event"`
	}
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	res, err := s.alerts.SimulateAlert(c.project.ID, c.params.ByName("id"), in.Event)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}
