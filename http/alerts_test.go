package http

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lookout/alerts"
	"lookout/auth"
	"lookout/store"
)

// alertFixtures adds, to a resource harness's first project, a webhook channel, a disabled
// slack channel and an alert on the orders model (fields id, amount, country, ts).
type alertFixtures struct {
	webhook, slack, alert, incident, delivery string
}

func (h *harness) alertFixtures(all, project string) alertFixtures {
	var a alertFixtures
	a.webhook = h.created(all, "/management/v1/notification-channels", map[string]any{"project_id": project, "name": "ops hook", "type": "webhook",
		"config": map[string]any{"url": "https://hooks.example/lookout", "headers": map[string]string{"X-Api-Key": "key-0123456789abcdef"}}})
	a.slack = h.created(all, "/management/v1/notification-channels", map[string]any{"project_id": project, "name": "chat", "type": "slack", "enabled": false,
		"config": map[string]any{"url": "https://chat.example/hooks/T000/B000/very-secret-token"}})
	a.alert = h.created(all, "/management/v1/alerts", map[string]any{"project_id": project, "name": "Big Dutch orders", "model_key": "orders",
		"conditions":    []map[string]any{{"field": "amount", "operator": "gt", "value": 1000}, {"field": "country", "operator": "eq", "value": "NL"}},
		"select_fields": []string{"id", "amount"}, "group_by": []string{"country"}, "severity": "critical", "channel_ids": []string{a.webhook}})
	// A matching record opens an incident and queues its opening (to an unreachable URL: the
	// dispatcher is not running here).
	h.srv.alerts.Match(alerts.Batch{ProjectID: project, ModelKey: "orders", ReceivedAt: h.clock.Now(), ClientID: "ic_x",
		Records: [][]byte{[]byte(`{"id":"o-1","amount":5000,"country":"NL"}`)}})
	h.srv.alerts.Evaluator().Flush()
	incs, _, err := h.st.ListIncidents(project, store.IncidentFilter{}, store.Page{Limit: 10})
	if err != nil || len(incs) != 1 {
		h.t.Fatalf("incidents %v %v", incs, err)
	}
	ds, _, err := h.st.ListDeliveries(project, store.DeliveryFilter{}, store.Page{Limit: 10})
	if err != nil || len(ds) != 1 {
		h.t.Fatalf("deliveries %v %v", ds, err)
	}
	a.incident, a.delivery = incs[0].ID, ds[0].ID
	return a
}

// TestAlertScopeMatrix: every alerts route answers 401 without a token, 403 without the
// alerts scope of its method, 404 for a project the token may not see, and follows the
// console's roles.
func TestAlertScopeMatrix(t *testing.T) {
	h, w, all, _ := newResourceHarness(t)
	p := w.p1.ID
	a := h.alertFixtures(all, p)
	draft := map[string]any{"project_id": p, "name": "x", "model_key": "orders", "conditions": []map[string]any{{"field": "amount", "operator": "exists"}}}
	routes := []struct {
		method, path string
		body         any
	}{
		{"GET", "/alerts?project_id=" + p, nil},
		{"POST", "/alerts", draft},
		{"GET", "/alerts/metadata?project_id=" + p, nil},
		{"POST", "/alerts/simulate", map[string]any{"project_id": p, "name": "x", "model_key": "orders", "conditions": []map[string]any{{"field": "amount", "operator": "exists"}}, "sample_event": map[string]any{}}},
		{"GET", "/alerts/" + a.alert, nil},
		{"PUT", "/alerts/" + a.alert, map[string]any{"name": "y"}},
		{"DELETE", "/alerts/" + a.alert, nil},
		{"POST", "/alerts/" + a.alert + "/enable", nil},
		{"POST", "/alerts/" + a.alert + "/disable", nil},
		{"POST", "/alerts/" + a.alert + "/simulate", map[string]any{"event": map[string]any{}}},
		{"GET", "/notification-channels?project_id=" + p, nil},
		{"POST", "/notification-channels", map[string]any{"project_id": p, "name": "c", "type": "slack", "config": map[string]any{"url": "https://x.example/h"}}},
		{"GET", "/notification-channels/" + a.webhook, nil},
		{"PUT", "/notification-channels/" + a.webhook, map[string]any{"name": "c2", "config": map[string]any{"url": "https://x.example/h"}}},
		{"POST", "/notification-channels/" + a.webhook + "/enable", nil},
		{"POST", "/notification-channels/" + a.webhook + "/disable", nil},
		{"POST", "/notification-channels/" + a.webhook + "/test", nil},
		{"GET", "/alert-incidents?project_id=" + p, nil},
		{"GET", "/alert-incidents/" + a.incident, nil},
		{"POST", "/alert-incidents/" + a.incident + "/acknowledge", nil},
		{"POST", "/alert-incidents/" + a.incident + "/resolve", nil},
		{"GET", "/alert-deliveries?project_id=" + p, nil},
		{"GET", "/alert-deliveries/" + a.delivery, nil},
		{"POST", "/alert-deliveries/" + a.delivery + "/retry", nil},
	}
	read, write := h.token(w, []string{"alerts:read"}), h.token(w, []string{"alerts:write"})
	other := h.token(w, []string{"models:read", "models:write"})
	restricted := h.token(w, auth.AllScopes(), w.p2.ID)
	before := h.do("GET", "/management/v1/alerts/"+a.alert, all, nil).body
	for _, rt := range routes {
		isRead := rt.method == "GET"
		wrong := write
		if !isRead {
			wrong = read
		}
		for _, c := range []struct {
			name, authz string
			status      int
		}{{"no token", "", 401}, {"other family", other, 403}, {"other project", restricted, 404}, {"wrong scope", wrong, 403}} {
			t.Run(fmt.Sprintf("%s %s/%s", rt.method, rt.path, c.name), func(t *testing.T) {
				h.run(t, scenario{method: rt.method, url: "/management/v1" + rt.path, auth: c.authz, body: rt.body, status: c.status})
			})
		}
		if isRead {
			t.Run(rt.path+"/read scope and console member", func(t *testing.T) {
				h.run(t, scenario{method: "GET", url: "/management/v1" + rt.path, auth: read, status: 200})
				h.run(t, scenario{method: "GET", url: "/api/v1" + rt.path, auth: bearer(w.memberSes), status: 200})
				h.run(t, scenario{method: "GET", url: "/api/v1" + rt.path, auth: bearer(w.strangerSes), status: 404})
			})
		} else {
			t.Run(rt.method+" "+rt.path+"/console member", func(t *testing.T) {
				h.run(t, scenario{method: rt.method, url: "/api/v1" + rt.path, auth: bearer(w.memberSes), body: rt.body, status: 403})
			})
		}
	}
	if after := h.do("GET", "/management/v1/alerts/"+a.alert, all, nil).body; after != before {
		t.Fatalf("denied requests changed the alert:\n%s\n%s", before, after)
	}
}

// TestAlerts covers the alert rules: validation against the model through cond, defaults,
// list filters, enable/disable, archive and what an archived alert may still do.
func TestAlerts(t *testing.T) {
	h, w, all, f := newResourceHarness(t)
	p := w.p1.ID
	a := h.alertFixtures(all, p)
	mg := "/management/v1/alerts"
	rule := func(change map[string]any) map[string]any {
		r := map[string]any{"project_id": p, "name": "r", "model_key": "orders", "conditions": []map[string]any{{"field": "amount", "operator": "gte", "value": 10}}}
		for k, v := range change {
			r[k] = v
		}
		return r
	}
	conds := func(c ...map[string]any) map[string]any { return map[string]any{"conditions": c} }
	for _, sc := range []scenario{
		{name: "no name", method: "POST", url: mg, auth: all, body: rule(map[string]any{"name": ""}), status: 400, contains: []string{`"field":"name"`}},
		{name: "no project", method: "POST", url: mg, auth: all, body: map[string]any{"name": "x"}, status: 400, contains: []string{`"field":"project_id"`}},
		{name: "unknown body field", method: "POST", url: mg, auth: all, body: rule(map[string]any{"when": "now"}), status: 400, contains: []string{"when"}},
		{name: "unknown model", method: "POST", url: mg, auth: all, body: rule(map[string]any{"model_key": "nope"}), status: 400, contains: []string{`"field":"model_key"`}},
		{name: "no conditions", method: "POST", url: mg, auth: all, body: rule(conds()), status: 400, contains: []string{`"field":"conditions"`}},
		{name: "unknown field", method: "POST", url: mg, auth: all, body: rule(conds(map[string]any{"field": "price", "operator": "gt", "value": 1})), status: 400, contains: []string{`"field":"conditions[0].field"`}},
		{name: "operator unknown", method: "POST", url: mg, auth: all, body: rule(conds(map[string]any{"field": "amount", "operator": "above", "value": 1})), status: 400, contains: []string{`"field":"conditions[0].operator"`}},
		{name: "operator not for the type", method: "POST", url: mg, auth: all, body: rule(conds(map[string]any{"field": "amount", "operator": "contains", "value": "1"})), status: 400, contains: []string{`"field":"conditions[0].operator"`, "number"}},
		{name: "value of the wrong type", method: "POST", url: mg, auth: all, body: rule(conds(map[string]any{"field": "amount", "operator": "gt"}, map[string]any{"field": "country", "operator": "eq", "value": 3})), status: 400, contains: []string{`"field":"conditions[0].value"`, `"field":"conditions[1].value"`}},
		{name: "bad pattern", method: "POST", url: mg, auth: all, body: rule(conds(map[string]any{"field": "country", "operator": "matches", "value": "("})), status: 400, contains: []string{`"field":"conditions[0].value"`}},
		{name: "timestamp value", method: "POST", url: mg, auth: all, body: rule(conds(map[string]any{"field": "ts", "operator": "lt", "value": "yesterday"})), status: 400, contains: []string{`"field":"conditions[0].value"`}},
		{name: "system field ok", method: "POST", url: mg, auth: all, body: rule(conds(map[string]any{"field": "_client_id", "operator": "in", "value": []string{"ic_a", "ic_b"}})), status: 201, contains: []string{`"cooldown_seconds":300`, `"enabled":true`, `"match":"all"`, `"severity":"warning"`, `"status":"active"`}},
		{name: "_ingest_id is not governed", method: "POST", url: mg, auth: all, body: rule(conds(map[string]any{"field": "_ingest_id", "operator": "exists"})), status: 400, contains: []string{`"field":"conditions[0].field"`}},
		{name: "short cooldown", method: "POST", url: mg, auth: all, body: rule(map[string]any{"cooldown_seconds": 299}), status: 400, contains: []string{`"field":"cooldown_seconds"`}},
		{name: "bad severity and match", method: "POST", url: mg, auth: all, body: rule(map[string]any{"severity": "high", "match": "some"}), status: 400, contains: []string{`"field":"severity"`, `"field":"match"`}},
		{name: "bad trigger type", method: "POST", url: mg, auth: all, body: rule(map[string]any{"trigger_type": "schedule"}), status: 400, contains: []string{`"field":"trigger_type"`}},
		{name: "unknown select and group fields", method: "POST", url: mg, auth: all, body: rule(map[string]any{"select_fields": []string{"nope"}, "group_by": []string{"country", "country"}}), status: 400, contains: []string{`"field":"select_fields[0]"`, `"field":"group_by[1]"`}},
		{name: "channel of no project", method: "POST", url: mg, auth: all, body: rule(map[string]any{"channel_ids": []string{"ch_01M7Z4MMBV5BFTG68JM01QSV4X"}}), status: 400, contains: []string{`"field":"channel_ids[0]"`}},
		{name: "a model id as channel", method: "POST", url: mg, auth: all, body: rule(map[string]any{"channel_ids": []string{f.model}}), status: 400, contains: []string{`"field":"channel_ids[0]"`}},
		{name: "a channel twice", method: "POST", url: mg, auth: all, body: rule(map[string]any{"channel_ids": []string{a.webhook, a.webhook}}), status: 400, contains: []string{`"field":"channel_ids[1]"`}},
		{name: "another project's channel", method: "POST", url: mg, auth: all, body: rule(map[string]any{"project_id": w.p2.ID, "channel_ids": []string{a.webhook}}), status: 400},
		{name: "list by q", method: "GET", url: mg + "?q=dutch&project_id=" + p, auth: all, status: 200, contains: []string{a.alert}},
		{name: "list by q, no match", method: "GET", url: mg + "?q=zzz&project_id=" + p, auth: all, status: 200, notContains: []string{a.alert}},
		{name: "list bad enabled", method: "GET", url: mg + "?enabled=yes&project_id=" + p, auth: all, status: 400, contains: []string{`"field":"enabled"`}},
		{name: "list bad trigger type", method: "GET", url: mg + "?trigger_type=cron&project_id=" + p, auth: all, status: 400},
		{name: "read", method: "GET", url: mg + "/" + a.alert, auth: all, status: 200, contains: []string{`"select_fields":["id","amount"]`, `"group_by":["country"]`, `"severity":"critical"`}},
		{name: "unknown id", method: "GET", url: mg + "/alr_01M7Z4MMBV5BFTG68JM01QSV4X", auth: all, status: 404},
		{name: "POST on an alert", method: "POST", url: mg + "/" + a.alert, auth: all, body: map[string]any{}, status: 405},
		{name: "update a condition badly", method: "PUT", url: mg + "/" + a.alert, auth: all, body: conds(map[string]any{"field": "amount", "operator": "gt", "value": "lots"}), status: 400, contains: []string{`"field":"conditions[0].value"`}},
		{name: "update", method: "PUT", url: mg + "/" + a.alert, auth: all, body: map[string]any{"description": "amount over 1000 in NL", "cooldown_seconds": 600}, status: 200, contains: []string{`"version":2`, `"cooldown_seconds":600`}},
		{name: "origin on update", method: "PUT", url: mg + "/" + a.alert, auth: all, body: map[string]any{"origin": "assistant"}, status: 400, contains: []string{`"field":"origin"`}},
		{name: "disable", method: "POST", url: mg + "/" + a.alert + "/disable", auth: all, status: 200, contains: []string{`"enabled":false`}},
		{name: "list disabled", method: "GET", url: mg + "?enabled=false&project_id=" + p, auth: all, status: 200, contains: []string{a.alert}},
		{name: "list enabled", method: "GET", url: mg + "?enabled=true&project_id=" + p, auth: all, status: 200, notContains: []string{a.alert}},
		{name: "enable", method: "POST", url: mg + "/" + a.alert + "/enable", auth: all, status: 200, contains: []string{`"enabled":true`}},
		{name: "archive", method: "DELETE", url: mg + "/" + a.alert, auth: all, status: 200, contains: []string{`"status":"archived"`, `"enabled":false`}},
		{name: "read archived", method: "GET", url: mg + "/" + a.alert, auth: all, status: 200, contains: []string{`"status":"archived"`}},
		{name: "enable archived", method: "POST", url: mg + "/" + a.alert + "/enable", auth: all, status: 409},
		{name: "update archived", method: "PUT", url: mg + "/" + a.alert, auth: all, body: map[string]any{"name": "x"}, status: 409},
		{name: "disable archived", method: "POST", url: mg + "/" + a.alert + "/disable", auth: all, status: 200, contains: []string{`"status":"archived"`}},
		{name: "archived model", method: "POST", url: mg, auth: all, body: rule(map[string]any{"model_key": "archived_model"}), status: 400, contains: []string{`"field":"model_key"`, "archived"}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			if sc.name == "archived model" {
				m := h.created(all, "/management/v1/models", map[string]any{"project_id": p, "key": "archived_model", "fields": []map[string]any{{"name": "amount", "type": "number"}}})
				h.run(t, scenario{method: "DELETE", url: "/management/v1/models/" + m, auth: all, status: 200})
			}
			h.run(t, sc)
		})
	}
	t.Run("stale If-Match", func(t *testing.T) {
		id := h.created(all, mg, rule(nil))
		if r := h.do("PUT", mg+"/"+id, all, map[string]any{"name": "z"}, "If-Match", `"9"`); r.status != 412 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
}

// TestAlertMetadata: governed fields of the active models with their operators, sorted, and
// byte-identical answers for identical state.
func TestAlertMetadata(t *testing.T) {
	h, w, all, _ := newResourceHarness(t)
	url := "/management/v1/alerts/metadata?project_id=" + w.p1.ID
	first := h.run(t, scenario{method: "GET", url: url, auth: all, status: 200, contains: []string{
		`"channel_types":["email","slack","webhook"]`, `"trigger_types":["event"]`, `"severities":["critical","info","warning"]`,
		`"cooldown_seconds_min":300`, `"deliveries_per_channel_per_minute":10`, `"deliveries_per_project_per_minute":60`,
		`{"name":"_client_id","type":"string"`, `{"name":"amount","type":"number","description":"","required":false,"system":false,"operators":["eq","exists","gt","gte","in","lt","lte","neq","not_exists","not_in"]`,
	}, notContains: []string{`"_ingest_id"`}}).body
	for i := 0; i < 3; i++ {
		if again := h.do("GET", url, all, nil).body; again != first {
			t.Fatalf("metadata changed without a change of state:\n%s\n%s", first, again)
		}
	}
	if console := h.do("GET", "/api/v1/alerts/metadata?project_id="+w.p1.ID, bearer(w.ownerSes), nil).body; console != first {
		t.Fatalf("console metadata differs:\n%s\n%s", first, console)
	}
	if i := strings.Index(first, `"name":"amount"`); i < 0 || i > strings.Index(first, `"name":"country"`) {
		t.Fatalf("fields not sorted by name: %s", first)
	}
	h.run(t, scenario{method: "GET", url: "/management/v1/alerts/metadata", auth: all, status: 400, contains: []string{`"field":"project_id"`}})
}

// TestAlertSimulation: per-condition explanations, only group and selected values of the
// event, the gates, no state change but the simulation record, and the assistant's rule.
func TestAlertSimulation(t *testing.T) {
	h, w, all, _ := newResourceHarness(t)
	p := w.p1.ID
	a := h.alertFixtures(all, p)
	draft := func(change map[string]any) map[string]any {
		d := map[string]any{"project_id": p, "name": "slow NL", "model_key": "orders",
			"conditions":    []map[string]any{{"field": "amount", "operator": "gt", "value": 100}, {"field": "country", "operator": "in", "value": []string{"NL", "BE"}}},
			"select_fields": []string{"id"}, "group_by": []string{"country"}, "channel_ids": []string{a.webhook},
			"sample_event": map[string]any{"id": "o-1", "amount": 250.5, "country": "NL", "card_number": "4111111111111111"}}
		for k, v := range change {
			d[k] = v
		}
		return d
	}
	alertBefore := h.do("GET", "/management/v1/alerts/"+a.alert, all, nil).body
	chanBefore := h.do("GET", "/management/v1/notification-channels?project_id="+p, all, nil).body
	sim := "/management/v1/alerts/simulate"
	for _, sc := range []scenario{
		{name: "matched", method: "POST", url: sim, auth: all, body: draft(nil), status: 200, contains: []string{
			`"valid":true`, `"matched":true`, `"would_notify":true`, `"gates":[]`, `"group":{"country":"NL"}`, `"selected":{"id":"o-1"}`,
			`"explanation":"amount is 250.5, greater than 100: matched"`, `"actual":"NL"`, `"simulation_id":"sim_`},
			notContains: []string{"4111111111111111"}},
		{name: "not matched", method: "POST", url: sim, auth: all, body: draft(map[string]any{"sample_event": map[string]any{"amount": 5, "country": "DE"}}), status: 200, contains: []string{
			`"matched":false`, `"would_notify":false`, `"gate":"not_matched"`, `"explanation":"amount is 5, less than 100: not matched"`, `"group":{"country":"DE"}`, `"selected":{"id":null}`}},
		{name: "missing field", method: "POST", url: sim, auth: all, body: draft(map[string]any{"sample_event": map[string]any{"country": "NL"}}), status: 200, contains: []string{
			`"explanation":"amount is missing, so gt fails"`, `"actual":null`}},
		{name: "any", method: "POST", url: sim, auth: all, body: draft(map[string]any{"match": "any", "sample_event": map[string]any{"country": "BE"}}), status: 200, contains: []string{`"matched":true`}},
		{name: "disabled draft and channel", method: "POST", url: sim, auth: all, body: draft(map[string]any{"enabled": false, "channel_ids": []string{a.slack}}), status: 200, contains: []string{
			`"matched":true`, `"would_notify":false`, `"gate":"alert_disabled"`, `"gate":"channel_disabled","channel_id":"` + a.slack, `"gate":"all_channels_disabled"`}},
		{name: "no channels", method: "POST", url: sim, auth: all, body: draft(map[string]any{"channel_ids": []string{}}), status: 200, contains: []string{`"gate":"no_channels"`, `"would_notify":false`}},
		{name: "invalid draft", method: "POST", url: sim, auth: all, body: draft(map[string]any{"conditions": []map[string]any{{"field": "amount", "operator": "starts_with", "value": "1"}}}), status: 400, contains: []string{`"field":"conditions[0].operator"`}},
		{name: "no sample event", method: "POST", url: sim, auth: all, body: draft(map[string]any{"sample_event": nil}), status: 400, contains: []string{`"field":"sample_event"`}},
		{name: "event not an object", method: "POST", url: sim, auth: all, body: draft(map[string]any{"sample_event": []int{1}}), status: 400, contains: []string{`"field":"sample_event"`}},
		{name: "saved alert", method: "POST", url: "/management/v1/alerts/" + a.alert + "/simulate", auth: all, body: map[string]any{"event": map[string]any{"id": "o-2", "amount": 5000, "country": "NL", "note": "private"}}, status: 200, contains: []string{
			`"matched":true`, `"would_notify":true`, `"selected":{"amount":5000,"id":"o-2"}`}, notContains: []string{"private"}},
		{name: "saved alert, no event", method: "POST", url: "/management/v1/alerts/" + a.alert + "/simulate", auth: all, body: map[string]any{}, status: 400, contains: []string{`"field":"event"`}},
		{name: "saved alert, unknown field", method: "POST", url: "/management/v1/alerts/" + a.alert + "/simulate", auth: all, body: map[string]any{"sample_event": map[string]any{}}, status: 400},
		{name: "console", method: "POST", url: "/api/v1/alerts/simulate", auth: bearer(w.ownerSes), body: draft(nil), status: 200, contains: []string{`"matched":true`}},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	if after := h.do("GET", "/management/v1/alerts/"+a.alert, all, nil).body; after != alertBefore {
		t.Fatalf("simulation changed the alert:\n%s\n%s", alertBefore, after)
	}
	if after := h.do("GET", "/management/v1/notification-channels?project_id="+p, all, nil).body; after != chanBefore {
		t.Fatalf("simulation changed a channel:\n%s\n%s", chanBefore, after)
	}

	// An assistant creates only what it simulated as a draft, within the hour.
	simID := func(body map[string]any) string {
		r := h.run(t, scenario{method: "POST", url: sim, auth: all, body: body, status: 200})
		var v struct {
			SimulationID string `json:"simulation_id"`
		}
		r.data(t, &v)
		return v.SimulationID
	}
	create := func(d map[string]any, origin, id string) map[string]any {
		c := map[string]any{}
		for k, v := range d {
			if k != "sample_event" {
				c[k] = v
			}
		}
		if origin != "" {
			c["origin"] = origin
		}
		if id != "" {
			c["simulation_id"] = id
		}
		return c
	}
	d := draft(nil)
	good := simID(d)
	savedSim := func() string {
		r := h.run(t, scenario{method: "POST", url: "/management/v1/alerts/" + a.alert + "/simulate", auth: all, body: map[string]any{"event": map[string]any{}}, status: 200})
		var v struct {
			SimulationID string `json:"simulation_id"`
		}
		r.data(t, &v)
		return v.SimulationID
	}()
	for _, sc := range []scenario{
		{name: "assistant without simulation", method: "POST", url: "/management/v1/alerts", auth: all, body: create(d, "assistant", ""), status: 409, contains: []string{`"field":"simulation_id"`}},
		{name: "assistant with an unknown simulation", method: "POST", url: "/management/v1/alerts", auth: all, body: create(d, "assistant", "sim_01M7Z4MMBV5BFTG68JM01QSV4X"), status: 409},
		{name: "assistant with a saved alert's simulation", method: "POST", url: "/management/v1/alerts", auth: all, body: create(d, "assistant", savedSim), status: 409},
		{name: "assistant with another rule's simulation", method: "POST", url: "/management/v1/alerts", auth: all, body: create(draft(map[string]any{"severity": "critical"}), "assistant", good), status: 409, contains: []string{"different rule"}},
		{name: "simulation_id without origin", method: "POST", url: "/management/v1/alerts", auth: all, body: create(d, "", good), status: 400, contains: []string{`"field":"simulation_id"`}},
		{name: "bad origin", method: "POST", url: "/management/v1/alerts", auth: all, body: create(d, "robot", good), status: 400, contains: []string{`"field":"origin"`}},
		{name: "assistant with its simulation", method: "POST", url: "/management/v1/alerts", auth: all, body: create(d, "assistant", good), status: 201, contains: []string{`"origin":"assistant"`, `"simulation_id":"` + good}},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}
	t.Run("assistant after an hour", func(t *testing.T) {
		late := simID(d)
		h.clock.Advance(time.Hour + time.Second)
		h.run(t, scenario{method: "POST", url: "/management/v1/alerts", auth: all, body: create(d, "assistant", late), status: 409, contains: []string{"older than an hour"}})
	})
}

// TestChannels: per-type configuration checks, secrets generated once, masked on every read
// and kept when sent back masked.
func TestChannels(t *testing.T) {
	h, w, all, _ := newResourceHarness(t)
	p := w.p1.ID
	a := h.alertFixtures(all, p)
	mg := "/management/v1/notification-channels"
	ch := func(typ string, cfg map[string]any) map[string]any {
		return map[string]any{"project_id": p, "name": "c", "type": typ, "config": cfg}
	}
	smtp := func(change map[string]any) map[string]any {
		c := map[string]any{"host": "smtp.example", "port": 587, "username": "lookout", "password": "smtp-password-123", "from": "alerts@example.com", "to": []string{"ops@example.com"}}
		for k, v := range change {
			c[k] = v
		}
		return c
	}
	for _, sc := range []scenario{
		{name: "no type", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "name": "c", "config": map[string]any{}}, status: 400, contains: []string{`"field":"type"`}},
		{name: "bad type", method: "POST", url: mg, auth: all, body: ch("pager", map[string]any{}), status: 400, contains: []string{`"field":"type"`}},
		{name: "no config", method: "POST", url: mg, auth: all, body: map[string]any{"project_id": p, "name": "c", "type": "webhook"}, status: 400, contains: []string{`"field":"config"`}},
		{name: "webhook bad url", method: "POST", url: mg, auth: all, body: ch("webhook", map[string]any{"url": "ftp://x"}), status: 400, contains: []string{`"field":"config.url"`}},
		{name: "webhook url with password", method: "POST", url: mg, auth: all, body: ch("webhook", map[string]any{"url": "https://u:p@x.example/"}), status: 400, contains: []string{`"field":"config.url"`}},
		{name: "webhook unknown setting", method: "POST", url: mg, auth: all, body: ch("webhook", map[string]any{"url": "https://x.example/", "host": "y"}), status: 400, contains: []string{`"field":"config.host"`}},
		{name: "webhook reserved headers", method: "POST", url: mg, auth: all, body: ch("webhook", map[string]any{"url": "https://x.example/", "headers": map[string]string{"content-type": "text/plain", "Webhook-Signature": "v1,x", "host": "evil"}}), status: 400, contains: []string{`"field":"config.headers.content-type"`, `"field":"config.headers.Webhook-Signature"`, `"field":"config.headers.host"`}},
		{name: "webhook header with a newline", method: "POST", url: mg, auth: all, body: ch("webhook", map[string]any{"url": "https://x.example/", "headers": map[string]string{"X-A": "1\r\nX-B: 2"}}), status: 400, contains: []string{`"field":"config.headers.X-A"`}},
		{name: "webhook bad secret", method: "POST", url: mg, auth: all, body: ch("webhook", map[string]any{"url": "https://x.example/", "signing_secret": "hunter2"}), status: 400, contains: []string{`"field":"config.signing_secret"`}},
		{name: "webhook given secret", method: "POST", url: mg, auth: all, body: ch("webhook", map[string]any{"url": "https://x.example/", "signing_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}), status: 201, contains: []string{`"signing_secret":"****LaSw"`}, notContains: []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2"}},
		{name: "slack bad url", method: "POST", url: mg, auth: all, body: ch("slack", map[string]any{"url": "not a url"}), status: 400, contains: []string{`"field":"config.url"`}},
		{name: "email bad", method: "POST", url: mg, auth: all, body: ch("email", smtp(map[string]any{"host": "", "port": 0, "from": "Ops <ops@example.com>", "to": []string{"nobody"}})), status: 400, contains: []string{`"field":"config.host"`, `"field":"config.port"`, `"field":"config.from"`, `"field":"config.to[0]"`}},
		{name: "email user without password", method: "POST", url: mg, auth: all, body: ch("email", smtp(map[string]any{"password": ""})), status: 400, contains: []string{`"field":"config.password"`}},
		{name: "email password in the clear", method: "POST", url: mg, auth: all, body: ch("email", smtp(map[string]any{"starttls": false})), status: 400, contains: []string{`"field":"config.starttls"`}},
		{name: "email", method: "POST", url: mg, auth: all, body: ch("email", smtp(nil)), status: 201, contains: []string{`"password":"****-123"`, `"starttls":true`, `"to":["ops@example.com"]`}, notContains: []string{"smtp-password-123"}},
		{name: "read webhook masked", method: "GET", url: mg + "/" + a.webhook, auth: all, status: 200, contains: []string{`"X-Api-Key":"****cdef"`, `"signing_secret":"****`, `"url":"https://hooks.example/lookout"`}, notContains: []string{"key-0123456789abcdef", "whsec_"}},
		{name: "read slack masked", method: "GET", url: mg + "/" + a.slack, auth: all, status: 200, contains: []string{`"url":"****oken"`, `"enabled":false`}, notContains: []string{"very-secret-token"}},
		{name: "list masked", method: "GET", url: mg + "?project_id=" + p, auth: all, status: 200, notContains: []string{"very-secret-token", "key-0123456789abcdef", "whsec_"}},
		{name: "type change", method: "PUT", url: mg + "/" + a.slack, auth: all, body: map[string]any{"type": "webhook", "config": map[string]any{"url": "https://x.example/"}}, status: 409},
		{name: "put without config", method: "PUT", url: mg + "/" + a.slack, auth: all, body: map[string]any{"name": "x"}, status: 400, contains: []string{`"field":"config"`}},
		{name: "enable", method: "POST", url: mg + "/" + a.slack + "/enable", auth: all, status: 200, contains: []string{`"enabled":true`}},
		{name: "unknown id", method: "GET", url: mg + "/ch_01M7Z4MMBV5BFTG68JM01QSV4X", auth: all, status: 404},
	} {
		t.Run(sc.name, func(t *testing.T) { h.run(t, sc) })
	}

	t.Run("masked values sent back keep the secrets", func(t *testing.T) {
		before, err := h.st.Channel(p, a.webhook)
		if err != nil {
			t.Fatal(err)
		}
		var read struct {
			Config map[string]any `json:"config"`
		}
		h.run(t, scenario{method: "GET", url: mg + "/" + a.webhook, auth: all, status: 200}).data(t, &read)
		h.run(t, scenario{method: "PUT", url: mg + "/" + a.webhook, auth: all, body: map[string]any{"name": "renamed", "config": read.Config}, status: 200, contains: []string{`"name":"renamed"`, `"version":2`}})
		after, err := h.st.Channel(p, a.webhook)
		if err != nil {
			t.Fatal(err)
		}
		if len(after.Secrets) != 2 || after.Secrets["signing_secret"] != before.Secrets["signing_secret"] || after.Secrets["header:X-Api-Key"] != "key-0123456789abcdef" {
			t.Fatalf("secrets changed: %v -> %v", before.Secrets, after.Secrets)
		}
		// A new value replaces one; a header left out is gone; the secret left out is kept.
		h.run(t, scenario{method: "PUT", url: mg + "/" + a.webhook, auth: all, body: map[string]any{"config": map[string]any{"url": "https://hooks.example/v2", "headers": map[string]string{"X-Other": "other-value-0123456"}}}, status: 200, contains: []string{`"X-Other":"****3456"`}, notContains: []string{"X-Api-Key"}})
		after, _ = h.st.Channel(p, a.webhook)
		if after.Secrets["signing_secret"] != before.Secrets["signing_secret"] || after.Secrets["header:X-Other"] != "other-value-0123456" || after.Secrets["header:X-Api-Key"] != "" {
			t.Fatalf("after replacing a header: %v", after.Secrets)
		}
	})
	t.Run("a made signing secret is shown once", func(t *testing.T) {
		r := h.run(t, scenario{method: "POST", url: mg, auth: all, body: ch("webhook", map[string]any{"url": "https://x.example/"}), status: 201})
		var v struct {
			ID            string `json:"id"`
			SigningSecret string `json:"signing_secret"`
		}
		r.data(t, &v)
		stored, err := h.st.Channel(p, v.ID)
		if err != nil || !strings.HasPrefix(v.SigningSecret, "whsec_") || stored.Secrets["signing_secret"] != v.SigningSecret {
			t.Fatalf("create answered %q, stored %q (%v)", v.SigningSecret, stored.Secrets["signing_secret"], err)
		}
		if r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("Cache-Control %q", r.header.Get("Cache-Control"))
		}
		if again := h.do("GET", mg+"/"+v.ID, all, nil).body; strings.Contains(again, v.SigningSecret) {
			t.Fatalf("the secret came back on a read: %s", again)
		}
	})
}

// TestIncidentsAndDeliveries: incidents opened by matches are listed newest first with
// their filters, read with occurrences and deliveries, acknowledged and resolved once each;
// deliveries are read, listed, and retried only when failed; a channel test answers 202.
func TestIncidentsAndDeliveries(t *testing.T) {
	h, w, all, _ := newResourceHarness(t)
	p := w.p1.ID
	a := h.alertFixtures(all, p)
	in, dl := "/management/v1/alert-incidents", "/management/v1/alert-deliveries"
	var testDelivery string
	for _, sc := range []scenario{
		{name: "list", method: "GET", url: in + "?project_id=" + p, auth: all, status: 200, contains: []string{a.incident, `"status":"open"`, `"occurrences":1`, `"group":{"country":"NL"}`}},
		{name: "list by status", method: "GET", url: in + "?status=resolved&project_id=" + p, auth: all, status: 200, notContains: []string{a.incident}},
		{name: "list by severity", method: "GET", url: in + "?severity=critical&project_id=" + p, auth: all, status: 200, contains: []string{a.incident}},
		{name: "list by alert", method: "GET", url: in + "?alert_id=" + a.alert + "&project_id=" + p, auth: all, status: 200, contains: []string{a.incident}},
		{name: "list by another alert", method: "GET", url: in + "?alert_id=alr_01M7Z4MMBV5BFTG68JM01QSV4X&project_id=" + p, auth: all, status: 200, notContains: []string{a.incident}},
		{name: "bad status", method: "GET", url: in + "?status=closed&project_id=" + p, auth: all, status: 400, contains: []string{`"field":"status"`}},
		{name: "bad severity", method: "GET", url: in + "?severity=high&project_id=" + p, auth: all, status: 400, contains: []string{`"field":"severity"`}},
		{name: "detail", method: "GET", url: in + "/" + a.incident, auth: all, status: 200, contains: []string{`"recent_occurrences":[{"number":1`, `"selected":{"id":"o-1","amount":5000}`, `"deliveries":[{"id":"` + a.delivery, `"kind":"opening"`, `"status":"pending"`}},
		{name: "unknown incident", method: "GET", url: in + "/inc_01M7Z4MMBV5BFTG68JM01QSV4X", auth: all, status: 404},
		{name: "delivery", method: "GET", url: dl + "/" + a.delivery, auth: all, status: 200, contains: []string{`"incident_id":"` + a.incident, `"channel_type":"webhook"`, `"attempts":0`}},
		{name: "retry a pending delivery", method: "POST", url: dl + "/" + a.delivery + "/retry", auth: all, status: 409, contains: []string{"pending"}},
		{name: "deliveries of the incident", method: "GET", url: dl + "?incident_id=" + a.incident + "&project_id=" + p, auth: all, status: 200, contains: []string{a.delivery}},
		{name: "deliveries bad kind", method: "GET", url: dl + "?kind=page&project_id=" + p, auth: all, status: 400, contains: []string{`"field":"kind"`}},
		{name: "acknowledge", method: "POST", url: in + "/" + a.incident + "/acknowledge", auth: all, status: 200, contains: []string{`"status":"acknowledged"`, `"acknowledged_at":"20`}},
		{name: "acknowledge again", method: "POST", url: in + "/" + a.incident + "/acknowledge", auth: all, status: 409},
		{name: "resolve", method: "POST", url: in + "/" + a.incident + "/resolve", auth: all, status: 200, contains: []string{`"status":"resolved"`, `"kind":"resolution"`}},
		{name: "resolve again", method: "POST", url: in + "/" + a.incident + "/resolve", auth: all, status: 409},
		{name: "acknowledge resolved", method: "POST", url: in + "/" + a.incident + "/acknowledge", auth: all, status: 409},
		{name: "console list", method: "GET", url: "/api/v1/alert-incidents?project_id=" + p, auth: bearer(w.memberSes), status: 200, contains: []string{a.incident}},
		{name: "channel test", method: "POST", url: "/management/v1/notification-channels/" + a.slack + "/test", auth: all, status: 202, contains: []string{`"kind":"test"`, `"status":"pending"`, `"channel_type":"slack"`}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			r := h.run(t, sc)
			if sc.name == "channel test" {
				var d struct {
					ID string `json:"id"`
				}
				r.data(t, &d)
				testDelivery = d.ID
			}
		})
	}
	h.run(t, scenario{method: "GET", url: dl + "?kind=test&project_id=" + p, auth: all, status: 200, contains: []string{testDelivery}, notContains: []string{a.delivery}})
	h.run(t, scenario{method: "GET", url: "/management/v1/alert-deliveries/" + testDelivery, auth: h.token(w, []string{"alerts:read"}, w.p2.ID), status: 404})

	// The queue and the evaluator show in /metrics.
	fams, err := h.srv.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for key, min := range map[string]float64{
		"lookout_alert_delivery_queue,status=pending":   3, // the opening, the resolution, the test
		"lookout_alert_delivery_oldest_pending_seconds": 0,
		"lookout_alert_evaluated_records_total":         1,
		"lookout_alert_matches_total":                   1,
		"lookout_alert_evaluation_seconds_per_record":   0,
	} {
		if v, ok := got[key]; !ok || v < min {
			t.Errorf("metric %s = %v (present %v), want at least %v", key, v, ok, min)
		}
	}
}
