package warehouse

import (
	"fmt"
	"lookout/store"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// benchRecord is a ~300-byte stored record of the benchmark's 10-field model.
func benchRecord(i int) []byte {
	return []byte(fmt.Sprintf(`{"event_id":"evt-%08d-xxxxxxxxxxxxxxxxxxxx","user_id":"user-%06d","session":"sess-%012d","kind":"page_view","country":"NL","path":"/shop/category/%03d/product/%05d?ref=newsletter&utm=autumn-sale","amount":%d.%02d,"items":%d,"logged_in":true,"at":"2026-11-21T12:00:00.000Z","_received_at":"2026-11-21T12:00:00.000000Z","_client_id":"ic_01M7Z5A0597C36QRZ276CCF42C","_ingest_id":"ing_01M7Z5A0597C36QRZ276CCF42C"}`,
		i, i%5000, i*7919, i%200, i%10000, i%500, i%100, i%9))
}

// BenchmarkRawBoltAppend is the raw limit the ingest path is compared with: the same
// records appended to bbolt in 1,000-record transactions, each with its fsync, nothing else.
func BenchmarkRawBoltAppend(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType, NoFreelistSync: true, InitialMmapSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	recs := make([][]byte, 1000)
	size := 0
	for i := range recs {
		recs[i] = benchRecord(i)
		size += len(recs[i])
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for n := 0; n < b.N; n++ {
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("log/m"))
			if err != nil {
				return err
			}
			bk.FillPercent = 1.0
			for _, r := range recs {
				seq, _ := bk.NextSequence()
				var k [16]byte
				putKey(k[:], uint64(time.Now().UnixMicro()), seq)
				if err := bk.Put(k[:], r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(recs))/time.Since(start).Seconds(), "records/s")
}

// BenchmarkRecordLogAppend is the same through RecordLog.Append (one batch per commit).
func BenchmarkRecordLogAppend(b *testing.B) {
	rs, err := OpenRecordStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	l, _ := rs.Log("wh_bench")
	recs := make([][]byte, 1000)
	for i := range recs {
		recs[i] = benchRecord(i)
	}
	b.ResetTimer()
	start := time.Now()
	for n := 0; n < b.N; n++ {
		if err := l.Append([]*AppendBatch{{ModelID: "m", ReceivedAt: time.Now(), Records: recs}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(recs))/time.Since(start).Seconds(), "records/s")
}

// BenchmarkValidateRecord is the per-record cost of the one-pass validator.
func BenchmarkValidateRecord(b *testing.B) {
	m := &store.Model{Key: "events", UnknownFields: store.UnknownReject}
	for _, f := range []struct{ n, t string }{{"event_id", store.TypeString}, {"user_id", store.TypeString}, {"session", store.TypeString}, {"kind", store.TypeString},
		{"country", store.TypeString}, {"path", store.TypeString}, {"amount", store.TypeNumber}, {"items", store.TypeInteger}, {"logged_in", store.TypeBoolean}, {"at", store.TypeTimestamp}} {
		m.Fields = append(m.Fields, store.Field{Name: f.n, Type: f.t})
	}
	v := NewValidator(m)
	raw := []byte(`{"event_id":"evt-00000001-xxxxxxxxxxxxxxxxxxxx","user_id":"user-000001","session":"sess-000000007919","kind":"page_view","country":"NL","path":"/shop/category/001/product/00001?ref=newsletter&utm=autumn-sale","amount":1.01,"items":1,"logged_in":true,"at":"2026-11-21T12:00:00.000Z"}`)
	dst := make([]byte, 0, 1<<20)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for n := 0; n < b.N; n++ {
		out, errs := v.Validate(raw, dst[:0])
		if len(errs) > 0 || len(out) == 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkWarehouseOpen measures how long opening a warehouse file takes as it grows,
// with the freelist synced (what Lookout does) and not synced (what it did: bbolt then
// walks every page at open to rebuild the freelist). LOOKOUT_BENCH_OPEN_MB sets the file
// size (default 512).
//
//	LOOKOUT_BENCH_OPEN_MB=2048 go test -run - -bench WarehouseOpen -benchtime 5x ./store
func BenchmarkWarehouseOpen(b *testing.B) {
	mb := 512
	if v := os.Getenv("LOOKOUT_BENCH_OPEN_MB"); v != "" {
		fmt.Sscan(v, &mb)
	}
	for _, synced := range []bool{true, false} {
		name := "freelist-synced"
		if !synced {
			name = "freelist-not-synced"
		}
		b.Run(fmt.Sprintf("%s/%dMB", name, mb), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "wh.db")
			opts := warehouseOptions()
			opts.NoFreelistSync = !synced
			db, err := bolt.Open(path, 0o600, opts)
			if err != nil {
				b.Fatal(err)
			}
			recs := make([][]byte, 10_000)
			for i := range recs {
				recs[i] = benchRecord(i)
			}
			l := &RecordLog{db: db}
			for i := int64(0); ; i++ {
				if fi, _ := os.Stat(path); fi != nil && fi.Size() >= int64(mb)<<20 {
					break
				}
				if err := l.Append([]*AppendBatch{{ModelID: "m", ReceivedAt: time.Unix(i, 0), Records: recs}}); err != nil {
					b.Fatal(err)
				}
			}
			db.Close()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				db, err := bolt.Open(path, 0o600, opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				db.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSustainedAppend appends 3 passes of LOOKOUT_BENCH_PASS records (default
// 1,000,000) in 1,000-record commits to one warehouse file and reports each pass's rate,
// to see whether the rate holds as the file grows.
//
//	go test -run - -bench SustainedAppend -benchtime 1x ./store
func BenchmarkSustainedAppend(b *testing.B) {
	per := 1_000_000
	if v := os.Getenv("LOOKOUT_BENCH_PASS"); v != "" {
		fmt.Sscan(v, &per)
	}
	for _, synced := range []bool{true, false} {
		b.Run(fmt.Sprintf("freelist-synced=%v", synced), func(b *testing.B) {
			for n := 0; n < b.N; n++ {
				opts := warehouseOptions()
				opts.NoFreelistSync = !synced
				db, err := bolt.Open(filepath.Join(b.TempDir(), "wh.db"), 0o600, opts)
				if err != nil {
					b.Fatal(err)
				}
				l := &RecordLog{db: db}
				recs := make([][]byte, 1000)
				for i := range recs {
					recs[i] = benchRecord(i)
				}
				at := time.Now()
				for pass := 1; pass <= 3; pass++ {
					start := time.Now()
					for i := 0; i < per/len(recs); i++ {
						at = at.Add(time.Millisecond)
						if err := l.Append([]*AppendBatch{{ModelID: "m", ReceivedAt: at, Records: recs}}); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(per)/time.Since(start).Seconds(), fmt.Sprintf("pass%d-records/s", pass))
				}
				db.Close()
			}
		})
	}
}

// BenchmarkSeal seals blocks of records shaped like ../shared/bench's data set: the
// sealer's cost per record, which ingest pays in CPU while it runs.
func BenchmarkSeal(b *testing.B) {
	m := &store.Model{Meta: store.Meta{ID: "mdl_b"}, Key: "events", UnknownFields: store.UnknownReject, TimestampField: "ts",
		Fields: []store.Field{{Name: "ts", Type: store.TypeTimestamp}, {Name: "event", Type: store.TypeString}, {Name: "user_id", Type: store.TypeString},
			{Name: "session_id", Type: store.TypeString}, {Name: "country", Type: store.TypeString}, {Name: "device", Type: store.TypeString},
			{Name: "url", Type: store.TypeString}, {Name: "duration_ms", Type: store.TypeInteger}, {Name: "amount", Type: store.TypeNumber},
			{Name: "success", Type: store.TypeBoolean}}}
	rs, err := OpenRecordStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	l, err := rs.Log("wh_b")
	if err != nil {
		b.Fatal(err)
	}
	v := NewValidator(m)
	at := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	fill := func(n int) { // in chunks of 1,024, so whole entries fill a block exactly
		for start := 0; start < n; start += 1024 {
			var recs [][]byte
			for i := start; i < start+1024; i++ {
				raw := fmt.Sprintf(`{"ts":"2026-11-20T%02d:%02d:%02d.%03dZ","event":"e%d","user_id":"user-%d","session_id":"%08x-%04x-%04x-%04x-%012x","country":"C%d","device":"d%d","url":"https://shop.example/s%d/c%d/p%d?src=x%d&campaign=y%d","duration_ms":%d,"amount":%d.%02d,"success":%t}`,
					i/3600%24, i/60%60, i%60, i%1000, i%8, 100000+i*7919%900000, i*2654435761, i%65536, i*7%65536, i*13%65536, i*40503, i%30, i%3, i%8, i%10, i*31%100000, i%6, i%6, i*17%3000, i%500, i%100, i%3 == 0)
				out, errs := v.Validate([]byte(raw), nil)
				if len(errs) > 0 {
					b.Fatal(errs)
				}
				recs = append(recs, out)
			}
			if err := l.Append([]*AppendBatch{{ModelID: m.ID, ReceivedAt: at, Records: recs, ClientID: "ic_1", IngestID: fmt.Sprintf("ing_%d", start)}}); err != nil {
				b.Fatal(err)
			}
			at = at.Add(time.Millisecond)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		fill(BlockRows)
		b.StartTimer()
		if n, err := l.Seal(m, at.Add(time.Hour), SealPolicy{MinAge: time.Second}); err != nil || n != BlockRows {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*BlockRows), "ns/record")
}

// BenchmarkBuilderAdd is the sealer's parse of stored records into columns.
func BenchmarkBuilderAdd(b *testing.B) {
	m := &store.Model{Fields: []store.Field{{Name: "ts", Type: store.TypeTimestamp}, {Name: "event", Type: store.TypeString}, {Name: "user_id", Type: store.TypeString},
		{Name: "session_id", Type: store.TypeString}, {Name: "country", Type: store.TypeString}, {Name: "device", Type: store.TypeString},
		{Name: "url", Type: store.TypeString}, {Name: "duration_ms", Type: store.TypeInteger}, {Name: "amount", Type: store.TypeNumber},
		{Name: "success", Type: store.TypeBoolean}}, UnknownFields: store.UnknownReject}
	v := NewValidator(m)
	var recs [][]byte
	for i := 0; i < 1000; i++ {
		raw := fmt.Sprintf(`{"ts":"2026-11-20T%02d:%02d:%02d.%03dZ","event":"e%d","user_id":"user-%d","session_id":"%08x-%04x-%04x-%04x-%012x","country":"C%d","device":"d%d","url":"https://shop.example/s%d/c%d/p%d?src=x%d&campaign=y%d","duration_ms":%d,"amount":%d.%02d,"success":%t}`,
			i/3600%24, i/60%60, i%60, i%1000, i%8, 100000+i*7919%900000, i*2654435761, i%65536, i*7%65536, i*13%65536, i*40503, i%30, i%3, i%8, i%10, i*31%100000, i%6, i%6, i*17%3000, i%500, i%100, i%3 == 0)
		out, _ := v.Validate([]byte(raw), nil)
		recs = append(recs, out)
	}
	fields := Schema(m)
	b.SetBytes(int64(len(recs[0])))
	bl := newBuilder(fields, BlockRows)
	for b.Loop() {
		if bl.n == BlockRows {
			bl.release()
			bl = newBuilder(fields, BlockRows)
		}
		bl.add(recs[bl.n%1000], false)
	}
}
