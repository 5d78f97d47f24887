package ingest

import (
	"bytes"
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

func FuzzJSONBody(f *testing.F) {
	f.Add([]byte(`{"schema":"m","data":[{"a":1},{"b":[1,2]}]}`))
	f.Add([]byte(`{"data":[{"a":1}],"schema":"m"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := drain(t, newJSONBody(bytes.NewReader(b)))
		if err != nil {
			return
		}
		for i, it := range items {
			if it.pos != i {
				t.Fatalf("index %d at position %d", it.pos, i)
			}
		}
	})
}
