package http

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lookout/store"
)

func TestDecodeJSON(t *testing.T) {
	type body struct {
		Name  *string  `json:"name"`
		Count int      `json:"count"`
		Tags  []string `json:"tags"`
	}
	for _, tc := range []struct {
		in, code, field string
	}{
		{`{"name":"x","count":2,"tags":["a"]}`, "", ""},
		{`  {"name":"x"}  `, "", ""},
		{``, store.CodeInvalidJSON, ""},
		{`null`, store.CodeInvalidJSON, ""},
		{`[1]`, store.CodeInvalidJSON, ""},
		{`{"name":`, store.CodeInvalidJSON, ""},
		{`{"name":"x"}{}`, store.CodeInvalidJSON, ""},
		{`{"nme":"x"}`, store.CodeValidation, "nme"},
		{`{"count":"2"}`, store.CodeValidation, "count"},
		{`{"count":1.5}`, store.CodeValidation, "count"},
		{`{"tags":"a"}`, store.CodeValidation, "tags"},
	} {
		var b body
		err := decodeJSON([]byte(tc.in), &b)
		if tc.code == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.in, err)
			}
			continue
		}
		var e *store.Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("%q: got %v, want %s", tc.in, err, tc.code)
			continue
		}
		if tc.field != "" && (len(e.Fields) != 1 || e.Fields[0].Field != tc.field) {
			t.Errorf("%q: fields %+v, want %s", tc.in, e.Fields, tc.field)
		}
	}
}

// FuzzDecodeJSON: whatever arrives, decoding answers with nil or an application error
// (never a raw Go error that would surface as "internal"), and never panics.
func FuzzDecodeJSON(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/bodies/*.json")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"workspace_id":"ws_1","name":"x","access_mode":"restricted"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var in store.ProjectInput
		if err := decodeJSON(b, &in); err != nil {
			var e *store.Error
			if !errors.As(err, &e) {
				t.Fatalf("non-application error %T %v", err, err)
			}
			return
		}
		_ = in.Validate(true)
		if _, err := bodyString(b, "workspace_id"); err != nil {
			var e *store.Error
			if !errors.As(err, &e) {
				t.Fatalf("bodyString: non-application error %v", err)
			}
		}
	})
}

func decodeRecord(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestJSONErrorsAreInPlainWords: what a caller sees about a malformed or mistyped body is a
// sentence naming the place or the field, never encoding/json's own wording, and never
// the same words twice.
func TestJSONErrorsAreInPlainWords(t *testing.T) {
	type in struct {
		Name      *string    `json:"name"`
		ExpiresAt *time.Time `json:"expires_at"`
		Tags      []string   `json:"tags"`
	}
	for _, tc := range []struct {
		body     string
		contains []string
		field    string
	}{
		{`{"name":tru}`, []string{"line 1, column 12", "found '}'", "expected true, false or null"}, ""},
		{`{"name":"a",}`, []string{"line 1, column 13", "expected a key in double quotes"}, ""},
		{`{"name" "a"}`, []string{`expected ":" after a key`}, ""},
		{`{"tags":["a" "b"]}`, []string{`expected "," or "]" after an element`}, ""},
		{`{"name":"a" "tags":[]}`, []string{`expected "," or "}" after a value`}, ""},
		{"{\"name\":\"a\x01\"}", []string{"a control character (U+0001)", "escaped inside strings"}, ""},
		{"{\n  \"name\": nope\n}", []string{"line 2, column 12", "found 'o'"}, ""},
		{`{"name":"x"`, []string{"ends too early"}, ""},
		{`{"name":-}`, []string{"number is malformed"}, ""},
		{`{"name":"\q"}`, []string{"valid escape"}, ""},
		{`{"expires_at":"soon"}`, []string{"RFC 3339"}, "expires_at"},
		{`{"expires_at":5}`, []string{"RFC 3339"}, "expires_at"},
		{`{"tags":"a"}`, []string{"tags must be an array"}, "tags"},
	} {
		var v in
		err := decodeJSON([]byte(tc.body), &v)
		var e *store.Error
		if !errors.As(err, &e) {
			t.Errorf("%q: %v", tc.body, err)
			continue
		}
		for _, c := range tc.contains {
			if !strings.Contains(e.Message, c) {
				t.Errorf("%q: message %q lacks %q", tc.body, e.Message, c)
			}
		}
		for _, bad := range []string{"json:", "invalid character", "looking for", "unexpected EOF", "Go struct", "Go value", "literal", "UnmarshalJSON", "(body)", "(timestamp)"} {
			if strings.Contains(e.Error(), bad) {
				t.Errorf("%q: %q says %q", tc.body, e.Error(), bad)
			}
		}
		if tc.field != "" && (len(e.Fields) != 1 || e.Fields[0].Field != tc.field) {
			t.Errorf("%q: fields %+v, want %s", tc.body, e.Fields, tc.field)
		}
		if len(e.Fields) == 1 && strings.Count(e.Error(), e.Fields[0].Message) > 1 {
			t.Errorf("%q: Error() repeats itself: %q", tc.body, e.Error())
		}
	}
	// Decoding into a map (the WebSocket envelope) with the wrong top-level type, and the
	// access probe with white space before an array, say it once, in words.
	var m map[string]any
	if err := jsonError(json.Unmarshal([]byte(` []`), &m)); err.Error() != "request body must be a JSON object" {
		t.Errorf("map: %q", err.Error())
	}
	if _, _, err := bodyField([]byte(" \n[]"), "project_id"); err == nil || err.Error() != "request body must be a JSON object" {
		t.Errorf("bodyField: %v", err)
	}
}
