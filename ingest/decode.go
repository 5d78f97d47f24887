package ingest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLine is the NDJSON line ceiling (spec §8): 10 MB.
const MaxLine = 10_000_000

// MaxJSONBody caps a JSON (not NDJSON) ingest body. NDJSON streams without a cap.
const MaxJSONBody = 64 << 20

// item is one record as it arrived: its raw bytes, where it was (line for NDJSON, index
// for JSON) and the schema it names, if any. An item with err set is a record that could
// not even be read.
type item struct {
	raw    []byte
	pos    int
	schema string
	err    string
}

// source yields the records of a request body one by one.
type source interface {
	// next returns the next item, or io.EOF at the end. An error other than io.EOF ends the
	// whole request (the body could not be read).
	next() (item, error)
	// byLine says positions are 1-based lines (NDJSON) rather than 0-based indexes (JSON).
	byLine() bool
}

// ndjson reads one record per line, each direct or wrapped as {"data": {…}, "schema": …}.
type ndjson struct {
	r    *bufio.Reader
	line int
	buf  []byte
}

func newNDJSON(r io.Reader) *ndjson { return &ndjson{r: bufio.NewReaderSize(r, 256<<10)} }

func (n *ndjson) byLine() bool { return true }

func (n *ndjson) next() (item, error) {
	for {
		line, tooLong, err := n.readLine()
		if err != nil && (err != io.EOF || (len(line) == 0 && !tooLong)) {
			return item{}, err
		}
		n.line++
		if tooLong {
			return item{pos: n.line, err: fmt.Sprintf("line exceeds the %d-byte limit", MaxLine)}, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			if err == io.EOF {
				return item{}, io.EOF
			}
			continue // blank lines are allowed between records
		}
		it := item{raw: line, pos: n.line}
		if data, schema, ok := unwrap(line); ok {
			it.raw, it.schema = data, schema
		}
		return it, nil
	}
}

// readLine returns the next line without its newline. A line over MaxLine is consumed and
// reported as tooLong, without holding more than MaxLine bytes.
func (n *ndjson) readLine() ([]byte, bool, error) {
	n.buf = n.buf[:0]
	tooLong := false
	for {
		chunk, err := n.r.ReadSlice('\n')
		if !tooLong {
			if len(n.buf)+len(chunk) > MaxLine+1 {
				tooLong = true
				n.buf = n.buf[:0]
			} else {
				n.buf = append(n.buf, chunk...)
			}
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(n.buf, []byte("\n")), tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return n.buf, tooLong, err
		}
	}
}

// unwrap recognises a wrapped NDJSON line: an object whose only keys are "data" (an
// object) and optionally "schema" (a string). A model field named "data" therefore cannot
// be sent as a direct line on its own; wrap such records.
func unwrap(line []byte) ([]byte, string, bool) {
	if !bytes.Contains(line, []byte(`"data"`)) {
		return nil, "", false
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(line, &env) != nil {
		return nil, "", false
	}
	data, ok := env["data"]
	if !ok || len(env) > 2 || len(data) == 0 || data[0] != '{' {
		return nil, "", false
	}
	var schema string
	if raw, has := env["schema"]; has {
		if json.Unmarshal(raw, &schema) != nil {
			return nil, "", false
		}
	} else if len(env) == 2 {
		return nil, "", false
	}
	return data, schema, true
}

// decodeError is a body that is not the JSON envelope it should be.
type decodeError struct{ msg string }

func (e *decodeError) Error() string { return e.msg }

func decodeErrorf(format string, args ...any) error {
	return &decodeError{fmt.Sprintf(format, args...)}
}

// jsonBody reads {"schema": "…", "data": [ … ]} in one pass over the bytes: whitespace is
// skipped once, each record's bytes are cut out by matching brackets (the record
// validator checks what is inside), and every byte counts against MaxJSONBody, so the
// cost is linear in the body whatever it holds. Records stream when schema comes first or
// is given in the query; otherwise they are held until schema is seen.
type jsonBody struct {
	r      *bufio.Reader
	off    int64 // bytes consumed
	schema string
	index  int
	state  int
	held   []item
	rec    []byte
	open   []byte  // the brackets open in the record being cut out
	seen   [2]bool // schema, data: each may appear once
}

const (
	jsStart = iota
	jsKey   // expecting a key or the closing brace
	jsNextKey
	jsData     // inside data, expecting a record or ]
	jsNextData // inside data, after a record
	jsDone
)

func newJSONBody(r io.Reader) *jsonBody {
	return &jsonBody{r: bufio.NewReaderSize(r, 64<<10)}
}

func (j *jsonBody) byLine() bool { return false }

var errBadEnvelope = decodeErrorf(`the body must be a JSON object {"schema": "<model key>", "data": [<records>]}`)

// readByte returns the next byte, counting it against MaxJSONBody.
func (j *jsonBody) readByte() (byte, error) {
	c, err := j.r.ReadByte()
	if err != nil {
		if err == io.EOF {
			return 0, errBadEnvelope
		}
		return 0, err
	}
	j.off++
	if j.off > MaxJSONBody {
		return 0, errTooBig
	}
	return c, nil
}

// unread puts back the byte just read (a scalar's delimiter).
func (j *jsonBody) unread() error {
	j.off--
	return j.r.UnreadByte()
}

// skipSpace returns the next byte that is not JSON whitespace.
func (j *jsonBody) skipSpace() (byte, error) {
	for {
		c, err := j.readByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c, nil
	}
}

func (j *jsonBody) syntax(what string) error {
	return decodeErrorf("invalid JSON at byte %d: %s", j.off, what)
}

// readString reads a JSON string whose opening quote was consumed and decodes it.
func (j *jsonBody) readString(max int) (string, error) {
	raw := []byte{'"'}
	for {
		c, err := j.readByte()
		if err != nil {
			return "", err
		}
		raw = append(raw, c)
		if len(raw) > max {
			return "", j.syntax("a key or schema name is too long")
		}
		switch c {
		case '\\':
			c, err := j.readByte()
			if err != nil {
				return "", err
			}
			raw = append(raw, c)
		case '"':
			var out string
			if json.Unmarshal(raw, &out) != nil {
				return "", j.syntax("invalid string")
			}
			return out, nil
		}
	}
}

// readValue cuts out one JSON value that starts with c, whose first byte was consumed:
// objects and arrays up to their matching bracket (outside strings), scalars up to the
// next delimiter, which is left unread.
func (j *jsonBody) readValue(c byte) ([]byte, error) {
	j.rec = append(j.rec[:0], c)
	j.open = j.open[:0]
	switch c {
	case '{', '[':
		j.open = append(j.open, c)
	case '"':
		if err := j.cutString(); err != nil {
			return nil, err
		}
	case ',', ']', '}', ':':
		return nil, j.syntax(fmt.Sprintf("unexpected %q where a record should start", c))
	default: // a number, true, false or null: up to the next delimiter
		for {
			c, err := j.readByte()
			if err != nil {
				return nil, err
			}
			switch c {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				return j.rec, j.unread()
			}
			j.rec = append(j.rec, c)
		}
	}
	// Brackets are matched by kind, so a record like {"a":[1} is a syntax error here,
	// where it is, instead of swallowing the records after it.
	for len(j.open) > 0 {
		c, err := j.readByte()
		if err != nil {
			return nil, err
		}
		j.rec = append(j.rec, c)
		switch c {
		case '{', '[':
			if len(j.open) >= maxDepthJSON {
				return nil, j.syntax("records nest too deeply")
			}
			j.open = append(j.open, c)
		case '}', ']':
			want := byte('{')
			if c == ']' {
				want = '['
			}
			if j.open[len(j.open)-1] != want {
				return nil, j.syntax(fmt.Sprintf("%q closes a bracket it does not match", c))
			}
			j.open = j.open[:len(j.open)-1]
		case '"':
			if err := j.cutString(); err != nil {
				return nil, err
			}
		}
	}
	return j.rec, nil
}

// maxDepthJSON mirrors the record validator's nesting limit.
const maxDepthJSON = 64

// cutString copies the rest of a string, whose opening quote is in j.rec, into j.rec.
func (j *jsonBody) cutString() error {
	for {
		c, err := j.readByte()
		if err != nil {
			return err
		}
		j.rec = append(j.rec, c)
		switch c {
		case '\\':
			c, err := j.readByte()
			if err != nil {
				return err
			}
			j.rec = append(j.rec, c)
		case '"':
			return nil
		}
	}
}

func (j *jsonBody) next() (item, error) {
	for {
		if len(j.held) > 0 && (j.schema != "" || j.state == jsDone) {
			it := j.held[0]
			j.held = j.held[1:]
			it.schema = j.schema
			return it, nil
		}
		switch j.state {
		case jsDone:
			return item{}, io.EOF
		case jsStart:
			c, err := j.skipSpace()
			if err != nil {
				return item{}, err
			}
			if c != '{' {
				return item{}, errBadEnvelope
			}
			j.state = jsKey
		case jsKey, jsNextKey:
			c, err := j.skipSpace()
			if err != nil {
				return item{}, err
			}
			if j.state == jsNextKey {
				if c == '}' {
					if err := j.end(); err != nil {
						return item{}, err
					}
					continue
				}
				if c != ',' {
					return item{}, j.syntax(`expected "," or "}" after a value`)
				}
				if c, err = j.skipSpace(); err != nil {
					return item{}, err
				}
			} else if c == '}' {
				if err := j.end(); err != nil {
					return item{}, err
				}
				continue
			}
			if c != '"' {
				return item{}, j.syntax("expected a key")
			}
			key, err := j.readString(1024)
			if err != nil {
				return item{}, err
			}
			if c, err = j.skipSpace(); err != nil {
				return item{}, err
			}
			if c != ':' {
				return item{}, j.syntax(`expected ":" after a key`)
			}
			if c, err = j.skipSpace(); err != nil {
				return item{}, err
			}
			switch key {
			case "schema", "data":
				i := 0
				if key == "data" {
					i = 1
				}
				if j.seen[i] {
					return item{}, decodeErrorf("%q appears twice in the body", key)
				}
				j.seen[i] = true
			}
			switch key {
			case "schema":
				if c != '"' {
					return item{}, decodeErrorf(`"schema" must be a non-empty string`)
				}
				if j.schema, err = j.readString(1024); err != nil {
					return item{}, err
				}
				if j.schema == "" {
					return item{}, decodeErrorf(`"schema" must be a non-empty string`)
				}
				j.state = jsNextKey
			case "data":
				if c != '[' {
					return item{}, decodeErrorf(`"data" must be an array of records`)
				}
				j.state = jsData
			default:
				return item{}, decodeErrorf("unknown field %q in the body: only schema and data", key)
			}
		case jsData, jsNextData:
			c, err := j.skipSpace()
			if err != nil {
				return item{}, err
			}
			if c == ']' {
				j.state = jsNextKey
				continue
			}
			if j.state == jsNextData {
				if c != ',' {
					return item{}, j.syntax(`expected "," or "]" after a record`)
				}
				if c, err = j.skipSpace(); err != nil {
					return item{}, err
				}
			}
			raw, err := j.readValue(c)
			if err != nil {
				return item{}, err
			}
			j.state = jsNextData
			it := item{raw: raw, pos: j.index} // valid until the next call
			j.index++
			if j.schema == "" {
				if len(j.held) >= maxHeld {
					return item{}, decodeErrorf("put \"schema\" before \"data\" (or use ?schema=) to send more than %d records", maxHeld)
				}
				it.raw = append([]byte(nil), raw...)
				j.held = append(j.held, it)
				continue
			}
			it.schema = j.schema
			return it, nil
		}
	}
}

// end checks that nothing but whitespace follows the closing brace.
func (j *jsonBody) end() error {
	for {
		c, err := j.r.ReadByte()
		if err == io.EOF {
			j.state = jsDone
			return nil
		}
		if err != nil {
			return err
		}
		j.off++
		if j.off > MaxJSONBody {
			return errTooBig
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return decodeErrorf("unexpected data after the JSON body")
	}
}

// maxHeld bounds records held while waiting for a schema that comes after the data.
const maxHeld = 100_000

var errTooBig = fmt.Errorf("a JSON body may be at most %d bytes, whitespace included; send NDJSON to stream more", MaxJSONBody)
