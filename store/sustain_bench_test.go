package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

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
