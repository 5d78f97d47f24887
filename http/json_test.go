package http

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
