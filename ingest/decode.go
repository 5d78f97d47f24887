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

// jsonBody reads {"schema": "…", "data": [ … ]}. Records stream when schema comes first or
// is given in the query; otherwise they are held until schema is seen.
type jsonBody struct {
	dec     *json.Decoder
	schema  string
	index   int
	inData  bool
	held    []item
	done    bool
	started bool
}

func newJSONBody(r io.Reader) *jsonBody {
	dec := json.NewDecoder(io.LimitReader(r, MaxJSONBody+1))
	return &jsonBody{dec: dec}
}

func (j *jsonBody) byLine() bool { return false }

var errBadEnvelope = errors.New(`the body must be a JSON object {"schema": "<model key>", "data": [<records>]}`)

func (j *jsonBody) next() (item, error) {
	for {
		if len(j.held) > 0 && (j.schema != "" || j.done) {
			it := j.held[0]
			j.held = j.held[1:]
			it.schema = j.schema
			return it, nil
		}
		if j.done {
			return item{}, io.EOF
		}
		if !j.started {
			j.started = true
			if t, err := j.dec.Token(); err != nil || t != json.Delim('{') {
				return item{}, j.fail(err)
			}
		}
		if j.inData {
			if j.dec.More() {
				var raw json.RawMessage
				if err := j.dec.Decode(&raw); err != nil {
					return item{}, j.fail(err)
				}
				it := item{raw: raw, pos: j.index}
				j.index++
				if j.schema == "" {
					if len(j.held) >= maxHeld {
						return item{}, fmt.Errorf("put \"schema\" before \"data\" (or use ?schema=) to send more than %d records", maxHeld)
					}
					j.held = append(j.held, it)
					continue
				}
				it.schema = j.schema
				return it, nil
			}
			if _, err := j.dec.Token(); err != nil { // ]
				return item{}, j.fail(err)
			}
			j.inData = false
			continue
		}
		if !j.dec.More() {
			if _, err := j.dec.Token(); err != nil { // }
				return item{}, j.fail(err)
			}
			if _, err := j.dec.Token(); err != io.EOF {
				return item{}, errors.New("unexpected data after the JSON body")
			}
			j.done = true
			continue
		}
		t, err := j.dec.Token()
		if err != nil {
			return item{}, j.fail(err)
		}
		switch t {
		case "schema":
			if err := j.dec.Decode(&j.schema); err != nil || j.schema == "" {
				return item{}, errors.New(`"schema" must be a non-empty string`)
			}
		case "data":
			if t, err := j.dec.Token(); err != nil || t != json.Delim('[') {
				return item{}, errors.New(`"data" must be an array of records`)
			}
			j.inData = true
		default:
			return item{}, fmt.Errorf("unknown field %v in the body: only schema and data", t)
		}
	}
}

// maxHeld bounds records held while waiting for a schema that comes after the data.
const maxHeld = 100_000

func (j *jsonBody) fail(err error) error {
	if err != nil && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) && j.dec.InputOffset() > MaxJSONBody {
		return errTooBig
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("invalid JSON at byte %d: %s", syn.Offset, syn.Error())
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	return errBadEnvelope
}

var errTooBig = fmt.Errorf("a JSON body may be at most %d bytes; send NDJSON to stream more", MaxJSONBody)
