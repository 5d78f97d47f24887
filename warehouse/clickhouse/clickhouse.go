// Package clickhouse is the ClickHouse engine of an external warehouse, over ClickHouse's
// HTTP interface. It keeps to SQL that Debian's ClickHouse 18.16 and current releases both
// accept: 18.16 has no query parameters ({p:Type}), so every value goes into a statement
// through Literal, the one rendering function, fuzzed against a real server.
//
// A model's table is a ReplacingMergeTree ordered by (_ingest_id, _seq): a batch the sink
// delivers twice (it is at-least-once) leaves two copies until a merge, and every query
// reads the table with FINAL, so each record is seen once.
package clickhouse

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"lookout/store"
	"lookout/warehouse/external"
)

// Config is how to reach a ClickHouse server.
type Config struct {
	URL      string // the HTTP interface, e.g. http://127.0.0.1:8123
	Database string
	User     string
	Password string
	// Client is the HTTP client; nil means one that follows no redirects. Requests are
	// bounded by their context, or by defaultTimeout when it has no deadline.
	Client *http.Client
}

// Engine is a ClickHouse server, one database of it.
type Engine struct {
	cfg    Config
	base   *url.URL
	client *http.Client
}

var _ external.Engine = (*Engine)(nil)

// Open checks the configuration (not the connection: Ping does that). The error is a
// plain one naming what is wrong with the URL.
func Open(cfg Config) (*Engine, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, errors.New("url must be the http(s) address of ClickHouse's HTTP interface, without credentials")
	}
	if cfg.Database == "" {
		cfg.Database = "default"
	}
	c := cfg.Client
	if c == nil {
		// No redirects: X-ClickHouse-Key is not among the headers Go drops on a redirect to
		// another host, and the statement would follow too.
		c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Engine{cfg: cfg, base: u, client: c}, nil
}

const engineName = "clickhouse"

// defaultTimeout bounds a statement whose context has no deadline.
const defaultTimeout = 2 * time.Minute

// MaxAnswer bounds an answer's size: past it the statement fails (never a truncated
// answer taken as whole).
const MaxAnswer = 64 << 20

// exec sends one statement (the whole body) and returns the answer's body.
func (e *Engine) exec(ctx context.Context, sql string) ([]byte, error) {
	return e.execReader(ctx, strings.NewReader(sql))
}

// execReader sends a statement read from body.
func (e *Engine) execReader(ctx context.Context, body io.Reader) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultTimeout)
		defer cancel()
	}
	u := *e.base
	q := u.Query()
	q.Set("database", e.cfg.Database)
	if dl, ok := ctx.Deadline(); ok {
		// The server stops the statement itself when the caller has given up.
		q.Set("max_execution_time", strconv.Itoa(max(1, int(time.Until(dl).Seconds()+0.999))))
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		return nil, err
	}
	if e.cfg.User != "" {
		req.Header.Set("X-ClickHouse-User", e.cfg.User)
		req.Header.Set("X-ClickHouse-Key", e.cfg.Password)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, external.Errorf(engineName, e.secrets(), "%s", unwrapNet(err))
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	if err != nil {
		return nil, external.Errorf(engineName, e.secrets(), "reading the answer: %s", unwrapNet(err))
	}
	if len(answer) > MaxAnswer {
		return nil, external.Errorf(engineName, nil, "the answer is over %d MiB: narrow the query or lower its limit", MaxAnswer>>20)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, external.Errorf(engineName, e.secrets(), "%s", serverMessage(answer))
	}
	return answer, nil
}

func (e *Engine) secrets() []string { return []string{e.cfg.Password} }

// unwrapNet keeps the last part of a transport error (the *url.Error names the URL).
func unwrapNet(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// Ping checks the server answers and accepts the credentials and database.
func (e *Engine) Ping(ctx context.Context) error {
	b, err := e.exec(ctx, "SELECT count() FROM system.databases WHERE name = "+Literal(e.cfg.Database)+" FORMAT TabSeparated")
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) != "1" {
		return external.Errorf(engineName, nil, "database %q does not exist", e.cfg.Database)
	}
	return nil
}

// colType is a column's ClickHouse type.
func colType(c external.Column) string {
	if strings.HasPrefix(c.Name, "_") { // system columns: never null
		switch c.Type {
		case store.TypeTimestamp:
			return "Int64"
		case external.TypeSeq:
			return "UInt64"
		}
		return "String"
	}
	switch c.Type {
	case store.TypeInteger, store.TypeTimestamp:
		return "Nullable(Int64)" // timestamps in µs: 18.16 has no DateTime64
	case store.TypeNumber:
		return "Nullable(Float64)"
	case store.TypeBoolean:
		return "Nullable(UInt8)"
	}
	return "Nullable(String)"
}

// EnsureTable creates the table or adds the columns it lacks.
func (e *Engine) EnsureTable(ctx context.Context, t *external.Table) error {
	name := e.qualified(t.Name)
	var cols []string
	for _, c := range t.Columns {
		col := Ident(c.Name) + " " + colType(c)
		if c.Name == external.ColSeq {
			col += " COMMENT " + Literal(t.Owner) // 18.16 has no table comments
		}
		cols = append(cols, col)
	}
	// Partitions by month of receipt keep FINAL's merge work per partition small.
	create := "CREATE TABLE IF NOT EXISTS " + name + " (" + strings.Join(cols, ", ") + ") ENGINE = ReplacingMergeTree() " +
		"PARTITION BY toYYYYMM(toDateTime(intDiv(_received_at, 1000000))) ORDER BY (_ingest_id, _seq)"
	if _, err := e.exec(ctx, create); err != nil {
		return err
	}
	b, err := e.exec(ctx, "SELECT name, type, comment FROM system.columns WHERE database = "+Literal(e.cfg.Database)+" AND table = "+Literal(t.Name)+" FORMAT TabSeparated")
	if err != nil {
		return err
	}
	have := map[string]string{}
	owner := ""
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Split(line, "\t"); len(f) == 3 {
			have[unescapeTSV(f[0])] = unescapeTSV(f[1])
			if unescapeTSV(f[0]) == external.ColSeq {
				owner = unescapeTSV(f[2])
			}
		}
	}
	if owner != t.Owner {
		return external.NotOwned(engineName, t.Name, owner, t.Owner)
	}
	for _, c := range t.Columns {
		typ, ok := have[c.Name]
		if !ok {
			if _, err := e.exec(ctx, "ALTER TABLE "+name+" ADD COLUMN "+Ident(c.Name)+" "+colType(c)); err != nil {
				return err
			}
			continue
		}
		if typ != colType(c) {
			return external.Errorf(engineName, nil, "table %s has column %s of type %s, but the model needs %s: rename or drop that table", t.Name, c.Name, typ, colType(c))
		}
	}
	return nil
}

func (e *Engine) qualified(table string) string { return Ident(e.cfg.Database) + "." + Ident(table) }

// Insert writes rows with one INSERT … VALUES, every value rendered by Literal.
func (e *Engine) Insert(ctx context.Context, t *external.Table, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("INSERT INTO ")
	b.WriteString(e.qualified(t.Name))
	b.WriteString(" (")
	for i, c := range t.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Ident(c.Name))
	}
	b.WriteString(") VALUES ")
	var lit []byte
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for j, v := range r {
			if j > 0 {
				b.WriteByte(',')
			}
			lit = AppendLiteral(lit[:0], v)
			b.Write(lit)
		}
		b.WriteByte(')')
	}
	_, err := e.execReader(ctx, &b)
	return err
}

// Query runs a statement and decodes its TabSeparated answer by the statement's types.
func (e *Engine) Query(ctx context.Context, st *external.Statement) ([][]any, error) {
	if len(st.Args) > 0 {
		return nil, errors.New("clickhouse: statements carry their values as literals")
	}
	body, err := e.exec(ctx, st.SQL+" FORMAT TabSeparated")
	if err != nil {
		return nil, err
	}
	rows := [][]any{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, len(body)+1)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != len(st.Types) {
			return nil, fmt.Errorf("clickhouse: a row of %d columns for %d", len(fields), len(st.Types))
		}
		row := make([]any, len(fields))
		for i, f := range fields {
			if row[i], err = decode(st.Types[i], f); err != nil {
				return nil, fmt.Errorf("clickhouse: column %d: %w", i, err)
			}
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// decode reads one TabSeparated field as a value of a store type.
func decode(typ, f string) (any, error) {
	if f == `\N` {
		return nil, nil
	}
	switch typ {
	case store.TypeInteger, store.TypeTimestamp:
		return strconv.ParseInt(f, 10, 64)
	case external.TypeSeq:
		return strconv.ParseUint(f, 10, 64)
	case store.TypeNumber:
		switch f {
		case "nan", "inf", "-inf":
			return nil, fmt.Errorf("non-finite number %s", f)
		}
		return strconv.ParseFloat(f, 64)
	case store.TypeBoolean:
		return f != "0", nil
	}
	return unescapeTSV(f), nil
}

// unescapeTSV undoes TabSeparated's escaping of a string.
func unescapeTSV(f string) string {
	if !strings.Contains(f, `\`) {
		return f
	}
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '\\' || i+1 == len(f) {
			b.WriteByte(c)
			continue
		}
		i++
		switch f[i] {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '0':
			b.WriteByte(0)
		case 'a':
			b.WriteByte('\a')
		case 'v':
			b.WriteByte('\v')
		default:
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

// Close has nothing to release: HTTP connections are pooled by the client.
func (e *Engine) Close() error {
	e.client.CloseIdleConnections()
	return nil
}

// Dialect writes ClickHouse SQL.
func (e *Engine) Dialect() external.Dialect { return dialect{db: e.cfg.Database} }

type dialect struct{ db string }

func (dialect) Ident(name string) string          { return Ident(name) }
func (dialect) Value(_ *[]any, v any) string      { return string(AppendLiteral(nil, v)) }
func (d dialect) Table(name string) string        { return Ident(d.db) + "." + Ident(name) + " FINAL" }
func (dialect) Contains(col, arg string) string   { return "position(" + col + ", " + arg + ") > 0" }
func (dialect) StartsWith(col, arg string) string { return "startsWith(" + col + ", " + arg + ")" }
func (dialect) EndsWith(col, arg string) string   { return "endsWith(" + col + ", " + arg + ")" }

// Pattern turns off "." matching a newline, which ClickHouse's re2 turns on by default.
func (dialect) Pattern(p string) string { return "(?-s)" + p }

func (dialect) Matches(col, arg string) string  { return "match(" + col + ", " + arg + ")" }
func (dialect) Min(col, _ string) string        { return "min(" + col + ")" }
func (dialect) Max(col, _ string) string        { return "max(" + col + ")" }
func (dialect) CountDistinct(col string) string { return "ifNull(uniqExact(" + col + "), 0)" }

// Sum and Avg: ClickHouse's sum over no values is 0, not NULL, hence the if.
// An integer sum goes through Decimal128, so it is exact (an Int64 sum wraps at 2^63) and
// rounded to a double once, as the embedded engine's 128-bit sum is.
func (dialect) Sum(col, typ string) string {
	return "if(count(" + col + ") = 0, NULL, " + sumOf(col, typ) + ")"
}
func (dialect) Avg(col, typ string) string {
	return "if(count(" + col + ") = 0, NULL, " + sumOf(col, typ) + " / count(" + col + "))"
}

func sumOf(col, typ string) string {
	if typ == store.TypeInteger {
		return "toFloat64(sum(toDecimal128(" + col + ", 0)))"
	}
	return "toFloat64(sum(" + col + "))"
}

// serverMessage is the first line of ClickHouse's error text, without the statement
// excerpt a syntax error quotes ("failed at position N: …"), which may hold record values.
func serverMessage(b []byte) string {
	msg := strings.TrimSpace(string(b))
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if i := strings.Index(msg, "failed at position"); i >= 0 {
		if j := strings.Index(msg[i:], ": "); j >= 0 {
			k := strings.Index(msg[i+j:], ". Expected")
			if k < 0 {
				k = strings.Index(msg[i+j:], ", e.what()")
			}
			if k >= 0 {
				msg = msg[:i+j] + " …" + msg[i+j+k:]
			} else {
				msg = msg[:i+j]
			}
		}
	}
	return msg
}
