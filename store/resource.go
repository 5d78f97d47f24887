package store

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Meta is what every project resource carries: identity, owning project and the version and
// timestamps that every write moves on.
type Meta struct {
	ID        string    `json:"id"`
	ProjectID string    `json:"project_id"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (m *Meta) meta() *Meta { return m }

// CurrentVersion is the resource's version, for ETag headers.
func (m Meta) CurrentVersion() int { return m.Version }

// resource is a stored record of a project resource (it may carry sealed fields beside the
// exported type it embeds).
type resource interface{ meta() *Meta }

// Kind names one kind of project resource: its id prefix, its bucket and how errors call it.
type Kind struct {
	Name   string // "model"
	prefix string // "mdl_"
	bucket []byte
}

// The project resource kinds of the Management API.
var (
	KindModel      = Kind{"model", "mdl_", bucketModels}
	KindWarehouse  = Kind{"warehouse", "wh_", bucketWarehouses}
	KindCredential = Kind{"warehouse credential", "whc_", bucketCredentials}
	KindIngest     = Kind{"ingest client", "ic_", bucketIngestClients}
	KindQuery      = Kind{"query client", "qc_", bucketQueryClients}
	KindRuntimeKey = Kind{"runtime API key", "rk_", bucketRuntimeKeys}
	KindAPI        = Kind{"Analytics API", "api_", bucketAnalyticsAPIs}
	KindBinding    = Kind{"analytics binding", "bind_", bucketBindings}
	KindClientCA   = Kind{"Client CA", "ca_", bucketClientCAs}
	KindDiscovery  = Kind{"discovery session", "dsc_", bucketDiscovery}
	KindAlert      = Kind{"alert", "alr_", bucketAlerts}
	KindChannel    = Kind{"notification channel", "ch_", bucketChannels}
	KindIncident   = Kind{"incident", "inc_", bucketIncidents}
	KindDelivery   = Kind{"delivery", "dlv_", bucketDeliveries}
)

// byProjectKey is the by_project index key of a resource: kind prefix 0 project 0 id.
func byProjectKey(k Kind, projectID, id string) []byte {
	return pairKey(k.prefix+"\x00"+projectID, id)
}

func byProjectPrefix(k Kind, projectID string) []byte {
	return pairPrefix(k.prefix + "\x00" + projectID)
}

func getRes[R any, PR interface {
	*R
	resource
}](tx *bolt.Tx, k Kind, id string) (R, error) {
	var r R
	err := getJSON(tx.Bucket(k.bucket), []byte(id), k.Name, &r)
	return r, err
}

// getInProject reads a resource and checks it belongs to the project; another project's
// resource is reported exactly like a missing one.
func getInProject[R any, PR interface {
	*R
	resource
}](tx *bolt.Tx, k Kind, projectID, id string) (R, error) {
	r, err := getRes[R, PR](tx, k, id)
	if err == nil && PR(&r).meta().ProjectID != projectID {
		return r, NotFound(k.Name)
	}
	return r, err
}

// insertRes gives a new resource its id, version and timestamps and stores it with its
// project index entry. The project must exist.
func (s *Store) insertRes(tx *bolt.Tx, k Kind, r resource, now time.Time) error {
	m := r.meta()
	if tx.Bucket(bucketProjects).Get([]byte(m.ProjectID)) == nil {
		return NotFound("project")
	}
	if m.ID == "" {
		m.ID = s.newID(k.prefix)
	}
	m.Version, m.CreatedAt, m.UpdatedAt = 1, now, now
	if err := putJSON(tx.Bucket(k.bucket), []byte(m.ID), r); err != nil {
		return err
	}
	return tx.Bucket(bucketByProject).Put(byProjectKey(k, m.ProjectID, m.ID), nil)
}

// touchRes bumps a resource's version and updated_at and stores it.
func touchRes(tx *bolt.Tx, k Kind, r resource, now time.Time) error {
	m := r.meta()
	m.Version++
	m.UpdatedAt = now
	return putJSON(tx.Bucket(k.bucket), []byte(m.ID), r)
}

// deleteRes removes a resource and its project index entry (hard delete).
func deleteRes(tx *bolt.Tx, k Kind, r resource) error {
	m := r.meta()
	if err := tx.Bucket(k.bucket).Delete([]byte(m.ID)); err != nil {
		return err
	}
	return tx.Bucket(bucketByProject).Delete(byProjectKey(k, m.ProjectID, m.ID))
}

// listRes lists a project's resources of one kind in creation order, one page at a time;
// keep filters (nil keeps all).
func listRes[R any, PR interface {
	*R
	resource
}](tx *bolt.Tx, k Kind, projectID string, page Page, keep func(*R) bool) ([]R, string, error) {
	return scanPage(tx.Bucket(bucketByProject), byProjectPrefix(k, projectID), page, func(id string) (R, bool, error) {
		r, err := getRes[R, PR](tx, k, id)
		if err != nil {
			return r, false, err
		}
		return r, keep == nil || keep(&r), nil
	})
}

// eachRes calls fn for every resource of a kind in a project.
func eachRes[R any, PR interface {
	*R
	resource
}](tx *bolt.Tx, k Kind, projectID string, fn func(*R) error) error {
	p := byProjectPrefix(k, projectID)
	c := tx.Bucket(bucketByProject).Cursor()
	for key, _ := c.Seek(p); key != nil && hasPrefix(key, p); key, _ = c.Next() {
		r, err := getRes[R, PR](tx, k, string(key[len(p):]))
		if err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	return nil
}

// ResourceProject returns the project a stored resource belongs to, so access can be
// decided before a handler runs. Returns not_found.
func (s *Store) ResourceProject(k Kind, id string) (string, error) {
	var pid string
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(k.bucket).Get([]byte(id))
		if raw == nil {
			return NotFound(k.Name)
		}
		var m struct {
			ProjectID string `json:"project_id"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		pid = m.ProjectID
		return nil
	})
	return pid, err
}

// readOne runs a read transaction that loads one resource of a project (or of any project
// when projectID is "").
func readOne[R any, PR interface {
	*R
	resource
}](s *Store, k Kind, projectID, id string) (R, error) {
	var r R
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		if projectID == "" {
			r, err = getRes[R, PR](tx, k, id)
		} else {
			r, err = getInProject[R, PR](tx, k, projectID, id)
		}
		return err
	})
	return r, err
}

// updateRes is the shape of every resource write: read the resource of the project, check
// If-Match (0: unconditional), let change mutate it (its error aborts), then bump version
// and updated_at and store it. It returns the stored value.
func updateRes[R any, PR interface {
	*R
	resource
}](s *Store, k Kind, projectID, id string, ifMatch int, change func(tx *bolt.Tx, r PR) error) (R, error) {
	var r R
	err := s.updateRuntime(func(tx *bolt.Tx) (err error) {
		if r, err = getInProject[R, PR](tx, k, projectID, id); err != nil {
			return err
		}
		if err := checkIfMatch(ifMatch, PR(&r).meta().Version); err != nil {
			return err
		}
		if err := change(tx, PR(&r)); err != nil {
			return err
		}
		return touchRes(tx, k, PR(&r), s.now())
	})
	return r, err
}
