package warehouse

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"

	"lookout/store"
)

// Export formats.
const (
	FormatNDJSON  = "ndjson"
	FormatParquet = "parquet"
)

// ExportRange bounds an export by record time (the model's timestamp_field, else
// _received_at), [From, To); a zero end is open.
type ExportRange struct{ From, To time.Time }

func (r ExportRange) holds(us int64) bool {
	return (r.From.IsZero() || us >= r.From.UnixMicro()) && (r.To.IsZero() || us < r.To.UnixMicro())
}

func (r ExportRange) overlaps(tmin, tmax int64) bool {
	return (r.From.IsZero() || tmax >= r.From.UnixMicro()) && (r.To.IsZero() || tmin < r.To.UnixMicro())
}

// Export writes a model's records in the range to w, sealed blocks then the log (receive
// order), with the model's fields and the system fields: as NDJSON (one object per line,
// nulls left out, timestamps in RFC 3339 UTC) or as Parquet (typed, nullable columns,
// dictionary-encoded strings, zstd, one row group per block), which DuckDB, Spark or
// ClickHouse read directly. Everything comes from one read transaction: a consistent
// snapshot. It returns how many records it wrote.
func (l *RecordLog) Export(ctx context.Context, m *store.Model, r ExportRange, format string, w io.Writer) (int, error) {
	fields := Schema(m)
	var out exporter
	switch format {
	case FormatNDJSON:
		out = &ndjsonExporter{w: w, fields: fields}
	case FormatParquet:
		out = newParquetExporter(w, fields)
	default:
		return 0, fmt.Errorf("unknown export format %q", format)
	}
	n := 0
	err := l.ReadParts(ctx, m, func(p *Part) error {
		if p.Meta.Sealed && !r.overlaps(p.Meta.TMin, p.Meta.TMax) {
			return nil
		}
		times, err := p.RecordTimes()
		if err != nil {
			return err
		}
		cols := make([]*Column, len(fields))
		for i, f := range fields {
			if cols[i], err = p.Column(f.Name, f.Type); err != nil {
				return err
			}
		}
		var rows []int
		for i := 0; i < p.Meta.Rows; i++ {
			if r.holds(times[i]) {
				rows = append(rows, i)
			}
		}
		if len(rows) == 0 {
			return nil
		}
		n += len(rows)
		return out.part(cols, rows)
	})
	if err == nil {
		err = out.close()
	}
	return n, err
}

// ExportFile returns an unlinked temporary file in the data dir (the disk the data is on,
// not a /tmp that may be small or in memory) for an export to be written to before it is
// sent.
func (rs *RecordStore) ExportFile() (*os.File, error) {
	f, err := os.CreateTemp(filepath.Dir(rs.dir), ".export-")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ExportEmpty writes what Export writes for a model without records: nothing as NDJSON, a
// Parquet file with the model's columns and no rows.
func ExportEmpty(m *store.Model, format string, w io.Writer) (int, error) {
	switch format {
	case FormatNDJSON:
		return 0, nil
	case FormatParquet:
		return 0, newParquetExporter(w, Schema(m)).close()
	}
	return 0, fmt.Errorf("unknown export format %q", format)
}

type exporter interface {
	part(cols []*Column, rows []int) error
	close() error
}

// ndjsonExporter writes one JSON object per record.
type ndjsonExporter struct {
	w      io.Writer
	fields []store.Field
	buf    []byte
}

func (e *ndjsonExporter) part(cols []*Column, rows []int) error {
	for _, i := range rows {
		b := append(e.buf[:0], '{')
		first := true
		for ci, c := range cols {
			if c.Null(i) {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = AppendJSONString(b, e.fields[ci].Name)
			b = append(b, ':')
			b = appendValue(b, c, i)
		}
		b = append(b, '}', '\n')
		e.buf = b
		if _, err := e.w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func (e *ndjsonExporter) close() error { return nil }

// appendValue appends row i of a column as JSON.
func appendValue(b []byte, c *Column, i int) []byte {
	switch c.Type {
	case store.TypeString:
		return AppendJSONString(b, c.Str(i))
	case store.TypeObject, store.TypeArray:
		return append(b, c.Str(i)...)
	case store.TypeInteger:
		return strconv.AppendInt(b, c.Ints[i], 10)
	case store.TypeNumber:
		return strconv.AppendFloat(b, c.Floats[i], 'g', -1, 64)
	case store.TypeBoolean:
		return strconv.AppendBool(b, c.Ints[i] != 0)
	case store.TypeTimestamp:
		b = append(b, '"')
		b = time.UnixMicro(c.Ints[i]).UTC().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"')
	}
	return append(b, "null"...)
}

// AppendJSONString appends s as a JSON string, without the HTML escapes encoding/json adds
// by default (a stored value reads back as it was sent).
func AppendJSONString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// parquetExporter writes typed columns, one row group per part.
type parquetExporter struct {
	w      *parquet.Writer
	schema *parquet.Schema
	order  []int // schema leaf index -> field index
	rb     *parquet.RowBuilder
	rows   []parquet.Row
}

// parquetNode is a field's Parquet column: nullable, of the field's type.
func parquetNode(typ string) parquet.Node {
	var n parquet.Node
	switch typ {
	case store.TypeString:
		n = parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
	case store.TypeInteger:
		n = parquet.Int(64)
	case store.TypeNumber:
		n = parquet.Leaf(parquet.DoubleType)
	case store.TypeBoolean:
		n = parquet.Leaf(parquet.BooleanType)
	case store.TypeTimestamp:
		n = parquet.Timestamp(parquet.Microsecond)
	default: // object, array: their JSON
		n = parquet.JSON()
	}
	return parquet.Optional(n)
}

func newParquetExporter(w io.Writer, fields []store.Field) *parquetExporter {
	g := parquet.Group{}
	for _, f := range fields {
		g[f.Name] = parquetNode(f.Type)
	}
	schema := parquet.NewSchema("lookout", g)
	e := &parquetExporter{schema: schema, rb: parquet.NewRowBuilder(schema)}
	byName := map[string]int{}
	for i, f := range fields {
		byName[f.Name] = i
	}
	for _, f := range schema.Fields() { // a Group's fields come sorted by name
		e.order = append(e.order, byName[f.Name()])
	}
	e.w = parquet.NewWriter(w, schema, parquet.Compression(&parquet.Zstd))
	return e
}

func (e *parquetExporter) part(cols []*Column, rows []int) error {
	e.rows = e.rows[:0]
	for _, i := range rows {
		e.rb.Reset()
		for leaf, fi := range e.order {
			c := cols[fi]
			if c.Null(i) {
				continue
			}
			var v parquet.Value
			switch c.Type {
			case store.TypeString, store.TypeObject, store.TypeArray:
				v = parquet.ByteArrayValue([]byte(c.Str(i)))
			case store.TypeInteger, store.TypeTimestamp:
				v = parquet.Int64Value(c.Ints[i])
			case store.TypeNumber:
				v = parquet.DoubleValue(c.Floats[i])
			case store.TypeBoolean:
				v = parquet.BooleanValue(c.Ints[i] != 0)
			}
			e.rb.Add(leaf, v)
		}
		e.rows = append(e.rows, e.rb.Row())
	}
	if _, err := e.w.WriteRows(e.rows); err != nil {
		return err
	}
	return e.w.Flush() // one row group per block
}

func (e *parquetExporter) close() error { return e.w.Close() }
