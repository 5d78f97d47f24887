package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lookout/store"
)

func TestCheckDuplicateKeys(t *testing.T) {
	for _, tc := range []struct {
		in, field string // field "" means no duplicate
	}{
		{`{"a":1,"b":2}`, ""},
		{`{"a":1,"a":2}`, "a"},
		{` { "a" : 1 , "a" : 2 } `, "a"},
		{`{"a":"x","\u0061":"y"}`, "a"},
		{`{"a\"b":1,"a\"b":2}`, `a"b`},
		{`{"a":1,"A":2}`, "A"}, // encoding/json fills one field from both
		{`{"workspace_id":"w1","WORKSPACE_ID":"w2","name":"x"}`, "WORKSPACE_ID"},
		{`{"kind":1,"\u212aind":2}`, "Kind"}, // the Kelvin sign folds to k
		{`{"a":1,"b":2,"ab":3}`, ""},
		{`{"o":{"a":1},"p":{"a":1}}`, ""},
		{`{"o":{"a":1,"a":1}}`, "o.a"},
		{`{"fields":[{"name":"x"},{"name":"y","type":"s","name":"z"}]}`, "fields[1].name"},
		{`{"m":[[{"k":1}],[{"k":1,"k":2}]]}`, "m[1][0].k"},
		{`{"a":{"b":{"c":1}},"b":{"c":2}}`, ""},
		{`{"a":[1,2,{"a":3}],"b":"a"}`, ""},
		{`{"a":1,"b":{},"c":[],"a":[]}`, "a"},
		{`{"a":1,"a"`, "a"},            // found before the syntax error
		{`{"a":1,"b":tru,"a":2}`, "a"}, // scalars are the decoder's to check
		{`{"a":1,"b"`, ""},
		{`{"a"::1,"a":2}`, ""},
		{`{"a":"\"}`, ""},
		{`[`, ""},
		{``, ""},
	} {
		err := checkDuplicateKeys([]byte(tc.in))
		var e *store.Error
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.field != "" && (!errors.As(err, &e) || e.Code != store.CodeInvalidJSON || len(e.Fields) != 1 || e.Fields[0].Field != tc.field):
			t.Errorf("%s: got %v, want a duplicate at %s", tc.in, err, tc.field)
		}
	}
	// Deep nesting is left to the decoder, without exhausting the stack.
	deep := strings.Repeat("[", 200000) + strings.Repeat("]", 200000)
	if err := checkDuplicateKeys([]byte(`{"a":` + deep + `}`)); err != nil {
		t.Fatal(err)
	}
}

// refDuplicate is the reference: encoding/json's tokenizer, one list of keys per open
// object, each new key compared with strings.EqualFold to every earlier one (as
// encoding/json matches keys to fields).
func refDuplicate(b []byte) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	type obj struct {
		keys      map[string]bool
		expectKey bool
	}
	var stack []*obj
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		var top *obj
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.expectKey {
			if k, ok := tok.(string); ok {
				for seen := range top.keys {
					if strings.EqualFold(seen, k) {
						return true, nil
					}
				}
				top.keys[k] = true
				top.expectKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &obj{keys: map[string]bool{}, expectKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, nil)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1] != nil {
			stack[len(stack)-1].expectKey = true
		}
	}
}

// FuzzCheckDuplicateKeys: on valid JSON the scanner agrees with encoding/json's tokenizer
// about whether some object repeats a key; on anything else it never panics.
func FuzzCheckDuplicateKeys(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/bodies/*.json")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{`{"a":1,"a":2}`, `{"o":{"a":[{"b":1,"b":2}]}}`, `{"a":"\u0061","\u0061":1}`, `{"x":[1,{"y":null}],"z":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkDuplicateKeys(b)
		if !json.Valid(b) {
			return
		}
		want, rerr := refDuplicate(b)
		if rerr != nil {
			return
		}
		if got := err != nil; got != want {
			t.Fatalf("%q: scanner says duplicate=%v (%v), reference says %v", b, got, err, want)
		}
	})
}

// TestCaseVariantKeysCannotSteerAccess: access is decided from a body field before the
// handler decodes the body with encoding/json, which matches keys without regard to case;
// a body naming the workspace twice in two spellings must be refused, never decoded into
// the other workspace.
func TestCaseVariantKeysCannotSteerAccess(t *testing.T) {
	h := newHarness(t)
	w := h.world()
	for _, b := range []string{"/api/v1/projects", "/management/v1/projects"} {
		authz := "Bearer " + w.ownerSes
		if strings.HasPrefix(b, "/management") {
			authz = "Bearer " + w.tokens["allowed"]
		}
		body := map[string]any{"workspace_id": w.ws.ID, "WORKSPACE_ID": w.otherWS.ID, "name": "sneaky"}
		r := h.do("POST", b, authz, body)
		if r.status != 400 || !strings.Contains(r.body, "appears twice") {
			t.Fatalf("%s: %d %s", b, r.status, r.body)
		}
	}
	list, _, err := h.st.ListProjects(store.ProjectFilter{WorkspaceID: w.otherWS.ID, SeeRestricted: true}, store.Page{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		if p.Name == "sneaky" {
			t.Fatal("a project was created in another workspace")
		}
	}
}
