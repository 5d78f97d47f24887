package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// openDiscovery opens a store with a project, an ingest client and a waiting session.
func openDiscovery(t *testing.T) (*Store, Project, Client, DiscoverySession) {
	t.Helper()
	s, _ := openTest(t)
	_, ws := owner(t, s, "o@example.com")
	p, err := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("x")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateClient(ClientIngest, p.ID, ClientInput{Name: ptr("c")})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.OpenDiscovery(p.ID, DiscoveryInput{IngestClientID: c.ID, ModelKey: "events"})
	if err != nil {
		t.Fatal(err)
	}
	return s, p, c, d
}

// storedSize is the bytes a session keeps: its record and its preview keys.
func storedSize(t *testing.T, s *Store, id string) (record, previews, previewKeys int) {
	t.Helper()
	s.db.View(func(tx *bolt.Tx) error {
		record = len(tx.Bucket(bucketDiscovery).Get([]byte(id)))
		c := tx.Bucket(bucketDiscoveryPreviews).Cursor()
		prefix := pairPrefix(id)
		for k, v := c.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)); k, v = c.Next() {
			previews += len(v)
			previewKeys++
		}
		return nil
	})
	return
}

// A client that sends endless distinct field names, huge samples and more samples than a
// session learns from leaves a session whose stored size is bounded by the caps.
func TestDiscoveryStaysWithinCaps(t *testing.T) {
	s, p, c, d := openDiscovery(t)
	long := strings.Repeat("n", MaxDiscoveryFieldName+1)
	big := strings.Repeat("x", MaxDiscoveryPreviewBytes)
	total := 0
	for batch := 0; ; batch++ {
		var samples []map[string]any
		for i := 0; i < 100; i++ {
			rec := map[string]any{"id": batch*100 + i, long: 1}
			for j := 0; j < 10; j++ { // ten new names per sample: 10,000 in all
				rec[fmt.Sprintf("f_%d_%d_%d", batch, i, j)] = j
			}
			if i%2 == 0 {
				rec["pad"] = big // over the preview cap once encoded
			}
			samples = append(samples, rec)
		}
		_, n, err := s.CaptureDiscovery(p.ID, c.ID, samples)
		if total == MaxDiscoverySamples {
			if !IsCode(err, CodeConflict) || !strings.Contains(err.Error(), "accept or discard") {
				t.Fatalf("capture into a full session: %d %v", n, err)
			}
			break
		}
		if err != nil || n != 100 {
			t.Fatalf("batch %d: captured %d, %v", batch, n, err)
		}
		total += n
	}
	got, err := s.Discovery(p.ID, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Samples != MaxDiscoverySamples || len(got.Fields) != MaxDiscoveryFields {
		t.Fatalf("samples %d, fields %d", got.Samples, len(got.Fields))
	}
	// Each sample has 11 names beyond id and pad: the long one is always dropped, and once
	// the cap is reached every new name is.
	if want := MaxDiscoverySamples*11 - (MaxDiscoveryFields - 2); got.FieldsDropped != want {
		t.Errorf("fields_dropped %d, want %d", got.FieldsDropped, want)
	}
	for _, f := range got.Fields {
		if f.Name == long {
			t.Error("a name longer than a model field name was tracked")
		}
	}
	if got.PreviewSkipped != MaxDiscoverySamples/2 {
		t.Errorf("preview_skipped %d", got.PreviewSkipped)
	}
	if len(got.Preview) != MaxDiscoveryPreview {
		t.Fatalf("%d previews", len(got.Preview))
	}
	// The latest samples are the preview, oldest first (odd ids: the even ones were big).
	for i, raw := range got.Preview {
		var rec struct{ ID int }
		json.Unmarshal(raw, &rec)
		if want := MaxDiscoverySamples - 2*MaxDiscoveryPreview + 2*i + 1; rec.ID != want {
			t.Fatalf("preview %d is sample %d, want %d", i, rec.ID, want)
		}
	}
	record, previews, keys := storedSize(t, s, d.ID)
	if keys != MaxDiscoveryPreview || previews > MaxDiscoveryPreview*MaxDiscoveryPreviewBytes {
		t.Errorf("previews: %d keys, %d bytes", keys, previews)
	}
	// Per field: a name of at most 64 bytes and a few counters.
	if limit := MaxDiscoveryFields * 150; record > limit {
		t.Errorf("session record is %d bytes, over %d", record, limit)
	}
	if raw, _ := json.Marshal(got); strings.Contains(string(raw), `"stats"`) {
		t.Error("the API shows the raw statistics")
	}

	// The reviewer's decision drops the samples and frees the client for a new session.
	if _, err := s.DiscardDiscovery(p.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, keys := storedSize(t, s, d.ID); keys != 0 {
		t.Errorf("%d previews kept after discard", keys)
	}
	if _, _, err := s.CaptureDiscovery(p.ID, c.ID, []map[string]any{{"a": 1}}); !IsCode(err, CodeConflict) {
		t.Fatalf("capture with no waiting session: %v", err)
	}
	d2, err := s.OpenDiscovery(p.ID, DiscoveryInput{IngestClientID: c.ID, ModelKey: "events"})
	if err != nil {
		t.Fatal(err)
	}
	// A request that crosses the cap is taken up to it.
	samples := make([]map[string]any, MaxDiscoverySamples+5)
	for i := range samples {
		samples[i] = map[string]any{"a": i}
	}
	if sess, n, err := s.CaptureDiscovery(p.ID, c.ID, samples); err != nil || n != MaxDiscoverySamples || sess.ID != d2.ID {
		t.Fatalf("crossing the cap: %d %v", n, err)
	}
	if _, err := s.OpenDiscovery(p.ID, DiscoveryInput{IngestClientID: c.ID, ModelKey: "x"}); !IsCode(err, CodeConflict) {
		t.Fatalf("second waiting session: %v", err)
	}
	if _, _, err := s.AcceptDiscovery(p.ID, d2.ID); err != nil {
		t.Fatal(err)
	}
	if list, _, _ := s.ListDiscovery(p.ID, "", Page{Limit: 10}); len(list) != 2 || list[0].Preview != nil || list[1].Fields[0].Name != "a" {
		t.Fatalf("list: %+v", list)
	}
}

// A file written before previews had their own keys keeps its waiting session usable.
func TestMigrationMovesDiscoveryPreviews(t *testing.T) {
	s, p, c, d := openDiscovery(t)
	legacy := fmt.Sprintf(`{"id":%q,"project_id":%q,"version":3,"ingest_client_id":%q,"model_key":"events","state":"waiting",`+
		`"samples":12000,"fields":[{"name":"a","type":"integer","seen_ratio":1,"required":true}],`+
		`"preview":[{"a":1},{"a":2}],"stats":{"a":{"seen":10000,"nulls":0,"kinds":{"integer":10000}}}}`, d.ID, p.ID, c.ID)
	s.db.Update(func(tx *bolt.Tx) error {
		tx.DeleteBucket(bucketDiscoveryPreviews)
		tx.DeleteBucket(bucketDiscoveryWaiting)
		tx.Bucket(bucketDiscovery).Put([]byte(d.ID), []byte(legacy))
		return tx.Bucket(bucketMeta).Put(schemaVersionKey, []byte{0, 0, 0, 0, 0, 0, 0, 3})
	})
	if err := migrate(s); err != nil {
		t.Fatal(err)
	}
	got, err := s.Discovery(p.ID, d.ID)
	if err != nil || got.Samples != 10_000 || len(got.Preview) != 2 || string(got.Preview[1]) != `{"a":2}` || len(got.Fields) != 1 || got.Fields[0].SeenRatio != 1 {
		t.Fatalf("after migration: %+v %v", got, err)
	}
	if record, _, _ := storedSize(t, s, d.ID); record == 0 {
		t.Fatal("record lost")
	}
	s.db.View(func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bucketDiscovery).Get([]byte(d.ID)); strings.Contains(string(raw), `"preview"`) {
			t.Errorf("the record still holds its previews: %s", raw)
		}
		return nil
	})
	// Its client is found through the new index (and the session is full by the new cap).
	if _, _, err := s.CaptureDiscovery(p.ID, c.ID, []map[string]any{{"a": 1}}); !IsCode(err, CodeConflict) || !strings.Contains(err.Error(), d.ID) {
		t.Fatalf("capture after migration: %v", err)
	}
}

// TestDeletingAClientEndsItsDiscovery: a session waiting for a deleted client would wait
// for ever and keep the client's samples: deleting the client discards it.
func TestDeletingAClientEndsItsDiscovery(t *testing.T) {
	s, p, c, d := openDiscovery(t)
	if _, _, err := s.CaptureDiscovery(p.ID, c.ID, []map[string]any{{"a": 1.0}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteClient(ClientIngest, p.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	got, err := s.Discovery(p.ID, d.ID)
	if err != nil || got.State != DiscoveryDiscarded {
		t.Fatalf("session %s after its client was deleted (%v)", got.State, err)
	}
	if _, previews, keys := storedSize(t, s, d.ID); previews != 0 || keys != 0 {
		t.Fatalf("%d preview keys (%d bytes) left", keys, previews)
	}
	s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketDiscoveryWaiting).Get([]byte(c.ID)) != nil {
			t.Error("waiting index entry left")
		}
		return nil
	})
}
