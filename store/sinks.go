package store

import (
	"encoding/json"

	bolt "go.etcd.io/bbolt"
)

// ExternalWarehouses lists every warehouse, in every project, whose type is not
// embedded, in one read transaction. Returns only storage errors (internal).
func (s *Store) ExternalWarehouses() ([]Warehouse, error) {
	var out []Warehouse
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(KindWarehouse.bucket).ForEach(func(_, v []byte) error {
			var w Warehouse
			if err := json.Unmarshal(v, &w); err != nil {
				return err
			}
			if w.Type != WarehouseEmbedded {
				out = append(out, w)
			}
			return nil
		})
	})
	return out, err
}

// ModelsIn lists the models of a project whose warehouse is warehouseID (archived ones
// too: what they took before archiving still ships). Returns only storage errors
// (internal); an unknown project lists nothing.
func (s *Store) ModelsIn(projectID, warehouseID string) ([]Model, error) {
	var out []Model
	err := s.db.View(func(tx *bolt.Tx) error {
		return eachRes[Model](tx, KindModel, projectID, func(m *Model) error {
			if m.WarehouseID == warehouseID {
				out = append(out, *m)
			}
			return nil
		})
	})
	return out, err
}
