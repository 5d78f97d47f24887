package http

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"lookout/store"
)

// Codes only the transport produces: a body that did not arrive in time, and refused
// WebSocket handshakes.
const (
	codeRequestTimeout  = "request_timeout"
	codeUpgradeRequired = "upgrade_required"
	codeBadHandshake    = "bad_handshake"
)

// statusOf is the one table from error codes to HTTP statuses.
var statusOf = map[string]int{
	store.CodeInvalidJSON:          http.StatusBadRequest,
	store.CodeValidation:           http.StatusBadRequest,
	store.CodeUnauthenticated:      http.StatusUnauthorized,
	store.CodeForbidden:            http.StatusForbidden,
	store.CodeNotFound:             http.StatusNotFound,
	store.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	store.CodeConflict:             http.StatusConflict,
	store.CodeUnprocessable:        http.StatusUnprocessableEntity,
	store.CodePreconditionFailed:   http.StatusPreconditionFailed,
	store.CodeTooLarge:             http.StatusRequestEntityTooLarge,
	store.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	store.CodeRateLimited:          http.StatusTooManyRequests,
	store.CodeUnavailable:          http.StatusServiceUnavailable,
	store.CodeInternal:             http.StatusInternalServerError,
	codeRequestTimeout:             http.StatusRequestTimeout,
	codeUpgradeRequired:            http.StatusUpgradeRequired,
	codeBadHandshake:               http.StatusBadRequest,
}

// errorBody is the error envelope (CONTRACTS §1).
type errorBody struct {
	Error   bool               `json:"error"`
	Message string             `json:"message"`
	Code    string             `json:"code"`
	Fields  []store.FieldError `json:"fields,omitempty"`
}

// retryAfter wraps an error with the wait a 429 or 503 should advertise.
type retryAfter struct {
	err   error
	after time.Duration
}

func (e retryAfter) Error() string { return e.err.Error() }
func (e retryAfter) Unwrap() error { return e.err }

// writeError writes the envelope for any error. Application errors show their own message;
// anything else is logged with its detail and shown as "internal error".
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *store.Error
	body := errorBody{Error: true, Code: store.CodeInternal, Message: "internal error"}
	if errors.As(err, &e) {
		body.Code, body.Message, body.Fields = e.Code, e.Message, e.Fields
	} else {
		s.log.Error("request failed", "method", r.Method, "path", redact(r.URL.Path), "err", err)
	}
	status, ok := statusOf[body.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	var ra retryAfter
	if errors.As(err, &ra) {
		secs := int(ra.after.Round(time.Second) / time.Second)
		if secs < 1 {
			secs = 1
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	} else if status == http.StatusServiceUnavailable {
		// Every 503 is a "come back shortly" (a busy writer, the password-hash gate):
		// one second unless the error said how long.
		w.Header().Set("Retry-After", "1")
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lookout"`)
	}
	var wf withFields
	if errors.As(err, &wf) {
		writeJSON(w, status, wf.merge(body))
		return
	}
	writeJSON(w, status, body)
}

// withFields is an error whose envelope carries fields beside error, message and code
// (an ingest request that stored part of its records says how many, and where to resume).
type withFields struct {
	err    error
	fields map[string]any
}

func (e withFields) Error() string { return e.err.Error() }
func (e withFields) Unwrap() error { return e.err }

func (e withFields) merge(body errorBody) map[string]any {
	out := make(map[string]any, len(e.fields)+4)
	for k, v := range e.fields {
		out[k] = v
	}
	out["error"], out["message"], out["code"] = true, body.Message, body.Code
	if len(body.Fields) > 0 {
		out["fields"] = body.Fields
	}
	return out
}

func errMethodNotAllowed(method string) error {
	return store.Errorf(store.CodeMethodNotAllowed, "method %s is not allowed on this route", method)
}

func errNoRoute(path string) error {
	return store.Errorf(store.CodeNotFound, "no route %s", truncate(redact(path), 200))
}

// secretMarks start the credentials Lookout issues. A path segment that starts with one is
// a secret pasted into a URL by mistake; logs and messages show only its mark.
var secretMarks = []string{"lk_mgmt_", "lk_ak_"}

// redact replaces every path segment that holds a Lookout credential with a placeholder.
func redact(path string) string {
	if !strings.Contains(path, "lk_") {
		return path
	}
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		for _, m := range secretMarks {
			if j := strings.Index(seg, m); j >= 0 {
				segs[i] = seg[:j] + m + "[redacted]"
				break
			}
		}
	}
	return strings.Join(segs, "/")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func errf(code, format string, args ...any) error { return store.Errorf(code, format, args...) }
