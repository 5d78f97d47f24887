package warehouse

import (
	"bytes"
	"encoding/json"
	"lookout/store"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func testModel(unknown string) *store.Model {
	return &store.Model{Key: "orders", UnknownFields: unknown, Fields: []store.Field{
		{Name: "id", Type: store.TypeString, Required: true}, {Name: "n", Type: store.TypeInteger}, {Name: "x", Type: store.TypeNumber},
		{Name: "ok", Type: store.TypeBoolean}, {Name: "at", Type: store.TypeTimestamp}, {Name: "o", Type: store.TypeObject}, {Name: "a", Type: store.TypeArray},
	}}
}

func TestRecordValidator(t *testing.T) {
	v := NewValidator(testModel(store.UnknownReject))
	for _, tc := range []struct {
		in, want, bad string
	}{
		{`{"id":"1"}`, `{"id":"1"}`, ""},
		{` { "id" : "1" , "n" : 3, "o": { "k" : [1, 2, {"z": null}] } } `, `{"id":"1","n":3,"o":{"k":[1,2,{"z":null}]}}`, ""},
		{`{"id":"\u00e9\n","at":"2026-01-02T03:04:05.123Z","x":-1.5e3,"ok":false,"a":[]}`, `{"id":"\u00e9\n","at":"2026-01-02T03:04:05.123Z","x":-1.5e3,"ok":false,"a":[]}`, ""},
		{`{"id":"1","n":null}`, `{"id":"1","n":null}`, ""},
		{`{"n":1}`, "", "id"},
		{`{"id":"1","n":1.5}`, "", "n"},
		{`{"id":"1","n":"1"}`, "", "n"},
		{`{"id":"1","at":"noon"}`, "", "at"},
		{`{"id":"1","at":-1}`, "", "at"},
		{`{"id":"1","zz":1}`, "", "zz"},
		{`{"id":"1","id":"2"}`, "", "id"},
		{`{"id":"1"`, "", "(syntax)"},
		{`{"id":"1"} x`, "", "(syntax)"},
		{`[1]`, "", "(syntax)"},
		{`{"id":"1","o":{"a":1,}}`, "", "(syntax)"},
		{`{"id":"\x01"}`, "", "(syntax)"},
		{"{\"id\":\"\xff\"}", "", "(syntax)"},
		{`{"id":"1","x":01}`, "", "(syntax)"},
		{`{"id":"1","o":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "", "(syntax)"},
	} {
		out, errs := v.Validate([]byte(tc.in), nil)
		if tc.bad == "" {
			if len(errs) > 0 || string(out) != tc.want {
				t.Errorf("%s:\n got %s %v\nwant %s", tc.in, out, errs, tc.want)
			}
			if !json.Valid(out) {
				t.Errorf("%s: stored form is not JSON: %s", tc.in, out)
			}
			continue
		}
		if len(errs) == 0 || len(out) != 0 {
			t.Errorf("%s: accepted as %s", tc.in, out)
			continue
		}
		if tc.bad == "(syntax)" {
			if errs[0].Field != "" {
				t.Errorf("%s: %v, want a syntax error", tc.in, errs)
			}
		} else if errs[0].Field != tc.bad {
			t.Errorf("%s: %v, want one naming %s", tc.in, errs, tc.bad)
		}
	}
	d := NewValidator(testModel(store.UnknownDrop))
	out, errs := d.Validate([]byte(`{"zz":{"deep":[1]},"id":"1","yy":2}`), []byte("prefix"))
	if len(errs) > 0 || string(out) != `prefix{"id":"1"}` {
		t.Fatalf("drop: %s %v", out, errs)
	}
}

// FuzzValidatorsAgree: the byte-level validator and Model.Validate give the same verdict on
// every input both can judge, and everything the byte validator accepts is valid JSON that
// decodes to what Model.Validate returns.
func FuzzValidatorsAgree(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/records/*.json")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, false)
		}
	}
	for _, s := range []string{`{"id":"1","n":3,"x":1.5,"ok":true,"at":"2026-01-02T03:04:05Z","o":{"a":[1]},"a":[]}`, `{"id":"1","at":1767323045000,"n":1e3}`, `{"id":null}`, `{"id":"1","extra":true}`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, drop bool) {
		mode := store.UnknownReject
		if drop {
			mode = store.UnknownDrop
		}
		m := testModel(mode)
		out, errs := NewValidator(m).Validate(raw, nil)
		if len(errs) == 0 && !json.Valid(out) {
			t.Fatalf("accepted %q as invalid JSON %q", raw, out)
		}
		// A watching validator stores the same bytes, and each span holds exactly the
		// value EachField finds under that key.
		var names []string
		for _, fl := range m.Fields {
			names = append(names, fl.Name)
		}
		names = append(names, "not_a_field")
		wout, spans, werrs := NewValidator(m).Watching(names).ValidateSpans(raw, []byte("pre"), []Span{{1, 2}})
		if !bytes.Equal(wout[3:], out) || (len(werrs) == 0) != (len(errs) == 0) {
			t.Fatalf("watching validator stored %q (%v), plain %q (%v)", wout, werrs, out, errs)
		}
		if len(errs) > 0 {
			if len(spans) != 1 {
				t.Fatalf("a rejected record left spans %v", spans)
			}
		} else {
			if len(spans) != 1+len(names) {
				t.Fatalf("%d spans for %d names", len(spans)-1, len(names))
			}
			found := map[string][]byte{}
			EachField(out, func(k string, v []byte) bool { found[strings.Clone(k)] = v; return true })
			for i, n := range names {
				sp := spans[1+i]
				got := []byte(nil)
				if sp.End > 0 {
					got = out[sp.Start:sp.End]
				}
				if !bytes.Equal(got, found[n]) {
					t.Fatalf("%q: span of %s holds %q, the record %q", raw, n, got, found[n])
				}
			}
		}
		// Model.Validate cannot see what encoding/json forgives: duplicate keys, invalid
		// UTF-8. Compare only where both judge the same document.
		if !utf8.Valid(raw) || hasDuplicateTopKeys(raw) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var rec map[string]any
		if dec.Decode(&rec) != nil || dec.More() || rec == nil {
			if len(errs) == 0 {
				t.Fatalf("byte validator accepted %q, encoding/json does not", raw)
			}
			return
		}
		if _, err := dec.Token(); err == nil {
			return // trailing data: encoding/json's decoder stops earlier than the byte validator
		}
		want, werrs := m.Validate(rec)
		if (len(errs) == 0) != (len(werrs) == 0) {
			t.Fatalf("%q: byte validator %v, store.Model.Validate %v", raw, errs, werrs)
		}
		if len(errs) > 0 {
			return
		}
		var got map[string]any
		d2 := json.NewDecoder(bytes.NewReader(out))
		d2.UseNumber()
		if err := d2.Decode(&got); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"_received_at", "_client_id", "_ingest_id"} {
			delete(got, k)
		}
		a, _ := json.Marshal(normalise(got))
		b, _ := json.Marshal(normalise(want))
		if !bytes.Equal(a, b) {
			t.Fatalf("%q: stored %s, store.Model.Validate %s", raw, a, b)
		}
	})
}

// normalise turns every number into a float64, deeply, so values compare by meaning
// ("1e3" and 1000 are the same integer).
func normalise(v any) any {
	switch n := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range n {
			out[k] = normalise(x)
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, x := range n {
			out[i] = normalise(x)
		}
		return out
	case json.Number:
		f, _ := n.Float64()
		return f
	case int64:
		return float64(n)
	}
	return v
}

// hasDuplicateTopKeys reports whether the top-level object repeats a key.
func hasDuplicateTopKeys(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		k, _ := t.(string)
		if seen[k] {
			return true
		}
		seen[k] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}
