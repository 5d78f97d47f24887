package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
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
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errf(store.CodeInvalidJSON, "unexpected data after the JSON object")
	}
	return nil
}

// jsonError turns an encoding/json error into an application error without leaking Go
// type names.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return errf(store.CodeInvalidJSON, "invalid JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return errf(store.CodeInvalidJSON, "invalid JSON: the body ends too early")
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(body)"
		}
		return store.Invalid(store.FieldError{Field: field, Message: "must be " + jsonKind(typ.Type.Kind().String())})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return store.Invalid(store.FieldError{Field: name, Message: "is not a known field"})
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return store.Invalid(store.FieldError{Field: "(timestamp)", Message: "must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z"})
	}
	return errf(store.CodeInvalidJSON, "invalid JSON")
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

// ifMatch returns the version an If-Match header names, 0 when absent or "*".
func ifMatch(r *http.Request) (int, error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" || v == "*" {
		return 0, nil
	}
	v = strings.TrimPrefix(v, "W/")
	n, err := strconv.Atoi(strings.Trim(v, `"`))
	if err != nil || n < 1 {
		return 0, errf(store.CodePreconditionFailed, "If-Match must be an ETag this server sent, such as \"3\"")
	}
	return n, nil
}

// pageParams reads limit (default 50, 1..200) and cursor.
func pageParams(r *http.Request) (store.Page, error) {
	q := r.URL.Query()
	p := store.Page{Limit: 50, Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 200 {
			return p, store.Invalid(store.FieldError{Field: "limit", Message: "must be an integer from 1 to 200"})
		}
		p.Limit = n
	}
	if _, err := store.DecodeCursor(p.Cursor); err != nil {
		return p, err
	}
	return p, nil
}
