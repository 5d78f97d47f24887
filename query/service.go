package query

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"lookout/store"
	"lookout/warehouse"
	"lookout/warehouse/external"
)

// Forms of a query request, for metrics.
const (
	FormAdhoc = "adhoc"
	FormAPI   = "api"
)

// Service runs queries for the query runtime and the console.
type Service struct {
	Store   *store.Store
	Records *warehouse.RecordStore
	Now     func() time.Time
	Caps    Caps
	// Engine opens the engine of an external warehouse (the sink's, shared); nil means
	// queries run on embedded warehouses only.
	Engine func(w store.Warehouse) (external.Engine, error)
}

// Caller is a query client as authenticated for one request.
type Caller struct {
	Client store.Client
	// KeyModels narrows the ad-hoc models when the runtime key names models.
	KeyModels []string
}

// Body is a POST /query body: either {"api", "params"} or an ad-hoc query.
type Body struct {
	API    string          `json:"api"`
	Params map[string]any  `json:"params"`
	Schema string          `json:"schema"`
	Query  store.QuerySpec `json:"-"`
}

// adhocKeys are the keys of the ad-hoc form besides schema.
var adhocKeys = []string{"select", "filters", "group_by", "aggregations", "order_by", "limit", "time_range"}

// MaxBody caps a query body.
const MaxBody = 1 << 20

// Decode reads a query body. Unknown keys, a body that mixes the two forms, and JSON that
// does not fit are a 400 naming what is wrong (the first such key in sorted order, so the
// answer is the same every time).
func Decode(raw []byte) (*Body, error) {
	if len(raw) > MaxBody {
		return nil, store.Errorf(store.CodeTooLarge, "the query body is over %d bytes", MaxBody)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return nil, store.Errorf(store.CodeInvalidJSON, "the body must be a JSON object: a query (CONTRACTS §5)")
	}
	var b Body
	_, isAPI := keys["api"]
	for _, k := range sortedKeys(keys) {
		switch {
		case k == "api" || k == "params":
			if !isAPI {
				return nil, store.Invalid(store.FieldError{Field: k, Message: "params go with api: {\"api\": \"<key>\", \"params\": {…}}"})
			}
		case k == "schema" || slices.Contains(adhocKeys, k):
			if isAPI {
				return nil, store.Invalid(store.FieldError{Field: k, Message: "an Analytics API call takes only api and params; its query is stored with the API"})
			}
		default:
			return nil, store.Invalid(store.FieldError{Field: k, Message: "is not a field of a query (api, params, or schema, select, filters, group_by, aggregations, order_by, limit, time_range)"})
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if isAPI {
		var v struct {
			API    string         `json:"api"`
			Params map[string]any `json:"params"`
		}
		if err := dec.Decode(&v); err != nil {
			return nil, jsonError(err)
		}
		if v.API == "" {
			return nil, store.Invalid(store.FieldError{Field: "api", Message: "must name an Analytics API by key"})
		}
		b.API, b.Params = v.API, v.Params
		return &b, nil
	}
	var v struct {
		Schema string `json:"schema"`
		store.QuerySpec
	}
	if err := dec.Decode(&v); err != nil {
		return nil, jsonError(err)
	}
	if v.Schema == "" {
		return nil, store.Invalid(store.FieldError{Field: "schema", Message: "must name the model to query (or use api)"})
	}
	b.Schema, b.Query = v.Schema, v.QuerySpec
	return &b, nil
}

func jsonError(err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	return store.Errorf(store.CodeInvalidJSON, "the query does not fit the query object: %s", msg)
}

// Run runs a runtime query for a query client: the ad-hoc form on its adhoc_models, the
// API form on its analytics_apis, with its required filters ANDed in. Returns the form,
// and validation_failed, forbidden, not_found, conflict (no active binding), unavailable.
func (s *Service) Run(ctx context.Context, c Caller, b *Body) (*Result, string, error) {
	qo := c.Client.QueryOptions
	if qo == nil {
		return nil, "", store.Errorf(store.CodeForbidden, "only query clients run queries")
	}
	if b.API != "" {
		// An unknown or archived API is a 404 (checked first, as the issue orders it); a
		// live one the client may not run is a 403.
		allowed := func(key string) bool { return slices.Contains(qo.AnalyticsAPIs, key) }
		res, err := s.runAPI(ctx, c.Client.ProjectID, b, qo.RequiredFilters, c.KeyModels, allowed)
		return res, FormAPI, err
	}
	if !slices.Contains(qo.AdhocModels, b.Schema) || (len(c.KeyModels) > 0 && !slices.Contains(c.KeyModels, b.Schema)) {
		return nil, FormAdhoc, store.Errorf(store.CodeForbidden, "this client may not query model %q ad hoc", b.Schema)
	}
	res, err := s.runAdhoc(ctx, c.Client.ProjectID, b, qo.RequiredFilters)
	return res, FormAdhoc, err
}

// RunConsole runs a query for a console user: any model or API of the project, without
// required filters.
func (s *Service) RunConsole(ctx context.Context, projectID string, b *Body) (*Result, string, error) {
	if b.API != "" {
		res, err := s.runAPI(ctx, projectID, b, nil, nil, nil)
		return res, FormAPI, err
	}
	res, err := s.runAdhoc(ctx, projectID, b, nil)
	return res, FormAdhoc, err
}

func (s *Service) runAdhoc(ctx context.Context, projectID string, b *Body, required []store.Filter) (*Result, error) {
	m, err := s.Store.ModelByKey(projectID, b.Schema)
	if store.IsCode(err, store.CodeNotFound) {
		return nil, store.Invalid(store.FieldError{Field: "schema", Message: fmt.Sprintf("%q is not a model of this project", b.Schema)})
	}
	if err != nil {
		return nil, err
	}
	if _, errs := Validate(&m, &b.Query, nil); len(errs) > 0 {
		return nil, store.Invalid(unprefix(errs)...)
	}
	res, err := s.exec(ctx, &m, m.WarehouseID, &b.Query, required)
	// The engine's own 400s (the group and distinct caps) name paths of the query too.
	var e *store.Error
	if errors.As(err, &e) && e.Code == store.CodeValidation && len(e.Fields) > 0 {
		return nil, store.Invalid(unprefix(e.Fields)...)
	}
	return res, err
}

// unprefix drops the "query." of validation paths: in an ad-hoc body the query is the
// body itself.
func unprefix(errs []store.FieldError) []store.FieldError {
	out := make([]store.FieldError, len(errs))
	for i, e := range errs {
		out[i] = store.FieldError{Field: strings.TrimPrefix(e.Field, "query."), Message: e.Message}
	}
	return out
}

// runAPI runs an Analytics API. keyModels, when not empty, are the models the caller's key
// is narrowed to: an API reading another model is as closed to it as that model is.
func (s *Service) runAPI(ctx context.Context, projectID string, b *Body, required []store.Filter, keyModels []string, allowed func(string) bool) (*Result, error) {
	api, err := s.Store.AnalyticsAPIByKey(projectID, b.API)
	if err != nil {
		return nil, err
	}
	if api.Status != store.StatusActive {
		return nil, store.Errorf(store.CodeNotFound, "Analytics API %q is archived", b.API)
	}
	if allowed != nil && !allowed(api.Key) {
		return nil, store.Errorf(store.CodeForbidden, "this client may not run Analytics API %q", b.API)
	}
	if len(keyModels) > 0 && !slices.Contains(keyModels, api.ModelKey) {
		return nil, store.Errorf(store.CodeForbidden, "this key may not run Analytics API %q: it reads model %q, outside the key's models", b.API, api.ModelKey)
	}
	bindings, _, err := s.Store.ListBindings(projectID, api.ID, store.BindingActive, store.Page{Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(bindings) == 0 {
		return nil, store.Errorf(store.CodeConflict, "Analytics API %q has no active binding: create one and promote it", b.API)
	}
	m, err := s.Store.ModelByKey(projectID, api.ModelKey)
	if err != nil {
		return nil, err
	}
	q, err := Bind(&api, b.Params)
	if err != nil {
		return nil, err
	}
	return s.exec(ctx, &m, bindings[0].WarehouseID, q, required)
}

func (s *Service) exec(ctx context.Context, m *store.Model, warehouseID string, q *store.QuerySpec, required []store.Filter) (*Result, error) {
	wh, err := s.Store.Warehouse(m.ProjectID, warehouseID)
	if err != nil {
		return nil, err
	}
	req := &Request{Model: m, Query: q, Required: required, Now: s.Now(), Caps: s.Caps}
	if wh.Type != store.WarehouseEmbedded {
		if s.Engine == nil {
			return nil, store.Errorf(store.CodeConflict, "warehouse %s is of type %s, which this server does not query", wh.ID, wh.Type)
		}
		eng, err := s.Engine(wh)
		if err != nil {
			return nil, store.Errorf(store.CodeUnavailable, "the warehouse could not be reached: %s", external.Message(err))
		}
		return RunExternal(ctx, eng, req)
	}
	data, err := s.Records.Existing(warehouseID)
	if errors.Is(err, warehouse.ErrNoFile) {
		data, err = nil, nil // no records yet: the query runs over none
	}
	if err != nil {
		return nil, err
	}
	return Run(ctx, data, req)
}

// Bind returns an Analytics API's query with the caller's params in place: each param
// typed and checked (missing required, wrong type or unknown: a 400 naming it), defaults
// applied.
func Bind(api *store.AnalyticsAPI, params map[string]any) (*store.QuerySpec, error) {
	declared := map[string]store.Param{}
	for _, p := range api.Params {
		declared[p.Name] = p
	}
	var errs []store.FieldError
	names := make([]string, 0, len(params))
	for name := range params {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := declared[name]; !ok {
			errs = append(errs, store.FieldError{Field: "params." + name, Message: fmt.Sprintf("is not a param of Analytics API %s", api.Key)})
		}
	}
	values := map[string]any{}
	for _, p := range api.Params {
		v, given := params[p.Name]
		if !given || v == nil {
			if p.Required {
				errs = append(errs, store.FieldError{Field: "params." + p.Name, Message: "is required"})
				continue
			}
			if p.Default == nil {
				continue // an unset optional param: its filters are left out
			}
			v = p.Default
		}
		nv, msg := store.CheckValue(p.Type, v)
		if msg != "" {
			errs = append(errs, store.FieldError{Field: "params." + p.Name, Message: msg})
			continue
		}
		values[p.Name] = nv
	}
	if len(errs) > 0 {
		return nil, store.Invalid(errs...)
	}
	q := api.Query
	q.Filters = nil
	for _, f := range api.Query.Filters {
		if name, ok := paramRef(f.Value); ok {
			v, set := values[name]
			if !set {
				continue
			}
			f.Value = v
		}
		q.Filters = append(q.Filters, f)
	}
	return &q, nil
}
