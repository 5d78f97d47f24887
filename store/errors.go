package store

import (
	"errors"
	"fmt"
	"strings"
)

// Error codes shared by every layer. The transport maps each to a status through one table
// (http/errors.go); the words are part of the public contract (CONTRACTS §1).
const (
	CodeInvalidJSON          = "invalid_json"
	CodeValidation           = "validation_failed"
	CodeUnauthenticated      = "unauthenticated"
	CodeForbidden            = "forbidden"
	CodeNotFound             = "not_found"
	CodeConflict             = "conflict"
	CodeUnprocessable        = "unprocessable"
	CodePreconditionFailed   = "precondition_failed"
	CodeTooLarge             = "too_large"
	CodeRateLimited          = "rate_limited"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeUnavailable          = "unavailable"
	CodeInternal             = "internal"
)

// FieldError names one invalid input field and why it is invalid.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an application error: a stable code, a message safe to show to the caller and,
// for validation failures, the offending fields. Anything that is not an *Error is reported
// to callers as "internal error" and only logged.
type Error struct {
	Code    string
	Message string
	Fields  []FieldError
}

// Error is the message, plus the first field's problem when the message does not already
// say it (Invalid's one-field message does), so no text is repeated when an error is shown
// as a string (WebSocket replies, logs).
func (e *Error) Error() string {
	if len(e.Fields) == 0 || strings.Contains(e.Message, e.Fields[0].Message) {
		return e.Message
	}
	return fmt.Sprintf("%s (%s: %s)", e.Message, e.Fields[0].Field, e.Fields[0].Message)
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns a validation_failed error listing the given field problems.
func Invalid(fields ...FieldError) *Error {
	msg := "invalid input"
	if len(fields) == 1 {
		msg = fmt.Sprintf("invalid input: %s %s", fields[0].Field, fields[0].Message)
	}
	return &Error{Code: CodeValidation, Message: msg, Fields: fields}
}

// NotFound returns a not_found error naming the kind of resource.
func NotFound(kind string) *Error { return Errorf(CodeNotFound, "%s not found", kind) }

// ErrorCode returns the code of an application error, or CodeInternal for anything else.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// IsCode reports whether err is an application error with the given code.
func IsCode(err error, code string) bool { return err != nil && ErrorCode(err) == code }

// fieldErrors collects validation problems in the order they were found.
type fieldErrors []FieldError

func (f *fieldErrors) add(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (f fieldErrors) err() error {
	if len(f) == 0 {
		return nil
	}
	return Invalid(f...)
}
