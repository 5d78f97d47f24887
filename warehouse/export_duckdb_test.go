package warehouse

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"lookout/store"
)

// duckdbVersion is the @duckdb/node-api that .ci/run installs; the skip message names it.
const duckdbVersion = "1.5.6-r.1"

// defaultDuckDBNodeModules is where .ci/run installs @duckdb/node-api; the environment
// variable LOOKOUT_DUCKDB_NODE_MODULES names another node_modules instead.
const defaultDuckDBNodeModules = "/opt/lookout-duckdb/node_modules"

// duckdbNode returns node and the node_modules holding @duckdb/node-api. Without them the
// test skips, saying how to install them, except under CI, where a reader that quietly
// went missing would hide a broken export: there the test fails.
func duckdbNode(t *testing.T) (node, modules string) {
	t.Helper()
	modules, from := os.Getenv("LOOKOUT_DUCKDB_NODE_MODULES"), "LOOKOUT_DUCKDB_NODE_MODULES"
	if modules == "" { // a set variable is what the caller meant: it is not second-guessed
		modules, from = defaultDuckDBNodeModules, "the default directory"
	}
	node, err := exec.LookPath("node")
	missing := ""
	if err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join(modules, "@duckdb", "node-api", "package.json")); err != nil {
		missing = fmt.Sprintf("%s (%s) has no @duckdb/node-api", modules, from)
	}
	if missing == "" {
		return node, modules
	}
	msg := fmt.Sprintf("reading the Parquet export with DuckDB needs node and @duckdb/node-api: %s. Install them as .ci/run does: "+
		"mkdir -p /opt/lookout-duckdb && (cd /opt/lookout-duckdb && npm install --no-audit --no-fund @duckdb/node-api@%s), "+
		"or set LOOKOUT_DUCKDB_NODE_MODULES to a node_modules directory that has it", missing, duckdbVersion)
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set: " + msg)
	}
	t.Skip(msg)
	return "", ""
}

// duckdbTypes is the column type DuckDB gives each field type of an export, as
// warehouse/export.go writes them: strings, int64, double, boolean, timestamps in µs
// (adjusted to UTC) and JSON text for objects and arrays.
var duckdbTypes = map[string]string{
	store.TypeString:    "VARCHAR",
	store.TypeInteger:   "BIGINT",
	store.TypeNumber:    "DOUBLE",
	store.TypeBoolean:   "BOOLEAN",
	store.TypeTimestamp: "TIMESTAMP WITH TIME ZONE",
	store.TypeObject:    "JSON",
	store.TypeArray:     "JSON",
}

// jsonText is an object or array value: its JSON as stored.
type jsonText string

// canonical writes a value with its Go type, so that "1" the string and 1 the number, or
// a null and an empty string, never compare equal.
func canonical(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return "string " + strconv.Quote(v)
	case int64:
		return "int64 " + strconv.FormatInt(v, 10)
	case float64:
		return "float64 " + strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return "bool " + strconv.FormatBool(v)
	case time.Time:
		return "time " + v.UTC().Format(time.RFC3339Nano)
	case jsonText:
		return "json " + string(v)
	}
	return fmt.Sprintf("unexpected %T %v", v, v)
}

// fromDuckDB turns a value as testdata/duckdb/read.mjs prints it back into Go.
func fromDuckDB(typ string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	var err error
	switch typ {
	case "VARCHAR", "JSON":
		s, ok := v.(string)
		if !ok {
			break
		}
		if typ == "JSON" {
			return jsonText(s), nil
		}
		return s, nil
	case "BIGINT":
		if s, ok := v.(string); ok {
			var n int64
			n, err = strconv.ParseInt(s, 10, 64)
			return n, err
		}
	case "DOUBLE":
		if n, ok := v.(json.Number); ok {
			var f float64
			f, err = strconv.ParseFloat(string(n), 64)
			return f, err
		}
	case "BOOLEAN":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "TIMESTAMP WITH TIME ZONE":
		if s, ok := v.(string); ok {
			var us int64
			us, err = strconv.ParseInt(s, 10, 64)
			return time.UnixMicro(us).UTC(), err
		}
	}
	return nil, fmt.Errorf("a %s column gave %T %v", typ, v, v)
}

// TestExportParquetDuckDB: DuckDB, reading a Parquet export with read_parquet (through its
// Node package, which ships the engine), sees the records in receive order over both
// layers (a sealed block and the log, two row groups), every field type with the column
// type export.go documents, nulls and missing fields as NULL, values at the edges of
// int64 and float64, timestamps given with an offset or as epoch milliseconds in UTC, and
// strings with quotes, escapes and non-ASCII text as they were sent.
func TestExportParquetDuckDB(t *testing.T) {
	node, modules := duckdbNode(t)
	rs, err := OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	l, err := rs.Log("wh_duckdb")
	if err != nil {
		t.Fatal(err)
	}
	m := testModel(store.UnknownReject)
	m.ID = "mdl_duckdb"

	ts := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	records := []struct {
		raw  string
		want map[string]any // the model's fields; absent is NULL
	}{
		{`{"id":"plain","n":9007199254740993,"x":0.1,"ok":true,"at":"2026-11-20T01:02:03.456789Z","o":{"k":[1,"x"],"nested":{"b":false}},"a":[1,2.5,"s",null]}`,
			map[string]any{"id": "plain", "n": int64(9007199254740993), "x": 0.1, "ok": true, "at": ts("2026-11-20T01:02:03.456789Z"),
				"o": jsonText(`{"k":[1,"x"],"nested":{"b":false}}`), "a": jsonText(`[1,2.5,"s",null]`)}},
		{`{"id":"quote \" backslash \\ tab \t newline \n","n":-9223372036854775808,"x":-1e300,"ok":false,"at":1763600000123}`,
			map[string]any{"id": "quote \" backslash \\ tab \t newline \n", "n": int64(-9223372036854775808), "x": -1e300, "ok": false,
				"at": time.UnixMilli(1763600000123).UTC()}},
		{`{"id":"unicode é 日本 🦆 \u00e9","n":0,"x":0,"at":"2026-01-02T03:04:05.5+02:00","o":{"q":"say \"hi\" é"},"a":[]}`,
			map[string]any{"id": "unicode é 日本 🦆 é", "n": int64(0), "x": 0.0, "at": ts("2026-01-02T01:04:05.5Z"),
				"o": jsonText(`{"q":"say \"hi\" é"}`), "a": jsonText(`[]`)}},
		{`{"id":"nulls","n":null,"x":null,"ok":null,"at":null,"o":null,"a":null}`,
			map[string]any{"id": "nulls"}},
		// In the log, not the block: the second row group.
		{`{"id":"missing"}`,
			map[string]any{"id": "missing"}},
		{`{"id":"","n":9223372036854775807,"x":123456789.125,"o":{}}`,
			map[string]any{"id": "", "n": int64(9223372036854775807), "x": 123456789.125, "o": jsonText(`{}`)}},
		{`{"id":"before 1970","at":"1969-07-20T20:17:40Z","x":5e-324}`,
			map[string]any{"id": "before 1970", "at": ts("1969-07-20T20:17:40Z"), "x": 5e-324}},
	}
	const sealed = 4
	v := NewValidator(m)
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	var wants []map[string]any
	add := func(at time.Time, ingest string, from, to int) {
		var recs [][]byte
		for _, r := range records[from:to] {
			out, errs := v.Validate([]byte(r.raw), nil)
			if errs != nil {
				t.Fatalf("%s: %v", r.raw, errs)
			}
			recs = append(recs, out)
			w := map[string]any{"_received_at": at, "_client_id": "ic_duck", "_ingest_id": ingest}
			for k, val := range r.want {
				w[k] = val
			}
			wants = append(wants, w)
		}
		if err := l.Append([]*AppendBatch{{ModelID: m.ID, ReceivedAt: at, Records: recs, ClientID: "ic_duck", IngestID: ingest}}); err != nil {
			t.Fatal(err)
		}
	}
	add(t0.Add(123456*time.Microsecond), "ing_1", 0, sealed)
	if n, err := l.Seal(m, t0.Add(time.Hour), DefaultSealPolicy); n != sealed || err != nil {
		t.Fatalf("seal: %d %v", n, err)
	}
	add(t0.Add(2*time.Hour), "ing_2", sealed, len(records))

	path := filepath.Join(t.TempDir(), "export.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.Export(context.Background(), m, ExportRange{}, FormatParquet, f); err != nil || n != len(records) {
		t.Fatalf("export: %d %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	script, err := filepath.Abs(filepath.Join("testdata", "duckdb", "read.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), node, script, modules, path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	var got struct {
		DuckDB  string `json:"duckdb"`
		Columns []struct{ Name, Type string }
		Rows    [][]any
	}
	dec := json.NewDecoder(&stdout)
	dec.UseNumber() // doubles parse once, in fromDuckDB, with strconv
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("DuckDB's output: %v\n%s", err, stdout.String())
	}
	t.Logf("read by DuckDB %s", got.DuckDB)

	fields := Schema(m)
	types := map[string]string{}
	for _, c := range got.Columns {
		types[c.Name] = c.Type
	}
	for _, fl := range fields {
		if types[fl.Name] != duckdbTypes[fl.Type] {
			t.Errorf("column %s (%s): DuckDB reads it as %q, want %q", fl.Name, fl.Type, types[fl.Name], duckdbTypes[fl.Type])
		}
	}
	if len(got.Columns) != len(fields) {
		t.Errorf("DuckDB sees columns %v, the export has the fields %v", got.Columns, fields)
	}
	if t.Failed() {
		t.FailNow() // the values would be read with the wrong types
	}
	if len(got.Rows) != len(wants) {
		t.Fatalf("DuckDB read %d rows, the export holds %d", len(got.Rows), len(wants))
	}
	for i, row := range got.Rows {
		if len(row) != len(got.Columns) {
			t.Fatalf("row %d has %d values for %d columns", i, len(row), len(got.Columns))
		}
		for ci, c := range got.Columns {
			val, err := fromDuckDB(c.Type, row[ci])
			if err != nil {
				t.Errorf("row %d, %s: %v", i, c.Name, err)
				continue
			}
			if g, w := canonical(val), canonical(wants[i][c.Name]); g != w {
				t.Errorf("row %d (%s), %s:\n got %s\nwant %s", i, records[i].raw, c.Name, g, w)
			}
		}
	}
}
