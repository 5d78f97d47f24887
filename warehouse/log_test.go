package warehouse

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

// openTestRecords opens a record store under t.TempDir and runs bbolt's check on every
// warehouse file at cleanup, as openTest does for lookout.db.
func openTestRecords(t *testing.T) *RecordStore {
	t.Helper()
	rs, err := OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p, err := rs.Check(); err != nil || len(p) > 0 {
			t.Errorf("warehouse check: %v %v", p, err)
		}
		rs.Close()
	})
	return rs
}

func TestRecordLogScanAndIdempotency(t *testing.T) {
	rs := openTestRecords(t)
	if _, err := rs.Log("../escape"); err == nil {
		t.Fatal("accepted a path as a warehouse id")
	}
	l, err := rs.Log("wh_1")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	// 10 batches of 1,000 one second apart, so Scan crosses pages and time bounds.
	for b := 0; b < 10; b++ {
		recs := make([][]byte, 1000)
		for i := range recs {
			recs[i] = []byte(fmt.Sprintf(`{"n":%d}`, b*1000+i))
		}
		if err := l.Append([]*AppendBatch{{ModelID: "mdl_a", ReceivedAt: t0.Add(time.Duration(b) * time.Second), Records: recs}}); err != nil {
			t.Fatal(err)
		}
	}
	l.Append([]*AppendBatch{{ModelID: "mdl_b", ReceivedAt: t0, Records: [][]byte{[]byte(`{}`)}}})
	count := func(from, to time.Time) (int, bool) {
		n, ordered := 0, true
		var last []byte
		err := l.Scan("mdl_a", from, to, func(k, rec []byte) error {
			if last != nil && string(k) <= string(last) {
				ordered = false
			}
			last = append(last[:0], k...)
			if RecordTime(k).Before(t0) {
				ordered = false
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, ordered
	}
	for _, tc := range []struct {
		from, to time.Time
		want     int
	}{
		{time.Time{}, time.Time{}, 10000},
		{t0.Add(3 * time.Second), time.Time{}, 7000},
		{time.Time{}, t0.Add(2 * time.Second), 2000},
		{t0.Add(2 * time.Second), t0.Add(5 * time.Second), 3000},
		{t0.Add(time.Hour), time.Time{}, 0},
	} {
		if n, ordered := count(tc.from, tc.to); n != tc.want || !ordered {
			t.Errorf("Scan(%v, %v) = %d ordered=%v, want %d", tc.from, tc.to, n, ordered, tc.want)
		}
	}
	if n, _ := l.Count("mdl_a"); n != 10000 {
		t.Fatalf("Count = %d", n)
	}
	stop := fmt.Errorf("stop")
	seen := 0
	if err := l.Scan("mdl_a", time.Time{}, time.Time{}, func(k, v []byte) error {
		seen++
		if seen == 5 {
			return stop
		}
		return nil
	}); err != stop || seen != 5 {
		t.Fatalf("early stop: %v after %d", err, seen)
	}
	if err := l.Scan("mdl_none", time.Time{}, time.Time{}, func(k, v []byte) error { return fmt.Errorf("called") }); err != nil {
		t.Fatal(err)
	}
	var k [RecordKeySize]byte
	putKey(k[:], uint64(t0.UnixMicro()), 9)
	if !RecordTime(k[:]).Equal(t0) || binary.BigEndian.Uint64(k[8:]) != 9 {
		t.Fatal("key encoding")
	}

	// Idempotency: the second batch with a key is a duplicate until the TTL passes.
	key := []byte("ic_1\x00k")
	b1 := &AppendBatch{ModelID: "mdl_c", ReceivedAt: t0, Records: [][]byte{[]byte(`{"a":1}`)}, IdemKey: key, IdemResponse: []byte(`{"first":true}`)}
	b2 := &AppendBatch{ModelID: "mdl_c", ReceivedAt: t0.Add(time.Hour), Records: [][]byte{[]byte(`{"a":2}`)}, IdemKey: key, IdemResponse: []byte(`{"second":true}`)}
	if err := l.Append([]*AppendBatch{b1, b2}); err != nil {
		t.Fatal(err)
	}
	if b1.Duplicate != nil || string(b2.Duplicate) != `{"first":true}` {
		t.Fatalf("duplicates: %s / %s", b1.Duplicate, b2.Duplicate)
	}
	if n, _ := l.Count("mdl_c"); n != 1 {
		t.Fatalf("idempotent batch stored %d records", n)
	}
	if got, _ := l.Idempotent(key, t0.Add(23*time.Hour)); string(got) != `{"first":true}` {
		t.Fatalf("Idempotent = %s", got)
	}
	if got, _ := l.Idempotent(key, t0.Add(25*time.Hour)); got != nil {
		t.Fatal("expired key still answers")
	}
	if n, err := l.PruneIdempotency(t0.Add(25*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	if p := l.Check(); len(p) > 0 {
		t.Fatal(p)
	}
}
