package warehouse

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// writeV1Warehouse makes a warehouse file as version 1 wrote it: no meta bucket, the
// system field ingest_id last in every record, idempotency entries without an index.
func writeV1Warehouse(t *testing.T, dir, id string, records int, keys map[string]time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "warehouses"), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, "warehouses", id+".db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		idem, _ := tx.CreateBucket(bucketIdempotency)
		for k, at := range keys {
			raw, _ := json.Marshal(idemRecord{At: at, Response: json.RawMessage(`{"first":true}`)})
			idem.Put([]byte(k), raw)
		}
		b, _ := tx.CreateBucket([]byte(logPrefix + "mdl_a"))
		for i := 0; i < records; i++ {
			var k [RecordKeySize]byte
			putKey(k[:], uint64(i), uint64(i))
			// Every other record's model also has a field called ingest_id.
			user := ""
			if i%2 == 0 {
				user = `"ingest_id":"ing_USERVALUE0000000000000000000",`
			}
			rec := fmt.Sprintf(`{%s"n":%d,"_received_at":"2026-11-21T12:00:00.000000Z","_client_id":"ic_1","ingest_id":"ing_01M7Z5A0597C36QRZ276CCF%03d"}`, user, i, i%1000)
			if err := b.Put(k[:], []byte(rec)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWarehouseUpgradeFromVersion1(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	n := upgradeBatch*2 + 7 // several upgrade transactions
	writeV1Warehouse(t, dir, "wh_1", n, map[string]time.Time{"ic_1\x00old": now.Add(-30 * time.Hour), "ic_1\x00new": now.Add(-time.Hour)})
	for pass := 0; pass < 2; pass++ { // the second open finds nothing left to do
		rs, err := OpenRecordStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		l, err := rs.Log("wh_1")
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		err = l.Scan("mdl_a", time.Time{}, time.Time{}, func(_, rec []byte) error {
			var m map[string]any
			if err := json.Unmarshal(rec, &m); err != nil {
				return err
			}
			if !strings.HasPrefix(fmt.Sprint(m["_ingest_id"]), "ing_01M7Z5A0597C36QRZ276CCF") || strings.Count(string(rec), `"ingest_id"`) != int(1-int(m["n"].(float64))%2) {
				return fmt.Errorf("record not upgraded: %s", rec)
			}
			if seen%2 == 0 && m["ingest_id"] != "ing_USERVALUE0000000000000000000" {
				return fmt.Errorf("the model's own ingest_id field was touched: %s", rec)
			}
			seen++
			return nil
		})
		if err != nil || seen != n {
			t.Fatalf("pass %d: %d records, %v", pass, seen, err)
		}
		// The expired key goes at the first prune, the fresh one stays.
		if pass == 0 {
			if got, err := l.PruneIdempotency(now, 100); err != nil || got != 1 {
				t.Fatalf("prune after upgrade: %d %v", got, err)
			}
			if r, _ := l.Idempotent([]byte("ic_1\x00new"), now); string(r) != `{"first":true}` {
				t.Fatalf("fresh key lost: %s", r)
			}
		}
		if p := l.Check(); len(p) > 0 {
			t.Fatal(p)
		}
		rs.Close()
	}
}

func TestWarehouseNewerThanBinaryIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeV1Warehouse(t, dir, "wh_1", 1, nil)
	db, err := bolt.Open(filepath.Join(dir, "warehouses", "wh_1.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		meta, _ := tx.CreateBucket(bucketWarehouseMeta)
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], WarehouseVersion+1)
		return meta.Put(keyWarehouseVersion, v[:])
	})
	db.Close()
	rs, _ := OpenRecordStore(dir)
	defer rs.Close()
	if _, err := rs.Log("wh_1"); err == nil || !strings.Contains(err.Error(), "newer Lookout") {
		t.Fatalf("opened a newer file: %v", err)
	}
}

// TestPruneTouchesOnlyExpired: pruning walks the expiry index, so a pass over a bucket of
// live keys deletes nothing and reads only the first index entry; expired keys go in
// bounded transactions; a key stored again after it expired is kept.
func TestPruneTouchesOnlyExpired(t *testing.T) {
	rs, _ := OpenRecordStore(t.TempDir())
	defer rs.Close()
	l, err := rs.Log("wh_1")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	var batches []*AppendBatch
	for i := 0; i < 2500; i++ { // 2,500 keys stored at t0
		batches = append(batches, &AppendBatch{ModelID: "mdl_a", ReceivedAt: t0, IdemKey: []byte(fmt.Sprintf("ic_1\x00k%d", i)), IdemResponse: []byte(`{}`)})
	}
	for i := 0; i < 10; i++ { // and 10 an hour later
		batches = append(batches, &AppendBatch{ModelID: "mdl_a", ReceivedAt: t0.Add(time.Hour), IdemKey: []byte(fmt.Sprintf("ic_1\x00late%d", i)), IdemResponse: []byte(`{}`)})
	}
	if err := l.Append(batches); err != nil {
		t.Fatal(err)
	}
	if n, err := l.PruneIdempotency(t0.Add(23*time.Hour), 1<<30); err != nil || n != 0 {
		t.Fatalf("nothing is due yet: pruned %d %v", n, err)
	}
	// k0 is stored again after it expired: its old index entry must not take it away.
	again := &AppendBatch{ModelID: "mdl_a", ReceivedAt: t0.Add(24*time.Hour + time.Second), IdemKey: []byte("ic_1\x00k0"), IdemResponse: []byte(`{"again":true}`)}
	if err := l.Append([]*AppendBatch{again}); err != nil || again.Duplicate != nil {
		t.Fatal(err, string(again.Duplicate))
	}
	at := t0.Add(24*time.Hour + 30*time.Minute)
	if n, err := l.PruneIdempotency(at, 1200); err != nil || n != 1200 {
		t.Fatalf("limited pass: %d %v", n, err)
	}
	if n, err := l.PruneIdempotency(at, 1<<30); err != nil || n != 1300 {
		t.Fatalf("second pass: %d %v", n, err)
	}
	if r, _ := l.Idempotent([]byte("ic_1\x00k0"), at); string(r) != `{"again":true}` {
		t.Fatalf("re-stored key pruned: %s", r)
	}
	if r, _ := l.Idempotent([]byte("ic_1\x00late3"), at); r == nil {
		t.Fatal("a key not yet due was pruned")
	}
	var left int
	l.db.View(func(tx *bolt.Tx) error { left = tx.Bucket(bucketIdempotency).Stats().KeyN; return nil })
	if left != 11 {
		t.Fatalf("%d keys left, want 11", left)
	}
	if p := l.Check(); len(p) > 0 {
		t.Fatal(p)
	}
}
