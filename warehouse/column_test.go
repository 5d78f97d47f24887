package warehouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	"time"

	"lookout/store"
)

func nullsOf(n int, rows ...int) []uint64 {
	b := make([]uint64, (n+63)/64)
	for _, r := range rows {
		b[r>>6] |= 1 << (uint(r) & 63)
	}
	return b
}

// TestColumnRoundTrip: every encoding decodes to the column it was made from.
func TestColumnRoundTrip(t *testing.T) {
	many := make([]string, 1000)
	for i := range many {
		many[i] = fmt.Sprintf("id-%06d-%x", i*7919, i)
	}
	ramp := make([]int64, 3000)
	for i := range ramp {
		ramp[i] = 1_763_596_800_000_000 + int64(i)*86_400
	}
	prices := make([]float64, 500)
	for i := range prices {
		prices[i] = float64(i*37%50000+99) / 100
	}
	for _, tc := range []struct {
		name string
		col  *Column
	}{
		{"dictionary", &Column{Type: store.TypeString, N: 6, Dict: []string{"DE", "NL", "US"}, Codes: []uint32{2, 0, 1, 1, 2, 0}}},
		{"dictionary with nulls", &Column{Type: store.TypeString, N: 4, Dict: []string{"", "x"}, Codes: []uint32{1, 0, 1, 0}, Nulls: nullsOf(4, 1, 3)}},
		{"plain", &Column{Type: store.TypeString, N: len(many), Strs: many}},
		{"uuids", &Column{Type: store.TypeString, N: 3, Strs: []string{"0f8e2a1c-9b3d-4e5f-a6b7-c8d9e0f1a2b3", "", "ffffffff-0000-4000-8000-000000000001"}, Nulls: nullsOf(3, 1)}},
		{"almost uuids (upper case)", &Column{Type: store.TypeString, N: 2, Strs: []string{"0f8e2a1c-9b3d-4e5f-a6b7-c8d9e0f1a2b3", "0F8E2A1C-9B3D-4E5F-A6B7-C8D9E0F1A2B3"}}},
		{"almost uuids (last digit)", &Column{Type: store.TypeString, N: 2, Strs: []string{"0f8e2a1c-9b3d-4e5f-a6b7-c8d9e0f1a2b3", "0f8e2a1c-9b3d-4e5f-a6b7-c8d9e0f1a2bg"}}},
		{"almost uuids (a dash moved)", &Column{Type: store.TypeString, N: 2, Strs: []string{"0f8e2a1c-9b3d-4e5f-a6b7-c8d9e0f1a2b3", "0f8e2a1c9-b3d-4e5f-a6b7-c8d9e0f1a2b3"}}},
		{"uuids after a null", &Column{Type: store.TypeString, N: 2, Strs: []string{"", "00000000-0000-0000-0000-000000000000"}, Nulls: nullsOf(2, 0)}},
		{"integers", &Column{Type: store.TypeInteger, N: 5, Ints: []int64{-3, 0, 7, math.MaxInt64, math.MinInt64}}},
		{"constant", &Column{Type: store.TypeInteger, N: 3, Ints: []int64{42, 42, 42}}},
		{"rising timestamps", &Column{Type: store.TypeTimestamp, N: len(ramp), Ints: ramp}},
		{"booleans", &Column{Type: store.TypeBoolean, N: 4, Ints: []int64{1, 0, 0, 1}, Nulls: nullsOf(4, 2)}},
		{"decimal numbers", &Column{Type: store.TypeNumber, N: len(prices), Floats: prices}},
		{"raw numbers", &Column{Type: store.TypeNumber, N: 4, Floats: []float64{math.Pi, -1e300, 5e-324, 0}}},
		{"negative zero", &Column{Type: store.TypeNumber, N: 2, Floats: []float64{math.Copysign(0, -1), 1}}},
		{"objects", &Column{Type: store.TypeObject, N: 3, Strs: []string{`{"a":1}`, "", `{}`}, Nulls: nullsOf(3, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.col.Name = "c"
			got, err := decodeColumn("c", tc.col.Type, tc.col.N, tc.col.encode())
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.col.N; i++ {
				if got.Null(i) != tc.col.Null(i) {
					t.Fatalf("row %d: null %v, want %v", i, got.Null(i), tc.col.Null(i))
				}
				if tc.col.Null(i) {
					continue
				}
				var a, b any
				switch {
				case tc.col.Codes != nil || tc.col.Strs != nil:
					a, b = got.Str(i), tc.col.Str(i)
				case tc.col.Ints != nil:
					a, b = got.Ints[i], tc.col.Ints[i]
				default:
					a, b = math.Float64bits(got.Floats[i]), math.Float64bits(tc.col.Floats[i])
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("row %d: %v, want %v", i, a, b)
				}
			}
		})
	}
}

// FuzzDecodeColumn: a column's bytes come from disk; whatever they are, decoding returns a
// column or an error, never a panic, and a decoded column has the rows it claims.
func FuzzDecodeColumn(f *testing.F) {
	for _, c := range []*Column{
		{Type: store.TypeString, N: 3, Dict: []string{"a", "b"}, Codes: []uint32{0, 1, 1}},
		{Type: store.TypeInteger, N: 3, Ints: []int64{1, 5, 9}},
		{Type: store.TypeNumber, N: 2, Floats: []float64{1.25, 2}},
		{Type: store.TypeString, N: 2, Strs: []string{"x", "y"}},
	} {
		f.Add(c.Type, c.N, c.encode())
	}
	f.Fuzz(func(t *testing.T, typ string, rows int, b []byte) {
		if rows < 0 || rows > BlockRows {
			return
		}
		c, err := decodeColumn("c", typ, rows, b)
		if err != nil {
			return
		}
		for i := 0; i < rows; i++ {
			_ = c.Null(i)
			switch {
			case c.Codes != nil:
				_ = c.Str(i)
			case c.Strs != nil:
				_ = c.Strs[i]
			case c.Ints != nil:
				_ = c.Ints[i]
			case c.Floats != nil:
				_ = c.Floats[i]
			}
		}
	})
}

var sealModel = &store.Model{Meta: store.Meta{ID: "mdl_seal"}, Key: "m", UnknownFields: store.UnknownReject,
	Fields: []store.Field{{Name: "k", Type: store.TypeString}, {Name: "v", Type: store.TypeInteger}}}

func appendN(t *testing.T, l *RecordLog, at time.Time, from, n int) {
	t.Helper()
	var recs [][]byte
	v := NewValidator(sealModel)
	for i := from; i < from+n; i++ {
		out, errs := v.Validate([]byte(fmt.Sprintf(`{"k":"k%d","v":%d}`, i%5, i)), nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		recs = append(recs, out)
	}
	if err := l.Append([]*AppendBatch{{ModelID: sealModel.ID, ReceivedAt: at, Records: recs, ClientID: "ic_1", IngestID: "ing_1"}}); err != nil {
		t.Fatal(err)
	}
}

// TestSealMergesAndCompacts: young records wait, a trickle grows one block, the log range
// goes with each seal, and compaction keeps every record while giving space back.
func TestSealMergesAndCompacts(t *testing.T) {
	rs, err := OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	l, err := rs.Log("wh_seal")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	appendN(t, l, t0, 0, 10)
	if n, err := l.Seal(sealModel, t0.Add(time.Second), DefaultSealPolicy); n != 0 || err != nil {
		t.Fatalf("young records sealed: %d %v", n, err)
	}
	if n, err := l.Seal(sealModel, t0.Add(3*time.Second), DefaultSealPolicy); n != 10 || err != nil {
		t.Fatalf("seal: %d %v", n, err)
	}
	appendN(t, l, t0.Add(time.Minute), 10, 20)
	if n, err := l.Seal(sealModel, t0.Add(2*time.Minute), DefaultSealPolicy); n != 20 || err != nil {
		t.Fatalf("second seal: %d %v", n, err)
	}
	st, err := l.Stats(sealModel.ID)
	if err != nil || st.Blocks != 1 || st.SealedRecords != 30 || st.LogRecords != 0 {
		t.Fatalf("after a trickle: %+v %v (want one merged block of 30)", st, err)
	}
	// A big log, sealed, leaves most of the file free: compaction gives it back. The log
	// is compressed, so its records carry random hex (which s2 leaves as it is and a
	// block's zstd halves) to make it big.
	rng := rand.New(rand.NewPCG(1, 2))
	v := NewValidator(sealModel)
	for b := 0; b < 40; b++ {
		var recs [][]byte
		for i := 0; i < 5000; i++ {
			raw := fmt.Sprintf(`{"k":"%016x%016x%016x%016x%016x%016x%016x%016x%016x%016x%016x%016x","v":%d}`, rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64(),
				rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64(), i)
			out, errs := v.Validate([]byte(raw), nil)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			recs = append(recs, out)
		}
		if err := l.Append([]*AppendBatch{{ModelID: sealModel.ID, ReceivedAt: t0.Add(time.Hour + time.Duration(b)*time.Millisecond), Records: recs, ClientID: "ic_1", IngestID: "ing_1"}}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		n, err := l.Seal(sealModel, t0.Add(2*time.Hour), DefaultSealPolicy)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	size, free, err := l.FreeBytes()
	if err != nil || free*2 < size || CompactWorth(0, 0) || !CompactWorth(64<<20, 32<<20) {
		t.Fatalf("after sealing 200,000 records: size %d, free %d, %v", size, free, err)
	}
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	after, _, _ := l.FreeBytes()
	st2, err := l.Stats(sealModel.ID)
	if err != nil || st2.Records != 200_030 || after > size-free+16<<20 { // bbolt grows a file 16 MiB at a time
		t.Fatalf("after compaction: %+v %v, %d bytes (was %d with %d free)", st2, err, after, size, free)
	}
	if p := l.Check(); len(p) > 0 {
		t.Fatal(p)
	}
}

// TestSealerYieldsToIngest: while a file takes records, a short backlog waits (ingest
// keeps the cores); once the backlog reaches YieldBacklog the sealer seals anyway, so
// sustained ingest cannot outrun it.
func TestSealerYieldsToIngest(t *testing.T) {
	rs, err := OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	l, err := rs.Log("wh_yield")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	s := &Sealer{Records: rs, Now: func() time.Time { return t0.Add(time.Hour) }, Policy: DefaultSealPolicy, Log: slog.New(slog.DiscardHandler),
		Model: func(string) (*store.Model, error) { return sealModel, nil },
		Yield: time.Hour, YieldBacklog: 100, YieldAge: 2 * time.Hour}
	appendN(t, l, t0, 0, 60)
	s.Pass(context.Background())
	if st, _ := l.Stats(sealModel.ID); st.SealedRecords != 0 || st.LogRecords != 60 {
		t.Fatalf("sealed while ingest was busy with a short backlog: %+v", st)
	}
	appendN(t, l, t0, 60, 60)
	s.Pass(context.Background())
	if st, _ := l.Stats(sealModel.ID); st.SealedRecords != 120 || st.LogRecords != 0 {
		t.Fatalf("a backlog past YieldBacklog was not sealed: %+v", st)
	}
	s.Yield = 0
	appendN(t, l, t0, 120, 5)
	s.Pass(context.Background())
	if st, _ := l.Stats(sealModel.ID); st.SealedRecords != 125 {
		t.Fatalf("without yielding the log is sealed at once: %+v", st)
	}
}

// TestRetentionDropsWholeBlocksAndOldLog: blocks whose every record time is past the
// cutoff go, a block that straddles it stays whole, and log records received before it go.
func TestRetentionDropsWholeBlocksAndOldLog(t *testing.T) {
	rs, err := OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	l, err := rs.Log("wh_ret")
	if err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	noMerge := SealPolicy{MinAge: 0}
	appendN(t, l, t0, 0, 10) // day 0: a block
	l.Seal(sealModel, t0.Add(time.Hour), noMerge)
	appendN(t, l, t0.Add(5*day), 10, 10) // day 5: a block
	l.Seal(sealModel, t0.Add(5*day+time.Hour), noMerge)
	appendN(t, l, t0.Add(6*day), 20, 10) // day 6: still in the log
	appendN(t, l, t0.Add(9*day), 30, 10) // day 9: in the log
	n, err := l.DropBefore(sealModel, t0.Add(7*day), 1000)
	if err != nil || n != 30 {
		t.Fatalf("dropped %d, %v; want the day-0 and day-5 blocks and the day-6 log range (30)", n, err)
	}
	st, _ := l.Stats(sealModel.ID)
	if st.Records != 10 || st.Blocks != 0 || st.LogRecords != 10 {
		t.Fatalf("after retention: %+v", st)
	}
	if n, err := l.DropBefore(sealModel, t0.Add(7*day), 1000); n != 0 || err != nil {
		t.Fatalf("a second pass dropped %d, %v", n, err)
	}
}

// TestSealKeepsARecordThatArrivesInsideItsRange: a stream stamps every chunk with its
// start, so a chunk committed while a block is built can land among the block's keys. The
// seal goes ahead with exactly its records; the newcomer stays in the log and goes into the
// next block (refusing the range instead let a long stream stop all sealing).
func TestSealKeepsARecordThatArrivesInsideItsRange(t *testing.T) {
	rs, err := OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	l, err := rs.Log("wh_stream")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	appendN(t, l, t0, 0, 50)
	appendN(t, l, t0.Add(2*time.Second), 50, 50)
	sealBuilt = func() { appendN(t, l, t0.Add(time.Second), 100, 10) } // between the two
	n, err := l.Seal(sealModel, t0.Add(time.Hour), SealPolicy{MinAge: 0})
	sealBuilt = nil
	if n != 100 || err != nil {
		t.Fatalf("seal with a record arriving inside the range: %d %v, want 100", n, err)
	}
	st, _ := l.Stats(sealModel.ID)
	if st.SealedRecords != 100 || st.LogRecords != 10 {
		t.Fatalf("after the seal: %+v (want 100 sealed, the 10 newcomers in the log)", st)
	}
	if n, err := l.Seal(sealModel, t0.Add(time.Hour), SealPolicy{MinAge: 0}); n != 10 || err != nil {
		t.Fatalf("the next seal: %d %v", n, err)
	}
	st, _ = l.Stats(sealModel.ID)
	if st.Records != 110 || st.LogRecords != 0 {
		t.Fatalf("every record once: %+v", st)
	}
}

// TestStatsCountOutOfOrderBatches: requests commit out of receive order (a stream, a slow
// request), so key order and sequence order differ; the counts stay exact.
func TestStatsCountOutOfOrderBatches(t *testing.T) {
	rs, err := OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	l, err := rs.Log("wh_order")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	appendN(t, l, t0.Add(time.Second), 0, 2)
	appendN(t, l, t0, 2, 4) // received earlier, committed later
	st, err := l.Stats(sealModel.ID)
	n, _, berr := l.Backlog(sealModel.ID, math.MaxInt)
	if err != nil || berr != nil || st.LogRecords != 6 || st.Records != 6 || n != 6 {
		t.Fatalf("6 records: stats %+v, backlog %d (%v %v)", st, n, err, berr)
	}
}

// TestCompactThatFailsLeavesTheFileInUse: a compaction that fails before its copy replaces
// the file changes nothing: the old file stays open, writable and whole.
func TestCompactThatFailsLeavesTheFileInUse(t *testing.T) {
	dir := t.TempDir()
	rs, err := OpenRecordStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	l, err := rs.Log("wh_cfail")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	appendN(t, l, t0, 0, 100)
	renameFile = func(string, string) error { return errors.New("disk said no") }
	err = l.Compact()
	renameFile = os.Rename
	if err == nil {
		t.Fatal("a compaction whose rename failed reported success")
	}
	appendN(t, l, t0.Add(time.Second), 100, 5)
	if st, _ := l.Stats(sealModel.ID); st.Records != 105 {
		t.Fatalf("after a failed compaction: %+v", st)
	}
	if _, err := os.Stat(l.path + compactSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the abandoned copy is left behind: %v", err)
	}
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, t0.Add(2*time.Second), 105, 5)
	if st, _ := l.Stats(sealModel.ID); st.Records != 110 {
		t.Fatalf("after a compaction: %+v", st)
	}
	rs.Close()
	rs2, _ := OpenRecordStore(dir)
	defer rs2.Close()
	l2, err := rs2.Log("wh_cfail")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := l2.Stats(sealModel.ID); st.Records != 110 {
		t.Fatalf("after reopening the compacted file: %+v", st)
	}
}
