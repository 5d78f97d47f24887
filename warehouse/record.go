package warehouse

import (
	"bytes"
	"encoding/json"
	"lookout/store"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// RecordValidator checks records in their JSON form against a model in one pass over the
// bytes: it validates the syntax, checks every field's type, and writes the record as it
// is to be stored (compact, unknown fields dropped when the model says so, system fields
// appended). No map is built and nothing is decoded twice; Model.Validate is the same rule
// set over decoded values, and FuzzValidatorsAgree keeps the two in step.
type RecordValidator struct {
	model   *store.Model
	index   map[string]int
	unknwn  string
	watch   []int // per model field, its place among the watched names, or -1 (nil: none)
	watched int
}

// maxDepth bounds nesting inside a record.
const maxDepth = 64

// Messages shared by both validators.
const (
	msgRequired  = "is required"
	msgString    = "must be a string"
	msgBoolean   = "must be a boolean"
	msgInteger   = "must be an integer"
	msgNumber    = "must be a number"
	msgTimestamp = "must be an RFC 3339 timestamp or epoch milliseconds"
	msgObject    = "must be an object"
	msgArray     = "must be an array"
)

// Validator returns the model's JSON record validator.
func NewValidator(m *store.Model) *RecordValidator {
	v := &RecordValidator{model: m, index: make(map[string]int, len(m.Fields)), unknwn: m.UnknownFields}
	for i, f := range m.Fields {
		v.index[f.Name] = i
	}
	return v
}

// SystemValues are the system fields of a record, as Scan writes them out.
type SystemValues struct {
	ReceivedAt string // RFC 3339 with microseconds
	ClientID   string
	IngestID   string
}

// appendSystem appends the system fields (already JSON-safe ids and a timestamp).
func appendSystem(dst []byte, sys SystemValues, first bool) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, `"_received_at":"`...)
	dst = append(dst, sys.ReceivedAt...)
	dst = append(dst, `","_client_id":"`...)
	dst = append(dst, sys.ClientID...)
	dst = append(dst, `","_ingest_id":"`...)
	dst = append(dst, sys.IngestID...)
	return append(dst, `"}`...)
}

// jsonKind is the kind of a scanned JSON value.
type jsonKind uint8

const (
	kindNull jsonKind = iota
	kindBool
	kindNumber
	kindString
	kindObject
	kindArray
)

// syntaxError is a malformed record.
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string {
	return "invalid JSON at byte " + strconv.Itoa(e.off) + ": " + e.msg
}

type jscan struct {
	b   []byte
	i   int
	err *syntaxError
}

func (s *jscan) fail(msg string) {
	if s.err == nil {
		s.err = &syntaxError{msg: msg, off: s.i}
	}
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str scans a string starting at '"' and appends it verbatim (escapes kept) to dst. It
// reports whether the string held escapes.
func (s *jscan) str(dst []byte) ([]byte, bool) {
	start := s.i
	s.i++ // opening quote
	escaped, high := false, false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if high && !utf8.Valid(s.b[start:s.i]) {
				s.fail("string is not valid UTF-8")
				return dst, escaped
			}
			return append(dst, s.b[start:s.i]...), escaped
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				s.fail("unterminated escape")
				return dst, escaped
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !isHex4(s.b[s.i+2:s.i+6]) {
					s.fail("bad \\u escape")
					return dst, escaped
				}
				s.i += 6
			default:
				s.fail("bad escape")
				return dst, escaped
			}
		case c < 0x20:
			s.fail("control character in string")
			return dst, escaped
		default:
			if c >= 0x80 {
				high = true
			}
			s.i++
		}
	}
	s.fail("unterminated string")
	return dst, escaped
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// num scans a number and appends it to dst; plain says it had no fraction or exponent.
func (s *jscan) num(dst []byte) ([]byte, bool) {
	start := s.i
	plain := true
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
	default:
		s.fail("bad number")
		return dst, false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		plain = false
		s.i++
		if !s.digits() {
			s.fail("bad number fraction")
			return dst, false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		plain = false
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			s.fail("bad number exponent")
			return dst, false
		}
	}
	return append(dst, s.b[start:s.i]...), plain
}

func (s *jscan) digits() bool {
	n := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > n
}

func (s *jscan) lit(dst []byte, word string) []byte {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		s.fail("bad literal")
		return dst
	}
	s.i += len(word)
	return append(dst, word...)
}

// value scans any value, appending it compacted to dst.
func (s *jscan) value(dst []byte, depth int) ([]byte, jsonKind) {
	s.ws()
	if s.i >= len(s.b) {
		s.fail("unexpected end")
		return dst, kindNull
	}
	switch c := s.b[s.i]; {
	case c == '"':
		dst, _ = s.str(dst)
		return dst, kindString
	case c == '{':
		return s.container(dst, depth, '}'), kindObject
	case c == '[':
		return s.container(dst, depth, ']'), kindArray
	case c == 't':
		return s.lit(dst, "true"), kindBool
	case c == 'f':
		return s.lit(dst, "false"), kindBool
	case c == 'n':
		return s.lit(dst, "null"), kindNull
	case c == '-' || c >= '0' && c <= '9':
		dst, _ = s.num(dst)
		return dst, kindNumber
	}
	s.fail("unexpected character")
	return dst, kindNull
}

// container scans a nested object or array.
func (s *jscan) container(dst []byte, depth int, closer byte) []byte {
	if depth >= maxDepth {
		s.fail("nesting too deep")
		return dst
	}
	dst = append(dst, s.b[s.i])
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == closer {
		s.i++
		return append(dst, closer)
	}
	for s.err == nil {
		if closer == '}' {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				s.fail("expected a key")
				return dst
			}
			dst, _ = s.str(dst)
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				s.fail("expected ':'")
				return dst
			}
			s.i++
			dst = append(dst, ':')
		}
		dst, _ = s.value(dst, depth+1)
		s.ws()
		if s.i >= len(s.b) {
			s.fail("unexpected end")
			return dst
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			dst = append(dst, ',')
		case closer:
			s.i++
			return append(dst, closer)
		default:
			s.fail("expected ',' or a closing bracket")
			return dst
		}
	}
	return dst
}

// Span is where a field's value sits in a stored record, [Start, End) from the record's
// first byte; End 0 means the record does not have the field.
type Span struct{ Start, End uint32 }

// Watching returns a copy of the validator that also reports, for every record it
// accepts, the spans of the named fields (ValidateSpans): the alert evaluator reads the
// values it needs from there instead of scanning each record again. Names that are not
// fields of the model are never found.
func (v *RecordValidator) Watching(names []string) *RecordValidator {
	w := *v
	w.watch = make([]int, len(v.model.Fields))
	for i := range w.watch {
		w.watch[i] = -1
	}
	for j, n := range names {
		if i, ok := v.index[n]; ok {
			w.watch[i] = j
		}
	}
	w.watched = len(names)
	return &w
}

// Validate checks one JSON object and, when it is valid, appends the record to store to
// dst and returns it: compact JSON of the model's fields (the system fields are kept once
// per log entry, not per record). A stored record is never longer than raw. A syntax error
// is returned as the only FieldError, with field "".
func (v *RecordValidator) Validate(raw []byte, dst []byte) ([]byte, []store.FieldError) {
	dst, _, errs := v.ValidateSpans(raw, dst, nil)
	return dst, errs
}

// ValidateSpans is Validate that, for a validator made by Watching, also appends the
// accepted record's watched spans (one per watched name, in their order) to spans. A
// rejected record appends none.
func (v *RecordValidator) ValidateSpans(raw []byte, dst []byte, spans []Span) ([]byte, []Span, []store.FieldError) {
	base := len(spans)
	for range v.watched {
		spans = append(spans, Span{})
	}
	dst, errs := v.validate(raw, dst, spans[base:])
	if errs != nil {
		return dst, spans[:base], errs
	}
	return dst, spans, nil
}

func (v *RecordValidator) validate(raw []byte, dst []byte, spans []Span) ([]byte, []store.FieldError) {
	s := jscan{b: raw}
	var errs []store.FieldError
	s.ws()
	if s.i >= len(raw) || raw[s.i] != '{' {
		return dst, []store.FieldError{{Message: "a record must be a JSON object"}}
	}
	s.i++
	start := len(dst)
	dst = append(dst, '{')
	var seenBuf [64]bool
	seen := seenBuf[:0]
	if n := len(v.model.Fields); n <= len(seenBuf) {
		seen = seenBuf[:n]
	} else {
		seen = make([]bool, n)
	}
	var unknown map[string]bool
	first := true
	s.ws()
	if s.i < len(raw) && raw[s.i] == '}' {
		s.i++
	} else {
		for s.err == nil {
			s.ws()
			if s.i >= len(raw) || raw[s.i] != '"' {
				s.fail("expected a key")
				break
			}
			keyStart := len(dst)
			if !first {
				dst = append(dst, ',')
			}
			nameAt := len(dst)
			var escaped bool
			dst, escaped = s.str(dst)
			nameEnd := len(dst)
			s.ws()
			if s.i >= len(raw) || raw[s.i] != ':' {
				s.fail("expected ':'")
				break
			}
			s.i++
			dst = append(dst, ':')
			valAt := len(dst)
			var kind jsonKind
			var plain bool
			s.ws()
			if s.i < len(raw) && (raw[s.i] == '-' || raw[s.i] >= '0' && raw[s.i] <= '9') {
				dst, plain = s.num(dst)
				kind = kindNumber
			} else {
				dst, kind = s.value(dst, 1)
			}
			if s.err != nil {
				break
			}
			var idx int
			var known bool
			var name string
			if escaped {
				name = unquoteKey(dst[nameAt:nameEnd])
				idx, known = v.index[name]
			} else {
				idx, known = v.index[string(dst[nameAt+1:nameEnd-1])] // no allocation
				if !known || seen[idx] {
					name = string(dst[nameAt+1 : nameEnd-1])
				}
			}
			switch {
			case !known:
				if unknown == nil {
					unknown = map[string]bool{}
				}
				if unknown[name] {
					errs = append(errs, store.FieldError{Field: name, Message: "appears twice"})
				}
				unknown[name] = true
				if v.unknwn == store.UnknownReject {
					errs = append(errs, store.FieldError{Field: name, Message: "is not a field of model " + v.model.Key})
				}
				dst = dst[:keyStart]
				goto next
			case seen[idx]:
				errs = append(errs, store.FieldError{Field: v.model.Fields[idx].Name, Message: "appears twice"})
			}
			seen[idx] = true
			if v.watch != nil {
				if w := v.watch[idx]; w >= 0 {
					spans[w] = Span{uint32(valAt - start), uint32(len(dst) - start)}
				}
			}
			if msg := checkKind(v.model.Fields[idx], kind, plain, dst[valAt:]); msg != "" {
				errs = append(errs, store.FieldError{Field: v.model.Fields[idx].Name, Message: msg})
			}
			first = false
		next:
			s.ws()
			if s.i >= len(raw) {
				s.fail("unexpected end")
				break
			}
			if raw[s.i] == ',' {
				s.i++
				continue
			}
			if raw[s.i] == '}' {
				s.i++
				break
			}
			s.fail("expected ',' or '}'")
		}
	}
	if s.err == nil {
		s.ws()
		if s.i != len(raw) {
			s.fail("unexpected data after the record")
		}
	}
	if s.err != nil {
		return dst[:start], []store.FieldError{{Message: s.err.Error()}}
	}
	for i, f := range v.model.Fields {
		if f.Required && !seen[i] {
			errs = append(errs, store.FieldError{Field: f.Name, Message: msgRequired})
		}
	}
	if len(errs) > 0 {
		store.SortFieldErrors(errs)
		return dst[:start], errs
	}
	return append(dst, '}'), nil
}

// checkKind applies a field's type to a scanned value (raw is its compact JSON).
func checkKind(f store.Field, kind jsonKind, plain bool, raw []byte) string {
	if kind == kindNull {
		if f.Required {
			return msgRequired
		}
		return ""
	}
	switch f.Type {
	case store.TypeString:
		if kind != kindString {
			return msgString
		}
	case store.TypeBoolean:
		if kind != kindBool {
			return msgBoolean
		}
	case store.TypeInteger:
		if kind != kindNumber || !integral(raw, plain) {
			return msgInteger
		}
	case store.TypeNumber:
		if kind != kindNumber {
			return msgNumber
		}
		if f, err := strconv.ParseFloat(string(raw), 64); err != nil || math.IsInf(f, 0) {
			return msgNumber
		}
	case store.TypeTimestamp:
		switch kind {
		case kindString:
			str := string(raw[1 : len(raw)-1])
			if bytes.IndexByte(raw, '\\') >= 0 {
				str = unquoteKey(raw)
			}
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				return msgTimestamp
			}
		case kindNumber:
			if !integral(raw, plain) || raw[0] == '-' && !isNegZero(raw) {
				return msgTimestamp
			}
		default:
			return msgTimestamp
		}
	case store.TypeObject:
		if kind != kindObject {
			return msgObject
		}
	case store.TypeArray:
		if kind != kindArray {
			return msgArray
		}
	}
	return ""
}

// integral says whether a JSON number is an integer as Model.Validate sees it: fits int64,
// or is a float without fraction below 2^53 in magnitude.
func integral(raw []byte, plain bool) bool {
	if plain {
		if _, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return true
		}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53
}

func isNegZero(raw []byte) bool {
	f, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && f == 0
}

// unquoteKey decodes a JSON string literal (with its quotes).
func unquoteKey(lit []byte) string {
	var out string
	if err := json.Unmarshal(lit, &out); err != nil {
		return string(lit)
	}
	return out
}
