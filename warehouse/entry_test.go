package warehouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestEncodeEntries: records come back in order, with their ids, split into entries of at
// most MaxEntryRecords, whatever their sizes.
func TestEncodeEntries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, size int
		entries int
	}{
		{"one", 1, 10, 1},
		{"a chunk", 1000, 300, 1},
		{"exactly full", MaxEntryRecords, 20, 1},
		{"one past full", MaxEntryRecords + 1, 20, 2},
		{"by bytes", 40, 200 << 10, 2},
		{"one record over the byte cap", 1, maxEntryBytes + 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs [][]byte
			for i := 0; i < tc.n; i++ {
				recs = append(recs, []byte(fmt.Sprintf(`{"i":%d,"s":"%s"}`, i, strings.Repeat("x", tc.size))))
			}
			es := EncodeEntries(recs, "ic_1", "ing_2")
			if len(es) != tc.entries {
				t.Fatalf("%d entries, want %d", len(es), tc.entries)
			}
			var d entryReader
			i := 0
			for _, e := range es {
				n, _, err := entryHeader(e.value)
				if err != nil || n != e.Records() {
					t.Fatalf("header: %d %v, want %d", n, err, e.Records())
				}
				if err := d.decode(e.value); err != nil || d.clientID != "ic_1" || d.ingestID != "ing_2" || d.legacy {
					t.Fatalf("decode: %v %q %q", err, d.clientID, d.ingestID)
				}
				for {
					r, err := d.next()
					if err != nil {
						t.Fatal(err)
					}
					if r == nil {
						break
					}
					if !bytes.Equal(r, recs[i]) {
						t.Fatalf("record %d: %.40s, want %.40s", i, r, recs[i])
					}
					i++
				}
			}
			if i != tc.n {
				t.Fatalf("%d records back, want %d", i, tc.n)
			}
		})
	}
}

// TestLegacyRecordsBesideEntries: a file of format 3 holds one record per key with its
// system fields inline. After the upgrade, entries are written beside them, and every
// reader (Scan, Count, Stats, ReadParts, Seal, Check) gives both kinds the same values.
func TestLegacyRecordsBesideEntries(t *testing.T) {
	dir := t.TempDir()
	rs, err := OpenRecordStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := rs.Log("wh_mix")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	// Two records as format 3 wrote them, put under the keys it used.
	err = l.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(logPrefix + sealModel.ID))
		if err != nil {
			return err
		}
		for i := 0; i < 2; i++ {
			seq, _ := b.NextSequence()
			var k [RecordKeySize]byte
			putKey(k[:], uint64(t0.UnixMicro()), seq)
			v := fmt.Sprintf(`{"k":"old","v":%d,"_received_at":"%s","_client_id":"ic_old","_ingest_id":"ing_old"}`, i, FormatTimestampMicro(t0.UnixMicro()))
			if err := b.Put(k[:], []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	v := NewValidator(sealModel)
	var recs [][]byte
	for i := 2; i < 5; i++ {
		out, errs := v.Validate([]byte(fmt.Sprintf(`{"k":"new","v":%d}`, i)), nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		recs = append(recs, out)
	}
	if err := l.Append([]*AppendBatch{{ModelID: sealModel.ID, ReceivedAt: t0.Add(time.Second), Entries: EncodeEntries(recs, "ic_new", "ing_new")}}); err != nil {
		t.Fatal(err)
	}

	var scanned []string
	var keys [][]byte
	if err := l.Scan(sealModel.ID, time.Time{}, time.Time{}, func(k, rec []byte) error {
		scanned = append(scanned, string(rec))
		keys = append(keys, append([]byte(nil), k...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"k":"old","v":0,"_received_at":"2026-11-20T00:00:00.000000Z","_client_id":"ic_old","_ingest_id":"ing_old"}`,
		`{"k":"old","v":1,"_received_at":"2026-11-20T00:00:00.000000Z","_client_id":"ic_old","_ingest_id":"ing_old"}`,
		`{"k":"new","v":2,"_received_at":"2026-11-20T00:00:01.000000Z","_client_id":"ic_new","_ingest_id":"ing_new"}`,
		`{"k":"new","v":3,"_received_at":"2026-11-20T00:00:01.000000Z","_client_id":"ic_new","_ingest_id":"ing_new"}`,
		`{"k":"new","v":4,"_received_at":"2026-11-20T00:00:01.000000Z","_client_id":"ic_new","_ingest_id":"ing_new"}`,
	}
	if strings.Join(scanned, "\n") != strings.Join(want, "\n") {
		t.Fatalf("scan:\n%s\nwant\n%s", strings.Join(scanned, "\n"), strings.Join(want, "\n"))
	}
	for i, k := range keys { // record keys: one sequence number per record, in order
		if seq := binary.BigEndian.Uint64(k[8:]); seq != uint64(i+1) {
			t.Fatalf("record %d has sequence %d", i, seq)
		}
	}
	if n, err := l.Count(sealModel.ID); n != 5 || err != nil {
		t.Fatalf("count %d %v", n, err)
	}
	if st, err := l.Stats(sealModel.ID); st.LogRecords != 5 || err != nil {
		t.Fatalf("stats %+v %v", st, err)
	}

	// The same rows whether read from the log or from the block sealed out of it.
	rows := func() string {
		var out []string
		err := l.ReadParts(context.Background(), sealModel, func(p *Part) error {
			ks, _ := p.Column("k", "string")
			vs, _ := p.Column("v", "integer")
			at, _ := p.Column("_received_at", "timestamp")
			cl, _ := p.Column("_client_id", "string")
			ing, _ := p.Column("_ingest_id", "string")
			for i := 0; i < p.Meta.Rows; i++ {
				out = append(out, fmt.Sprintf("%s %d %s %s %s", ks.Str(i), vs.Ints[i], FormatTimestamp(at.Ints[i]), cl.Str(i), ing.Str(i)))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, "\n")
	}
	before := rows()
	wantRows := "old 0 2026-11-20T00:00:00Z ic_old ing_old\nold 1 2026-11-20T00:00:00Z ic_old ing_old\n" +
		"new 2 2026-11-20T00:00:01Z ic_new ing_new\nnew 3 2026-11-20T00:00:01Z ic_new ing_new\nnew 4 2026-11-20T00:00:01Z ic_new ing_new"
	if before != wantRows {
		t.Fatalf("log rows:\n%s\nwant\n%s", before, wantRows)
	}
	if n, err := l.Seal(sealModel, t0.Add(time.Hour), SealPolicy{}); n != 5 || err != nil {
		t.Fatalf("seal %d %v", n, err)
	}
	if after := rows(); after != before {
		t.Fatalf("sealed rows:\n%s\nwant\n%s", after, before)
	}
	st, err := l.Stats(sealModel.ID)
	if err != nil || st.SealedRecords != 5 || st.LogRecords != 0 || !st.LastIngestAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("after sealing: %+v %v", st, err)
	}
	if p := l.Check(); len(p) > 0 {
		t.Fatal(p)
	}
}

// TestCheckFindsBadEntries: check reports a log entry that does not decode.
func TestCheckFindsBadEntries(t *testing.T) {
	rs, err := OpenRecordStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := rs.Log("wh_bad")
	if err != nil {
		t.Fatal(err)
	}
	good := EncodeEntries([][]byte{[]byte(`{"k":"a"}`)}, "ic_1", "ing_1")[0].value
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff
	err = l.update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucketIfNotExists([]byte(logPrefix + "mdl_x"))
		b.Put([]byte("0000000000000001"), good)
		return b.Put([]byte("0000000000000002"), bad)
	})
	if err != nil {
		t.Fatal(err)
	}
	p := l.Check()
	if len(p) != 1 || !strings.Contains(p[0], "mdl_x log entry") {
		t.Fatalf("check: %q", p)
	}
	if _, err := l.Count("mdl_x"); err != nil {
		t.Fatal(err) // the header is intact: only decoding finds the damage
	}
}

// FuzzEntryReader: any bytes as a log value give records or an error, never a panic, and
// the records a value yields lie within it.
func FuzzEntryReader(f *testing.F) {
	f.Add(EncodeEntries([][]byte{[]byte(`{"a":1}`), []byte(`{}`)}, "ic_1", "ing_1")[0].value)
	f.Add([]byte(`{"a":1,"_received_at":"2026-11-20T00:00:00.000000Z"}`))
	f.Add([]byte{entryV1, 1, 5, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		var d entryReader
		n, _, herr := entryHeader(v)
		if err := d.decode(v); err != nil {
			return
		}
		if herr != nil {
			t.Fatalf("decoded a value whose header is bad: %v", herr)
		}
		got := 0
		for {
			r, err := d.next()
			if err != nil || r == nil {
				break
			}
			got++
			if got > n {
				t.Fatalf("more records than the header's %d", n)
			}
		}
	})
}
