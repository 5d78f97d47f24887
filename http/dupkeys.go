package http

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"lookout/store"
)

// encoding/json keeps the last of two equal keys in one object, other parsers keep the
// first: a body that says {"project_id":"a","project_id":"b"} means different things to
// different readers (and to a reviewer reading a log). Lookout refuses such bodies.

// maxScanDepth matches encoding/json's nesting limit; deeper bodies are left to the
// decoder, which refuses them.
const maxScanDepth = 10000

// checkDuplicateKeys returns an invalid_json error naming the first key that appears twice
// in one object of body, or nil. It is one linear pass; keys are compared as substrings of
// one copy of the body (a key is copied only when it holds an escape), and each nesting
// depth reuses one set. Malformed JSON is not its business: it returns nil and lets the
// decoder report the syntax error.
func checkDuplicateKeys(body []byte) error {
	d := dupScanner{s: string(body)}
	if d.value(0); !d.found {
		return nil
	}
	field := d.dupPath
	if field != "" {
		field += "."
	}
	field += d.dupKey
	return &store.Error{
		Code:    store.CodeInvalidJSON,
		Message: "the key " + strconv.Quote(d.dupKey) + " appears twice in one object of the request body (at " + field + "); send each key once",
		Fields:  []store.FieldError{{Field: field, Message: "appears more than once"}},
	}
}

type dupFrame struct {
	key   string
	index int
	array bool
}

type dupScanner struct {
	s      string
	i      int
	seen   []map[string]struct{} // one set per depth, cleared for each object
	path   []dupFrame
	found  bool
	dupKey string
	// dupPath is the path of the object holding dupKey ("fields[2]"), "" at the top.
	dupPath string
}

func (d *dupScanner) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

// value scans one JSON value. It returns false when the body is malformed or a duplicate
// was found (then dupKey is set), true when the value was scanned.
func (d *dupScanner) value(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	d.ws()
	if d.i >= len(d.s) {
		return false
	}
	switch d.s[d.i] {
	case '{':
		return d.object(depth)
	case '[':
		d.i++
		d.ws()
		if d.i < len(d.s) && d.s[d.i] == ']' {
			d.i++
			return true
		}
		for n := 0; ; n++ {
			d.path = append(d.path, dupFrame{index: n, array: true})
			ok := d.value(depth + 1)
			d.path = d.path[:len(d.path)-1]
			if !ok {
				return false
			}
			d.ws()
			if d.i >= len(d.s) {
				return false
			}
			switch d.s[d.i] {
			case ',':
				d.i++
			case ']':
				d.i++
				return true
			default:
				return false
			}
		}
	case '"':
		_, ok := d.str()
		return ok
	}
	// A number, true, false or null: the decoder checks its spelling.
	if c := d.s[d.i]; c != '-' && (c < '0' || c > '9') && c != 't' && c != 'f' && c != 'n' {
		return false
	}
	start := d.i
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			return d.i > start
		}
		d.i++
	}
	return d.i > start
}

func (d *dupScanner) object(depth int) bool {
	d.i++ // {
	for len(d.seen) <= depth {
		d.seen = append(d.seen, map[string]struct{}{})
	}
	seen := d.seen[depth]
	clear(seen)
	d.ws()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return true
	}
	for {
		d.ws()
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return false
		}
		key, ok := d.str()
		if !ok {
			return false
		}
		folded := foldKey(key)
		if _, dup := seen[folded]; dup {
			d.found, d.dupKey, d.dupPath = true, key, d.pathString()
			return false
		}
		seen[folded] = struct{}{}
		d.ws()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			return false
		}
		d.i++
		d.path = append(d.path, dupFrame{key: key})
		ok = d.value(depth + 1)
		d.path = d.path[:len(d.path)-1]
		if !ok {
			return false
		}
		d.ws()
		if d.i >= len(d.s) {
			return false
		}
		switch d.s[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// str scans a string at d.i and returns its value: a substring of the body, or, when it
// holds an escape, the decoded text (so "a" and "\u0061" are the same key, as they are to
// encoding/json).
func (d *dupScanner) str() (string, bool) {
	start := d.i
	d.i++ // opening quote
	escaped := false
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case '\\':
			escaped = true
			d.i += 2
			continue
		case '"':
			d.i++
			if !escaped {
				return d.s[start+1 : d.i-1], true
			}
			var v string
			if json.Unmarshal([]byte(d.s[start:d.i]), &v) != nil {
				return "", false
			}
			return v, true
		}
		d.i++
	}
	return "", false
}

// pathString renders the path of the object being scanned: fields[2].config.
func (d *dupScanner) pathString() string {
	var b strings.Builder
	for _, f := range d.path {
		if f.array {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.key)
	}
	return b.String()
}

// foldKey maps a key to one spelling per case-insensitive class: encoding/json matches
// struct fields without regard to case (Unicode simple folding), so "workspace_id" and
// "WORKSPACE_ID" fill the same field and must count as the same key here, or an access
// check reading one could be fooled by a decode taking the other. Each rune becomes the
// lowercase of the smallest rune of its folding orbit (K, k and the Kelvin sign all
// become k); keys of ASCII without capitals, the usual case, are already in that form.
func foldKey(k string) string {
	plain := true
	for i := 0; i < len(k); i++ {
		if c := k[i]; c >= utf8.RuneSelf || (c >= 'A' && c <= 'Z') {
			plain = false
			break
		}
	}
	if plain {
		return k
	}
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return unicode.ToLower(least)
	}, k)
}
