package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"lookout/limits"
	"lookout/store"
)

// dataBody is the success envelope; NextCursor appears on lists that have more.
type dataBody struct {
	Error      bool   `json:"error"`
	Data       any    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	buf, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		buf = []byte(`{"error":true,"message":"internal error","code":"internal"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(buf)+1))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(buf, '\n'))
}

// writeData answers with the success envelope.
func writeData(w http.ResponseWriter, status int, data any) {
	writeJSON(w, status, dataBody{Data: data})
}

// writeResource answers with one versioned resource and its ETag.
func writeResource(w http.ResponseWriter, status int, data any, version int) {
	w.Header().Set("ETag", `"`+strconv.Itoa(version)+`"`)
	writeData(w, status, data)
}

// writeList answers with a page of a list.
func writeList(w http.ResponseWriter, items any, next string) {
	writeJSON(w, http.StatusOK, dataBody{Data: items, NextCursor: next})
}

// readBody reads a JSON request body, enforcing the media type (415) and the 2 MiB cap (413)
// while reading, so no more than the cap is ever buffered.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	if ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return nil, errUnsupportedMedia()
		}
	} else if r.ContentLength > 0 {
		return nil, errUnsupportedMedia()
	}
	if r.ContentLength > limits.ManagementBody {
		return nil, errTooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limits.ManagementBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, errTooLarge()
	}
	if isReadTimeout(err) {
		return nil, errf(codeRequestTimeout, "the request body did not arrive within the body read timeout; send it in one go")
	}
	if err != nil {
		return nil, errf(store.CodeInvalidJSON, "could not read the request body")
	}
	if ct == "" && len(body) > 0 { // a chunked body of unknown length and no media type
		return nil, errUnsupportedMedia()
	}
	return body, nil
}

func errUnsupportedMedia() error {
	return errf(store.CodeUnsupportedMediaType, "Content-Type must be application/json")
}

func errTooLarge() error {
	return errf(store.CodeTooLarge, "request body exceeds the 2 MiB limit")
}

// decodeJSON decodes one JSON object into v, rejecting unknown fields, wrong types and
// trailing data, each with an error that names the problem.
func decodeJSON(body []byte, v any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return errf(store.CodeInvalidJSON, "request body is empty: send a JSON object")
	}
	if trimmed[0] != '{' {
		return errf(store.CodeInvalidJSON, "request body must be a JSON object")
	}
	if err := checkDuplicateKeys(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonErrorIn(err, body, v)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errf(store.CodeInvalidJSON, "unexpected data after the JSON object")
	}
	return nil
}

// jsonError turns an encoding/json error into an application error in plain words: no Go
// type names, no decoder wording ("invalid character … looking for beginning of value").
func jsonError(err error) error { return jsonErrorIn(err, nil, nil) }

// jsonErrorIn is jsonError with the body (to say where a syntax error is, by line and
// column) and the value being decoded (to name the field of a bad timestamp); either may
// be nil.
func jsonErrorIn(err error, body []byte, v any) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return errf(store.CodeInvalidJSON, "%s", syntaxMessage(syn, body))
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return errf(store.CodeInvalidJSON, "invalid JSON: the body ends too early (an object, array or string is not closed)")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errf(store.CodeInvalidJSON, "request body must be a JSON object")
		}
		return store.Invalid(store.FieldError{Field: typ.Field, Message: "must be " + jsonKind(typ.Type.Kind().String())})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return store.Invalid(store.FieldError{Field: name, Message: "is not a known field"})
	}
	var pe *time.ParseError
	if errors.As(err, &pe) || strings.HasPrefix(err.Error(), "Time.UnmarshalJSON") {
		const msg = "must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z"
		if field := badTimeField(body, v); field != "" {
			return store.Invalid(store.FieldError{Field: field, Message: msg})
		}
		return errf(store.CodeValidation, "a timestamp in the request body %s", msg)
	}
	return errf(store.CodeInvalidJSON, "invalid JSON")
}

// syntaxMessage says in plain words where a body stops being JSON and what was expected.
func syntaxMessage(syn *json.SyntaxError, body []byte) string {
	where := "at byte " + strconv.FormatInt(syn.Offset, 10)
	found := ""
	if off := int(syn.Offset); body != nil && off >= 1 && off <= len(body) {
		line, col := 1, 1
		for _, c := range body[:off-1] {
			if c == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		where = "at line " + strconv.Itoa(line) + ", column " + strconv.Itoa(col)
		c := body[off-1]
		switch {
		case c < 0x20 || c == 0x7f:
			found = fmt.Sprintf("a control character (U+%04X)", c)
		case c < 0x80:
			found = strconv.QuoteRune(rune(c))
		default:
			found = "a non-ASCII character"
		}
	}
	// encoding/json's messages end with what it was reading; say the same in plain words.
	msg := syn.Error()
	expected := "the body is not valid JSON"
	for _, m := range []struct{ suffix, plain string }{
		{"looking for beginning of value", "expected a value (a string, number, object, array, true, false or null)"},
		{"looking for beginning of object key string", "expected a key in double quotes"},
		{"after object key:value pair", `expected "," or "}" after a value`},
		{"after object key", `expected ":" after a key`},
		{"after array element", `expected "," or "]" after an element`},
		{"in string literal", "control characters must be escaped inside strings"},
		{"in string escape code", `expected a valid escape such as \n or \" in a string`},
		{"in \\u hexadecimal character escape", `expected four hex digits after \u`},
		{"in numeric literal", "the number is malformed"},
		{"after top-level value", "unexpected data after the JSON object"},
		{"unexpected end of JSON input", "the body ends too early"},
	} {
		if strings.Contains(msg, m.suffix) {
			expected = m.plain
			break
		}
	}
	if strings.Contains(msg, "in literal ") {
		expected = "expected true, false or null"
	}
	if found != "" {
		return "invalid JSON " + where + ": found " + found + "; " + expected
	}
	return "invalid JSON " + where + ": " + expected
}

// badTimeField finds the top-level field of v (a pointer to a struct) whose timestamp in
// body does not parse, so the error can name it. "" when it cannot tell.
func badTimeField(body []byte, v any) string {
	if body == nil || v == nil {
		return ""
	}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(body, &probe) != nil {
		return ""
	}
	timeType := reflect.TypeOf(time.Time{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if ft != timeType || name == "" || name == "-" {
			continue
		}
		raw, ok := probe[name]
		var tm time.Time
		if ok && string(raw) != "null" && json.Unmarshal(raw, &tm) != nil {
			return name
		}
	}
	return ""
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	}
	return "of another type"
}

// ifMatch returns the version an If-Match header names: 0 when absent or "*", and
// store.IfMatchNever for a tag no version can match. RFC 9110 compares If-Match strongly,
// so a weak tag (W/"3") never matches; a malformed value or a list of several tags is
// treated alike (Lookout sends one strong ETag per resource). The store answers 412 with
// the current version, so the error names what to send instead.
func ifMatch(r *http.Request) int {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" || v == "*" {
		return 0
	}
	if len(v) < 3 || v[0] != '"' || v[len(v)-1] != '"' {
		return store.IfMatchNever // weak (W/"3"), unquoted or a list
	}
	n, err := strconv.Atoi(v[1 : len(v)-1])
	if err != nil || n < 1 || strconv.Itoa(n) != v[1:len(v)-1] {
		return store.IfMatchNever
	}
	return n
}
