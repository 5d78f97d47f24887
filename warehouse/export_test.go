package warehouse

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"lookout/store"
)

// TestExportRoundTrip writes a model's records, sealed and unsealed, with every field
// type, nulls and missing fields, exports them as NDJSON and as Parquet, and reads both
// back (Parquet with the same library): the same records, values and types, in receive
// order; a time range keeps only its records.
func TestExportRoundTrip(t *testing.T) {
	rs, err := OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	l, err := rs.Log("wh_export")
	if err != nil {
		t.Fatal(err)
	}
	m := testModel(store.UnknownReject)
	m.ID = "mdl_export"
	v := NewValidator(m)
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	raws := []string{
		`{"id":"a","n":1,"x":1.5,"ok":true,"at":"2026-11-20T01:02:03.456789Z","o":{"k":[1,"x"]},"a":[1,2]}`,
		`{"id":"b \"q\" é","n":-7,"x":-0.25,"ok":false,"at":1763600000000}`,
		`{"id":"c","n":null,"x":null}`,
		`{"id":"d","a":[],"o":{}}`,
	}
	add := func(at time.Time, from, n int) {
		var recs [][]byte
		for i := from; i < from+n; i++ {
			out, errs := v.Validate([]byte(raws[i%len(raws)]), nil)
			if errs != nil {
				t.Fatal(errs)
			}
			recs = append(recs, out)
		}
		if err := l.Append([]*AppendBatch{{ModelID: m.ID, ReceivedAt: at, Records: recs, ClientID: "ic_x", IngestID: fmt.Sprint("ing_", from)}}); err != nil {
			t.Fatal(err)
		}
	}
	add(t0, 0, 8)
	if n, err := l.Seal(m, t0.Add(time.Hour), DefaultSealPolicy); n != 8 || err != nil {
		t.Fatalf("seal: %d %v", n, err)
	}
	add(t0.Add(2*time.Hour), 8, 4) // stays in the log

	// What each record must read back as: its fields as given (timestamps in UTC) and the
	// system fields.
	want := func(i int, at time.Time) map[string]any {
		var r map[string]any
		_ = json.Unmarshal([]byte(raws[i%len(raws)]), &r)
		for k, val := range r {
			if val == nil {
				delete(r, k)
			}
		}
		switch i % len(raws) {
		case 0:
			r["at"] = "2026-11-20T01:02:03.456789Z"
		case 1:
			r["at"] = "2025-11-20T00:53:20Z"
		}
		r["_received_at"] = at.Format(time.RFC3339Nano)
		r["_client_id"] = "ic_x"
		r["_ingest_id"] = fmt.Sprint("ing_", i/8*8)
		return r
	}
	var wants []map[string]any
	for i := range 12 {
		at := t0
		if i >= 8 {
			at = t0.Add(2 * time.Hour)
		}
		wants = append(wants, want(i, at))
	}

	var nd bytes.Buffer
	n, err := l.Export(context.Background(), m, ExportRange{}, FormatNDJSON, &nd)
	if err != nil || n != 12 {
		t.Fatalf("ndjson export: %d %v", n, err)
	}
	sc := bufio.NewScanner(&nd)
	i := 0
	for sc.Scan() {
		var got map[string]any
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("line %d %q: %v", i, sc.Bytes(), err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(wants[i])
		if !bytes.Equal(a, b) {
			t.Errorf("record %d:\n got %s\nwant %s", i, a, b)
		}
		i++
	}
	if i != 12 {
		t.Fatalf("%d lines", i)
	}

	var pq bytes.Buffer
	if n, err := l.Export(context.Background(), m, ExportRange{}, FormatParquet, &pq); err != nil || n != 12 {
		t.Fatalf("parquet export: %d %v", n, err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(pq.Bytes()), int64(pq.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if g := len(f.RowGroups()); g != 2 {
		t.Errorf("%d row groups, want one per part (a block and the log)", g)
	}
	cols := map[string]int{}
	for ci, c := range f.Schema().Fields() {
		cols[c.Name()] = ci
	}
	r := parquet.NewReader(bytes.NewReader(pq.Bytes()))
	rows := make([]parquet.Row, 20)
	got, err := r.ReadRows(rows)
	if got != 12 {
		t.Fatalf("read %d rows: %v", got, err)
	}
	for i, row := range rows[:got] {
		vals := map[string]parquet.Value{}
		for _, val := range row {
			vals[f.Schema().Fields()[val.Column()].Name()] = val
		}
		w := wants[i]
		check := func(name string, ok bool, show any) {
			if !ok {
				t.Errorf("record %d, %s: parquet %v, want %v", i, name, show, w[name])
			}
		}
		for name, val := range vals {
			wv, present := w[name]
			if val.IsNull() != !present {
				t.Errorf("record %d, %s: null=%v, present in the record=%v", i, name, val.IsNull(), present)
				continue
			}
			if val.IsNull() {
				continue
			}
			switch name {
			case "id", "_client_id", "_ingest_id":
				check(name, val.String() == wv, val.String())
			case "n":
				check(name, float64(val.Int64()) == wv, val.Int64())
			case "x":
				check(name, val.Double() == wv, val.Double())
			case "ok":
				check(name, val.Boolean() == wv, val.Boolean())
			case "at", "_received_at":
				ts, _ := time.Parse(time.RFC3339Nano, wv.(string))
				check(name, val.Int64() == ts.UnixMicro(), val.Int64())
			case "o", "a":
				b, _ := json.Marshal(wv)
				check(name, val.String() == string(b), val.String())
			}
		}
		if len(vals) != len(cols) {
			t.Errorf("record %d has %d columns, the schema %d", i, len(vals), len(cols))
		}
	}

	// A range keeps only its records: the unsealed four.
	var part bytes.Buffer
	if n, err := l.Export(context.Background(), m, ExportRange{From: t0.Add(time.Hour)}, FormatNDJSON, &part); err != nil || n != 4 || bytes.Count(part.Bytes(), []byte("\n")) != 4 {
		t.Fatalf("ranged export: %d %v %q", n, err, part.String())
	}
	if _, err := l.Export(context.Background(), m, ExportRange{}, "csv", &part); err == nil {
		t.Fatal("an unknown format was taken")
	}
}
