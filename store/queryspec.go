package store

import "errors"

// The query object (CONTRACTS §5) as Analytics APIs store it and the query runtime runs it.

// Filter is one condition: field op value. value may be {"param": "name"}, a reference to a
// parameter of the Analytics API.
type Filter struct {
	Field string `json:"field"`
	Op    string `json:"op"`
	Value any    `json:"value,omitempty"`
}

// Aggregation computes one output column over a group.
type Aggregation struct {
	Fn    string `json:"fn"`
	Field string `json:"field,omitempty"`
	As    string `json:"as,omitempty"`
}

// OrderBy sorts by an output column.
type OrderBy struct {
	Field string `json:"field"`
	Desc  bool   `json:"desc"`
}

// TimeRange bounds the records' receive time: RFC 3339 instants, or durations before now
// written with a minus sign ("-24h"). Either end may be empty.
type TimeRange struct {
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// QuerySpec is a stored or ad-hoc query over one model.
type QuerySpec struct {
	Select       []string      `json:"select,omitempty"`
	Filters      []Filter      `json:"filters,omitempty"`
	GroupBy      []string      `json:"group_by,omitempty"`
	Aggregations []Aggregation `json:"aggregations,omitempty"`
	OrderBy      []OrderBy     `json:"order_by,omitempty"`
	Limit        int           `json:"limit,omitempty"`
	TimeRange    *TimeRange    `json:"time_range,omitempty"`
}

// Param is a parameter of an Analytics API, supplied by the caller at query time.
type Param struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	Default  any    `json:"default,omitempty"`
}

// MaxQueryLimit is the largest limit a query may ask for.
const MaxQueryLimit = 10000

// QueryRules validates query objects against models. The query package owns the rules
// (query.Rules); the store calls them inside its own transaction, against the model it read
// there, so a query is never stored unchecked.
type QueryRules interface {
	// ValidateQuery checks a query against a model and the declared parameters, each
	// problem named by its path ("query.filters[0].op").
	ValidateQuery(m *Model, q *QuerySpec, params []Param) []FieldError
	// ValidateParams checks an Analytics API's parameter declarations.
	ValidateParams(params []Param) []FieldError
	// ValidateFilter checks what can be checked of a filter without a model.
	ValidateFilter(f Filter) []FieldError
}

var errNoQueryRules = errors.New("store opened without query rules: query objects cannot be checked")
