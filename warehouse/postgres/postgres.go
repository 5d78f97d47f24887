// Package postgres is the PostgreSQL engine of an external warehouse (PostgreSQL 13+),
// through pgx. Values always travel as bind parameters. A model's table has the primary
// key (_ingest_id, _seq), and the sink's inserts say ON CONFLICT DO NOTHING, so a batch
// delivered twice stores each record once. Text columns use the "C" collation, so that
// comparisons, ordering, min and max are byte-wise, as in the embedded engine.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"lookout/store"
	"lookout/warehouse/external"
)

// Config is how to reach a PostgreSQL server.
type Config struct {
	Host     string
	Port     int
	Database string
	Schema   string
	SSLMode  string
	User     string
	Password string
}

// Engine is one schema of a PostgreSQL database.
type Engine struct {
	cfg  Config
	pool *pgxpool.Pool
}

var _ external.Engine = (*Engine)(nil)

const engineName = "postgres"

// Open makes a connection pool (connections are made on first use: Ping checks them).
// Errors: an external.Error for a configuration pgx refuses or a missing user.
func Open(cfg Config) (*Engine, error) {
	if cfg.Schema == "" {
		cfg.Schema = "public"
	}
	if cfg.SSLMode == "" {
		cfg.SSLMode = "prefer"
	}
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)), Path: "/" + cfg.Database,
		RawQuery: url.Values{"sslmode": {cfg.SSLMode}, "connect_timeout": {"10"}, "application_name": {"lookout"}}.Encode()}
	if cfg.User != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	}
	pc, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, external.Errorf(engineName, []string{cfg.Password, url.QueryEscape(cfg.Password)}, "%s", err)
	}
	// Exactly the credential given: never the server process's PGUSER, PGPASSWORD or
	// ~/.pgpass, which pgx would otherwise fall back to.
	if cfg.User == "" {
		return nil, external.Errorf(engineName, nil, "a PostgreSQL warehouse needs a credential (credential_id of type password: the user and its password)")
	}
	pc.ConnConfig.User, pc.ConnConfig.Password = cfg.User, cfg.Password
	pc.MaxConns = 4
	pc.MaxConnIdleTime = time.Minute
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, external.Errorf(engineName, []string{cfg.Password}, "%s", err)
	}
	return &Engine{cfg: cfg, pool: pool}, nil
}

// wrap turns a pgx error into an engine Error with the password taken out.
func (e *Engine) wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// The message only: Detail may quote a row's values.
		ee := &external.Error{Engine: engineName, Msg: external.Redact(pe.Message+" (SQLSTATE "+pe.Code+")", e.cfg.Password)}
		ee.Invalid = pe.Code == "2201B" // invalid_regular_expression: the query's input
		return ee
	}
	return external.Errorf(engineName, []string{e.cfg.Password}, "%s", err)
}

// Ping connects and checks the schema exists.
func (e *Engine) Ping(ctx context.Context) error {
	var n int
	err := e.pool.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", e.cfg.Schema).Scan(&n)
	if err != nil {
		return e.wrap(err)
	}
	if n == 0 {
		return external.Errorf(engineName, nil, "schema %q does not exist in database %q", e.cfg.Schema, e.cfg.Database)
	}
	return nil
}

// colType is a column's PostgreSQL type.
func colType(c external.Column) string {
	t := "text COLLATE \"C\""
	switch c.Type {
	case store.TypeInteger, store.TypeTimestamp, external.TypeSeq:
		t = "bigint" // timestamps in µs since the epoch, as the embedded engine keeps them
	case store.TypeNumber:
		t = "double precision"
	case store.TypeBoolean:
		t = "boolean"
	case store.TypeObject, store.TypeArray:
		t = "text COLLATE \"C\"" // the record's JSON as sent (jsonb would reorder its keys)
	}
	if strings.HasPrefix(c.Name, "_") {
		t += " NOT NULL"
	}
	return t
}

// baseType is what information_schema calls a column type.
func baseType(c external.Column) string {
	return strings.TrimSuffix(strings.TrimSuffix(colType(c), " NOT NULL"), " COLLATE \"C\"")
}

func (e *Engine) qualified(table string) string { return Ident(e.cfg.Schema) + "." + Ident(table) }

// EnsureTable creates the table or adds the columns it lacks.
func (e *Engine) EnsureTable(ctx context.Context, t *external.Table) error {
	var cols []string
	for _, c := range t.Columns {
		cols = append(cols, Ident(c.Name)+" "+colType(c))
	}
	cols = append(cols, "PRIMARY KEY (_ingest_id, _seq)")
	// Create and mark in one transaction, so a table is never left unmarked; a table that
	// was there before must carry this model's mark.
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return e.wrap(err)
	}
	defer tx.Rollback(context.Background())
	var exists bool
	var owner *string
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL, obj_description(to_regclass($1)::oid, 'pg_class')", e.qualified(t.Name)).Scan(&exists, &owner); err != nil {
		return e.wrap(err)
	}
	switch {
	case !exists:
		if _, err := tx.Exec(ctx, "CREATE TABLE "+e.qualified(t.Name)+" ("+strings.Join(cols, ", ")+")"); err != nil {
			return e.wrap(err)
		}
		// COMMENT takes no parameters; the mark is "lookout model " and a model id
		// ([a-z0-9_]), quoted all the same.
		if _, err := tx.Exec(ctx, "COMMENT ON TABLE "+e.qualified(t.Name)+" IS '"+strings.ReplaceAll(t.Owner, "'", "''")+"'"); err != nil {
			return e.wrap(err)
		}
	case owner == nil || *owner != t.Owner:
		mark := ""
		if owner != nil {
			mark = *owner
		}
		return external.NotOwned(engineName, t.Name, mark, t.Owner)
	}
	if err := tx.Commit(ctx); err != nil {
		return e.wrap(err)
	}
	rows, err := e.pool.Query(ctx, "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2", e.cfg.Schema, t.Name)
	if err != nil {
		return e.wrap(err)
	}
	have := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			rows.Close()
			return e.wrap(err)
		}
		have[name] = typ
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return e.wrap(err)
	}
	for _, c := range t.Columns {
		typ, ok := have[c.Name]
		if !ok {
			if _, err := e.pool.Exec(ctx, "ALTER TABLE "+e.qualified(t.Name)+" ADD COLUMN IF NOT EXISTS "+Ident(c.Name)+" "+strings.TrimSuffix(colType(c), " NOT NULL")); err != nil {
				return e.wrap(err)
			}
			continue
		}
		if typ != baseType(c) {
			return external.Errorf(engineName, nil, "table %s has column %s of type %s, but the model needs %s: rename or drop that table", t.Name, c.Name, typ, baseType(c))
		}
	}
	return nil
}

// Insert copies rows into a temporary table and moves them over with ON CONFLICT DO
// NOTHING, in one transaction: COPY is the fast way in, and the conflict clause makes a
// repeated delivery harmless. It converts values in rows in place (uint64, NUL).
func (e *Engine) Insert(ctx context.Context, t *external.Table, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return e.wrap(err)
	}
	defer tx.Rollback(context.Background())
	names := make([]string, len(t.Columns))
	quoted := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i], quoted[i] = c.Name, Ident(c.Name)
	}
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE lookout_batch (LIKE "+e.qualified(t.Name)+") ON COMMIT DROP"); err != nil {
		return e.wrap(err)
	}
	src := pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := rows[i]
		for j, v := range r {
			switch x := v.(type) {
			case uint64:
				r[j] = int64(x)
			case string:
				if strings.IndexByte(x, 0) >= 0 {
					// PostgreSQL's text cannot hold NUL (SQLSTATE 22021): one such value
					// would stop the model's shipping for good. It becomes U+FFFD.
					r[j] = strings.ReplaceAll(x, "\x00", "\uFFFD")
				}
			}
		}
		return r, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"lookout_batch"}, names, src); err != nil {
		return e.wrap(err)
	}
	cols := strings.Join(quoted, ", ")
	if _, err := tx.Exec(ctx, "INSERT INTO "+e.qualified(t.Name)+" ("+cols+") SELECT "+cols+" FROM lookout_batch ON CONFLICT DO NOTHING"); err != nil {
		return e.wrap(err)
	}
	return e.wrap(tx.Commit(ctx))
}

// Query runs a statement with its bind parameters and converts values by the statement's
// types.
func (e *Engine) Query(ctx context.Context, st *external.Statement) ([][]any, error) {
	rows, err := e.pool.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, e.wrap(err)
	}
	defer rows.Close()
	out := [][]any{}
	size := 0
	for rows.Next() {
		for _, raw := range rows.RawValues() {
			size += len(raw) + 16
		}
		if size > MaxAnswer {
			return nil, external.Errorf(engineName, nil, "the answer is over %d MiB: narrow the query or lower its limit", MaxAnswer>>20)
		}
		vals, err := rows.Values()
		if err != nil {
			return nil, e.wrap(err)
		}
		if len(vals) != len(st.Types) {
			return nil, fmt.Errorf("postgres: a row of %d columns for %d", len(vals), len(st.Types))
		}
		for i, v := range vals {
			if vals[i], err = convert(st.Types[i], v); err != nil {
				return nil, fmt.Errorf("postgres: column %d: %w", i, err)
			}
		}
		out = append(out, vals)
	}
	return out, e.wrap(rows.Err())
}

// convert normalises a pgx value to the engine value of a store type.
func convert(typ string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case store.TypeInteger, store.TypeTimestamp, external.TypeSeq:
		switch x := v.(type) {
		case int64:
			return x, nil
		case int32:
			return int64(x), nil
		}
	case store.TypeNumber:
		switch x := v.(type) {
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		}
	case store.TypeBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	default:
		if s, ok := v.(string); ok {
			return s, nil
		}
	}
	return nil, fmt.Errorf("a %T where a %s was expected", v, typ)
}

// Close closes the pool.
func (e *Engine) Close() error {
	e.pool.Close()
	return nil
}

// MaxAnswer bounds the rows a query may hold: past it the query fails (never a partial
// answer taken as whole).
const MaxAnswer = 64 << 20

// Ident quotes an identifier.
func Ident(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Dialect writes PostgreSQL SQL.
func (e *Engine) Dialect() external.Dialect { return dialect{schema: e.cfg.Schema} }

type dialect struct{ schema string }

func (dialect) Ident(name string) string { return Ident(name) }

// Value binds v as the next parameter, cast to its type so that PostgreSQL never has to
// guess one (as in length($1)).
func (dialect) Value(args *[]any, v any) string {
	*args = append(*args, v)
	p := "$" + strconv.Itoa(len(*args))
	switch v.(type) {
	case string:
		return p + "::text"
	case int64, int, uint64:
		return p + "::bigint"
	case float64:
		return p + "::float8"
	case bool:
		return p + "::boolean"
	}
	return p
}
func (d dialect) Table(name string) string        { return Ident(d.schema) + "." + Ident(name) }
func (dialect) Contains(col, arg string) string   { return "strpos(" + col + ", " + arg + ") > 0" }
func (dialect) StartsWith(col, arg string) string { return "starts_with(" + col + ", " + arg + ")" }
func (dialect) EndsWith(col, arg string) string {
	return "right(" + col + ", length(" + arg + ")) = " + arg
}
func (dialect) Matches(col, arg string) string { return col + " ~ " + arg }

// Pattern gives PostgreSQL's regular expressions RE2's newline rules through an embedded
// option: "p" (. and [^…] do not match a newline; ^ and $ anchor the text) by default,
// "n" for (?m), "s" for (?s), "w" for both; a leading RE2 flag group is folded into it.
// Constructs ARE lacks (\A, \z, (?P<name>…)) make PostgreSQL refuse the pattern: a 400.
func (dialect) Pattern(p string) string {
	flags := ""
	if strings.HasPrefix(p, "(?") {
		if end := strings.IndexByte(p, ')'); end > 2 && strings.Trim(p[2:end], "ims") == "" {
			flags, p = p[2:end], p[end+1:]
		}
	}
	m, s := strings.Contains(flags, "m"), strings.Contains(flags, "s")
	opts := map[[2]bool]string{{false, false}: "p", {true, false}: "n", {false, true}: "s", {true, true}: "w"}[[2]bool{m, s}]
	if strings.Contains(flags, "i") {
		opts += "i"
	}
	return "(?" + opts + ")" + p
}
func (dialect) CountDistinct(col string) string { return "count(DISTINCT " + col + ")" }
func (dialect) Min(col, typ string) string {
	if typ == store.TypeBoolean {
		return "bool_and(" + col + ")"
	}
	return "min(" + col + ")"
}
func (dialect) Max(col, typ string) string {
	if typ == store.TypeBoolean {
		return "bool_or(" + col + ")"
	}
	return "max(" + col + ")"
}

// Sum of a bigint column is an exact numeric, rounded to a double once, as the embedded
// engine does.
func (dialect) Sum(col, _ string) string { return "sum(" + col + ")::float8" }
func (dialect) Avg(col, _ string) string {
	return "(sum(" + col + ")::float8 / nullif(count(" + col + "), 0))"
}
