package store

import (
	"testing"

	bolt "go.etcd.io/bbolt"
)

func TestCheckFindsBrokenResourceIndexes(t *testing.T) {
	s, _ := openTest(t)
	_, ws := owner(t, s, "o@example.com")
	p, _ := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("x")})
	m, err := s.CreateModel(p.ID, ModelInput{Key: ptr("events")})
	if err != nil {
		t.Fatal(err)
	}
	if m.WarehouseID == "" {
		t.Fatal("model got no default warehouse")
	}
	for _, brk := range []struct {
		name         string
		break_, mend func(tx *bolt.Tx) error
	}{
		{"model key index", func(tx *bolt.Tx) error { return tx.Bucket(bucketModelKeys).Delete(pairKey(p.ID, "events")) },
			func(tx *bolt.Tx) error { return tx.Bucket(bucketModelKeys).Put(pairKey(p.ID, "events"), []byte(m.ID)) }},
		{"by_project index", func(tx *bolt.Tx) error { return tx.Bucket(bucketByProject).Delete(byProjectKey(KindModel, p.ID, m.ID)) },
			func(tx *bolt.Tx) error {
				return tx.Bucket(bucketByProject).Put(byProjectKey(KindModel, p.ID, m.ID), nil)
			}},
	} {
		s.db.Update(brk.break_)
		if problems, _ := s.Check(); len(problems) == 0 {
			t.Errorf("%s: check found nothing", brk.name)
		}
		s.db.Update(brk.mend)
		if problems, _ := s.Check(); len(problems) != 0 {
			t.Errorf("%s: mended file still has %v", brk.name, problems)
		}
	}
}

func TestMigrationGivesOldProjectsADefaultWarehouse(t *testing.T) {
	s, _ := openTest(t)
	_, ws := owner(t, s, "o@example.com")
	p, _ := s.CreateProject(ProjectInput{WorkspaceID: &ws.ID, Name: ptr("x")})
	// Pretend the file is at schema 1: no warehouse, no resource buckets.
	s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketByProject, bucketModels, bucketModelKeys, bucketWarehouses, bucketCredentials,
			bucketIngestClients, bucketQueryClients, bucketRuntimeKeys, bucketRuntimeHashes, bucketAnalyticsAPIs,
			bucketAPIKeys, bucketBindings, bucketClientCAs} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(schemaVersionKey, []byte{0, 0, 0, 0, 0, 0, 0, 1})
	})
	if err := migrate(s); err != nil {
		t.Fatal(err)
	}
	ws2, _, err := s.ListWarehouses(p.ID, WarehouseEmbedded, Page{Limit: 10})
	if err != nil || len(ws2) != 1 || ws2[0].Name != "default" {
		t.Fatalf("after migration: %+v %v", ws2, err)
	}
}
