// Package external is what Lookout needs of an engine built for scale (ClickHouse,
// PostgreSQL) that a model's data path can move to: one table per model, created and
// altered additively from the model, idempotent inserts, and parameterized queries. The
// engines live beside it (warehouse/clickhouse, warehouse/postgres); the sink
// (warehouse/sink) ships each model's local record log to its engine, and the query
// runtime compiles queries for an engine through its Dialect.
package external

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"lookout/store"
	"lookout/warehouse"
)

// System columns every table has after the model's fields. _received_at is µs since the
// epoch; (_ingest_id, _seq) is the idempotent key of a record (_seq is its sequence number
// in the model's local log, unique within the model).
const (
	ColReceivedAt = "_received_at"
	ColClientID   = "_client_id"
	ColIngestID   = "_ingest_id"
	ColSeq        = "_seq"
)

// TypeSeq is the type of the _seq column (an unsigned 64-bit integer).
const TypeSeq = "seq"

// Column is one column of an engine table: a model field's name and store type, or a
// system column.
type Column struct {
	Name string
	Type string
}

// Table is the table of one model in an engine.
type Table struct {
	Name    string
	Columns []Column
	// Owner marks the table as this model's (in a table or column comment): models of
	// different projects may share a key, and one must never write into another's table.
	Owner string

	fields map[string]int // model field name → column index
}

// TableFor returns the table of a model: its fields in order, then the system columns.
// The table is named after the model's key (a valid identifier), so it reads naturally
// from the engine's own tools.
func TableFor(m *store.Model) *Table {
	t := &Table{Name: m.Key, Owner: "lookout model " + m.ID}
	for _, f := range warehouse.Schema(m) {
		t.Columns = append(t.Columns, Column{Name: f.Name, Type: f.Type})
	}
	t.Columns = append(t.Columns, Column{Name: ColSeq, Type: TypeSeq})
	t.fields = make(map[string]int, len(m.Fields))
	for i, f := range m.Fields {
		t.fields[f.Name] = i
	}
	return t
}

// Row builds a table's row from a record of the local log: values as
// warehouse.FieldValue reads them (timestamps in µs), in the table's column order.
func (t *Table) Row(r *warehouse.OutboxRecord, dst []any) []any {
	dst = dst[:0]
	for range t.Columns {
		dst = append(dst, nil)
	}
	nf := len(t.fields)
	warehouse.EachField(r.Fields, func(key string, raw []byte) bool {
		if i, ok := t.fields[key]; ok {
			dst[i] = warehouse.FieldValue(t.Columns[i].Type, raw)
		}
		return true
	})
	dst[nf], dst[nf+1], dst[nf+2], dst[nf+3] = r.ReceivedUS, r.ClientID, r.IngestID, r.Seq
	return dst
}

// Statement is a compiled query: SQL text with its bound arguments (placeholders for
// PostgreSQL; ClickHouse renders values as literals and has none) and the store type of
// each result column, which tells the engine how to decode it.
type Statement struct {
	SQL   string
	Args  []any
	Types []string
}

// NotOwned is EnsureTable's refusal of a table of the model's name that another model, or
// another tool, made.
func NotOwned(engine, table, owner, want string) error {
	if owner == "" {
		owner = "nothing Lookout made"
	}
	return Errorf(engine, nil, "table %s exists but is not this model's (it is marked %q, want %q): give each project its own database or schema, or drop that table", table, owner, want)
}

// Engine is a connection to an external warehouse. Values going in and out are nil,
// string, int64 (integers; timestamps in µs), float64, bool, and uint64 for _seq; result
// values of object and array columns are their raw JSON as a string.
type Engine interface {
	// Ping checks that the engine answers and the credentials are accepted.
	Ping(ctx context.Context) error
	// EnsureTable creates the table, or adds the columns it lacks (never drops or
	// changes one).
	EnsureTable(ctx context.Context, t *Table) error
	// Insert writes rows; a row whose (_ingest_id, _seq) is already there is not stored
	// twice (as seen through queries).
	Insert(ctx context.Context, t *Table, rows [][]any) error
	// Query runs a statement and returns its rows.
	Query(ctx context.Context, st *Statement) ([][]any, error)
	// Dialect is how statements are written for this engine.
	Dialect() Dialect
	// Close releases the connection.
	Close() error
}

// Dialect is what differs between engines' SQL. Everything else the query compiler
// writes is SQL that ClickHouse 18.16+ and PostgreSQL 13+ both accept.
type Dialect interface {
	// Ident quotes an identifier.
	Ident(name string) string
	// Value puts a value into the statement: a placeholder bound in args, or a literal.
	Value(args *[]any, v any) string
	// Table is the FROM clause of a table: ClickHouse adds FINAL, so a record delivered
	// twice is seen once.
	Table(name string) string
	// Contains, StartsWith, EndsWith and Matches are byte-wise, case-sensitive tests of
	// a string column (Matches: an unanchored regular expression search).
	Contains(col, arg string) string
	StartsWith(col, arg string) string
	EndsWith(col, arg string) string
	Matches(col, arg string) string
	// Pattern rewrites an RE2 pattern (as cond checked it) so that the engine's regular
	// expressions read it as RE2 does: "." never matches a newline unless (?s) says so.
	Pattern(p string) string
	// Sum and Avg of an integer or number column, as a double; NULL over no values.
	Sum(col, typ string) string
	Avg(col, typ string) string
	// Min and Max of a column of the store type typ.
	Min(col, typ string) string
	Max(col, typ string) string
	// CountDistinct counts the distinct non-null values of a column.
	CountDistinct(col string) string
}

// Error is an engine's own message, with secrets already taken out, for a 400 on a
// connection test or a 503 on a query.
type Error struct {
	Engine string
	Msg    string
	// Invalid is set when the engine refused the query's input (a pattern its regular
	// expressions do not take): a 400, not a 503.
	Invalid bool
}

func (e *Error) Error() string { return e.Engine + ": " + e.Msg }

// Redact takes each secret out of an engine's message.
func Redact(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "****")
		}
	}
	if len(msg) > 1024 {
		msg = msg[:1024] + "…"
	}
	return msg
}

// Errorf makes an engine Error with secrets redacted.
func Errorf(engine string, secrets []string, format string, args ...any) error {
	return &Error{Engine: engine, Msg: Redact(fmt.Sprintf(format, args...), secrets...)}
}

// Message returns the engine's message of err for a user, or a generic sentence when err
// is not an engine Error.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the engine did not answer in time"
	}
	return "the engine could not be reached"
}
