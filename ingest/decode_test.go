package ingest

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func drain(t *testing.T, src source) ([]item, error) {
	var out []item
	for i := 0; i < 1_000_000; i++ {
		it, err := src.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		it.raw = append([]byte(nil), it.raw...)
		out = append(out, it)
	}
	t.Fatal("source never ended")
	return nil, nil
}

func TestNDJSON(t *testing.T) {
	in := "{\"a\":1}\r\n\n  {\"data\":{\"b\":2},\"schema\":\"m\"}\n{\"data\":{\"c\":3}}\n{\"data\":{\"d\":4},\"extra\":1}\n{\"data\":5}\n{\"e\":5}"
	items, err := drain(t, newNDJSON(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		raw, schema string
		line        int
	}{
		{`{"a":1}`, "", 1}, {`{"b":2}`, "m", 3}, {`{"c":3}`, "", 4},
		{`{"data":{"d":4},"extra":1}`, "", 5}, {`{"data":5}`, "", 6}, {`{"e":5}`, "", 7},
	}
	if len(items) != len(want) {
		t.Fatalf("%d items: %+v", len(items), items)
	}
	for i, w := range want {
		if string(items[i].raw) != w.raw || items[i].schema != w.schema || items[i].pos != w.line {
			t.Errorf("item %d = %q %q line %d, want %+v", i, items[i].raw, items[i].schema, items[i].pos, w)
		}
	}
}

func TestJSONBody(t *testing.T) {
	for _, tc := range []struct {
		in      string
		n       int
		schema  string
		wantErr string
	}{
		{`{"schema":"m","data":[{"a":1},{"b":2}]}`, 2, "m", ""},
		{`{"data":[{"a":1}],"schema":"m"}`, 1, "m", ""},
		{`{"data":[{"a":1}]}`, 1, "", ""},
		{`{"schema":"m","data":{}}`, 0, "", "array"},
		{`{"schema":1,"data":[]}`, 0, "", "schema"},
		{`{"schema":"m","data":[],"x":1}`, 0, "", "unknown field"},
		{`{"schema":"m","data":[{"a":1}]} trailing`, 1, "m", "after"},
		{`{"schema":"m","data":[{"a":`, 0, "", "JSON object"},
		{`[]`, 0, "", "JSON object"},
		{`{"schema":"m","data":[{"a":[1},{"b":2}]}`, 0, "", "does not match"},
		{`{"schema":"m","data":[{"a":1}],"data":[{"b":2}]}`, 1, "m", "appears twice"},
	} {
		items, err := drain(t, newJSONBody(strings.NewReader(tc.in)))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if tc.n > 0 && err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if tc.n > 0 && (len(items) != tc.n || items[0].schema != tc.schema) {
			t.Errorf("%s: %+v", tc.in, items)
		}
	}
}

func FuzzNDJSON(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.ndjson")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("{\"a\":1}\n{\"data\":{\"b\":2},\"schema\":\"m\"}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := drain(t, newNDJSON(bytes.NewReader(b)))
		if err != nil {
			t.Fatalf("reading from memory failed: %v", err)
		}
		last := 0
		for _, it := range items {
			if it.pos <= last {
				t.Fatalf("line numbers not increasing: %d after %d", it.pos, last)
			}
			last = it.pos
			if it.err == "" && len(bytes.TrimSpace(it.raw)) == 0 {
				t.Fatal("empty record yielded")
			}
		}
	})
}

// FuzzJSONBody checks the one-pass envelope scanner against a naive reading with
// encoding/json: every body the naive reader takes as an envelope yields the same records.
func FuzzJSONBody(f *testing.F) {
	f.Add([]byte(`{"schema":"m","data":[{"a":1},{"b":[1,2]}]}`))
	f.Add([]byte(`{"data":[{"a":1}],"schema":"m"}`))
	f.Add([]byte(` { "schema" : "m" , "data" : [ 1 , "x\"]" , [ {"]":"["} ] , null ] } `))
	f.Add([]byte(`{"schema":"m","data":[{"a":"\\"},{"b":"}"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := drain(t, newJSONBody(bytes.NewReader(b)))
		for i, it := range items {
			if it.pos != i {
				t.Fatalf("index %d at position %d", it.pos, i)
			}
		}
		var env map[string]json.RawMessage
		var data []json.RawMessage
		var schema string
		if json.Unmarshal(b, &env) != nil || env == nil || json.Unmarshal(env["data"], &data) != nil || data == nil ||
			(env["schema"] != nil && (json.Unmarshal(env["schema"], &schema) != nil || schema == "")) ||
			len(env) > 2 || (len(env) == 2 && env["schema"] == nil) ||
			bytes.Count(b, []byte(`"data"`)) > 1 || bytes.Count(b, []byte(`"schema"`)) > 1 {
			return // not an envelope the naive reader takes (or ambiguous for it)
		}
		naive := struct{ Data []json.RawMessage }{data}
		if err != nil {
			t.Fatalf("scanner refused a valid envelope: %v", err)
		}
		if len(items) != len(naive.Data) {
			t.Fatalf("scanner found %d records, naive %d", len(items), len(naive.Data))
		}
		for i, it := range items {
			var got, want bytes.Buffer
			if json.Compact(&got, it.raw) != nil || json.Compact(&want, naive.Data[i]) != nil || got.String() != want.String() {
				t.Fatalf("record %d: scanner %q, naive %q", i, it.raw, naive.Data[i])
			}
		}
	})
}

// TestJSONBodyIsLinear feeds a body of whitespace past the cap: it must end as too large,
// having read no more than the cap, whatever the whitespace sits between.
func TestJSONBodyIsLinear(t *testing.T) {
	for _, tc := range []struct{ name, head, tail string }{
		{"inside data", `{"schema":"m","data":[`, `]}`},
		{"inside a record", `{"schema":"m","data":[{"a":`, `1}]}`},
		{"before the body", ``, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := &repeatReader{b: ' ', n: MaxJSONBody + 1<<20}
			r := io.MultiReader(strings.NewReader(tc.head), ws, strings.NewReader(tc.tail))
			_, err := drain(t, newJSONBody(r))
			if err != errTooBig {
				t.Fatalf("err = %v, want errTooBig", err)
			}
			if read := MaxJSONBody + 1<<20 - ws.n; read > MaxJSONBody+128<<10 {
				t.Fatalf("read %d bytes of whitespace past a %d cap", read, MaxJSONBody)
			}
		})
	}
}

// repeatReader yields n copies of b.
type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	if len(p) > r.n {
		p = p[:r.n]
	}
	for i := range p {
		p[i] = r.b
	}
	r.n -= len(p)
	return len(p), nil
}
