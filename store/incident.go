package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"time"

	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// Incident and delivery values (CONTRACTS §6).
const (
	IncidentOpen         = "open"
	IncidentAcknowledged = "acknowledged"
	IncidentResolved     = "resolved"

	DeliveryPending    = "pending"
	DeliveryDelivering = "delivering"
	DeliveryDelivered  = "delivered"
	DeliveryFailed     = "failed"
	DeliveryDeadLetter = "dead_letter"

	NoticeOpening    = "opening"
	NoticeSummary    = "summary"
	NoticeResolution = "resolution"
	NoticeTest       = "test"

	// OccurrencesKept is how many of an incident's latest occurrences are kept (and shown);
	// the count is exact.
	OccurrencesKept = 50
)

// Incident is what an alert opens for one set of group values: it counts every matching
// record until it is resolved.
type Incident struct {
	Meta
	AlertID        string          `json:"alert_id"`
	AlertName      string          `json:"alert_name"`
	ModelKey       string          `json:"model_key"`
	Severity       string          `json:"severity"`
	Status         string          `json:"status"`
	Group          json.RawMessage `json:"group"`
	Occurrences    int64           `json:"occurrences"`
	FirstAt        time.Time       `json:"first_occurred_at"`
	LastAt         time.Time       `json:"last_occurred_at"`
	AcknowledgedAt *time.Time      `json:"acknowledged_at"`
	ResolvedAt     *time.Time      `json:"resolved_at"`
	// NextSummaryAt is, per channel, the earliest time the next summary may go out: the
	// last notice's time plus the alert's cooldown.
	NextSummaryAt map[string]time.Time `json:"next_summary_at"`
}

// Occurrence is one matching record, as little of it as the alert selects: its group
// values and select_fields, never the rest of the record.
type Occurrence struct {
	Number   int64           `json:"number"`
	At       time.Time       `json:"at"`
	Group    json.RawMessage `json:"group"`
	Selected json.RawMessage `json:"selected"`
}

// Delivery is one notice to one channel: a row of the durable outbox.
type Delivery struct {
	Meta
	AlertID     string `json:"alert_id,omitempty"`
	IncidentID  string `json:"incident_id,omitempty"`
	ChannelID   string `json:"channel_id"`
	ChannelType string `json:"channel_type"`
	Kind        string `json:"kind"`
	Status      string `json:"status"`
	// Occurrences is how many occurrences the notice reports: for an opening and a
	// summary, those merged into it since the previous notice.
	Occurrences   int64      `json:"occurrences"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	WaitingReason string     `json:"waiting_reason,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	LastStatus    int        `json:"last_status_code,omitempty"`
	DeliveredAt   *time.Time `json:"delivered_at"`
}

// Queued reports whether the delivery is still in the queue (not delivered, not dead).
func (d *Delivery) Queued() bool {
	return d.Status == DeliveryPending || d.Status == DeliveryDelivering || d.Status == DeliveryFailed
}

// IncidentTx is one transaction over incidents, occurrences and the delivery queue. The
// alerts package keeps the policy (when to open, merge, summarise, retry); the store keeps
// the records and their indexes consistent, so an incident change and the deliveries it
// queues commit together.
type IncidentTx struct {
	s  *Store
	tx *bolt.Tx
	// Now is the transaction's clock reading, at the store's precision.
	Now time.Time
}

// UpdateIncidents runs fn in one write transaction; its error rolls everything back.
func (s *Store) UpdateIncidents(fn func(t *IncidentTx) error) error {
	return s.db.Update(func(tx *bolt.Tx) error { return fn(&IncidentTx{s: s, tx: tx, Now: s.now()}) })
}

// ViewIncidents runs fn in one read transaction; fn must not write.
func (s *Store) ViewIncidents(fn func(t *IncidentTx) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(&IncidentTx{s: s, tx: tx, Now: s.now()}) })
}

// Alert reads an alert by id, whatever its project. Returns not_found.
func (t *IncidentTx) Alert(id string) (Alert, error) { return getRes[Alert](t.tx, KindAlert, id) }

// Channel reads a channel by id with its secrets opened, whatever its project. Returns
// not_found.
func (t *IncidentTx) Channel(id string) (Channel, error) {
	r, err := getRes[channelRecord](t.tx, KindChannel, id)
	if err != nil {
		return Channel{}, err
	}
	return t.s.fromRecord(r)
}

// ChannelInProject reads a project's channel with its secrets opened. Returns not_found.
func (t *IncidentTx) ChannelInProject(projectID, id string) (Channel, error) {
	r, err := getInProject[channelRecord](t.tx, KindChannel, projectID, id)
	if err != nil {
		return Channel{}, err
	}
	return t.s.fromRecord(r)
}

// Incident reads a project's incident. Returns not_found.
func (t *IncidentTx) Incident(projectID, id string) (Incident, error) {
	return getInProject[Incident](t.tx, KindIncident, projectID, id)
}

// IncidentByID reads an incident whatever its project. Returns not_found.
func (t *IncidentTx) IncidentByID(id string) (Incident, error) {
	return getRes[Incident](t.tx, KindIncident, id)
}

func openKey(alertID string, group []byte) []byte {
	k := make([]byte, 0, len(alertID)+1+len(group))
	return append(append(append(k, alertID...), 0), group...)
}

// OpenIncident returns the alert's open or acknowledged incident for the group values
// (their JSON object, as the evaluator builds it), and false when there is none.
func (t *IncidentTx) OpenIncident(alertID string, group []byte) (Incident, bool, error) {
	id := t.tx.Bucket(bucketIncidentsOpen).Get(openKey(alertID, group))
	if id == nil {
		return Incident{}, false, nil
	}
	inc, err := getRes[Incident](t.tx, KindIncident, string(id))
	return inc, err == nil, err
}

// InsertIncident stores a new incident (status open) and indexes it as its group's open one.
func (t *IncidentTx) InsertIncident(inc *Incident) error {
	if err := t.s.insertRes(t.tx, KindIncident, inc, t.Now); err != nil {
		return err
	}
	return t.tx.Bucket(bucketIncidentsOpen).Put(openKey(inc.AlertID, inc.Group), []byte(inc.ID))
}

// SaveIncident stores a changed incident; a resolved one stops being its group's open one.
func (t *IncidentTx) SaveIncident(inc *Incident) error {
	if inc.Status == IncidentResolved {
		b := t.tx.Bucket(bucketIncidentsOpen)
		k := openKey(inc.AlertID, inc.Group)
		if string(b.Get(k)) == inc.ID {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	return touchRes(t.tx, KindIncident, inc, t.Now)
}

// AddOccurrences keeps an incident's latest OccurrencesKept occurrences in one value
// (oldest first): a flush that brings that many or more replaces it without reading it.
func (t *IncidentTx) AddOccurrences(incidentID string, occs []Occurrence) error {
	b := t.tx.Bucket(bucketOccurrences)
	if len(occs) < OccurrencesKept {
		old, err := t.occurrences(incidentID)
		if err != nil {
			return err
		}
		occs = append(old, occs...)
	}
	if len(occs) > OccurrencesKept {
		occs = occs[len(occs)-OccurrencesKept:]
	}
	return b.Put([]byte(incidentID), encodeOccurrences(occs))
}

func (t *IncidentTx) occurrences(incidentID string) ([]Occurrence, error) {
	raw := t.tx.Bucket(bucketOccurrences).Get([]byte(incidentID))
	if raw == nil {
		return nil, nil
	}
	var out []Occurrence
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode occurrences of %s: %w", incidentID, err)
	}
	return out, nil
}

// encodeOccurrences writes the JSON array by hand: group and selected are JSON the
// evaluator built, and encoding/json would validate and compact each again.
func encodeOccurrences(occs []Occurrence) []byte {
	n := 2
	for i := range occs {
		n += 80 + len(occs[i].Group) + len(occs[i].Selected)
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i := range occs {
		o := &occs[i]
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"number":`...)
		out = strconv.AppendInt(out, o.Number, 10)
		out = append(out, `,"at":"`...)
		out = o.At.UTC().AppendFormat(out, time.RFC3339Nano)
		out = append(out, `","group":`...)
		out = append(out, orNull(o.Group)...)
		out = append(out, `,"selected":`...)
		out = append(out, orNull(o.Selected)...)
		out = append(out, '}')
	}
	return append(out, ']')
}

func orNull(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	return raw
}

// LatestOccurrences returns up to n of an incident's latest occurrences, newest first.
func (t *IncidentTx) LatestOccurrences(incidentID string, n int) ([]Occurrence, error) {
	occs, err := t.occurrences(incidentID)
	if err != nil {
		return nil, err
	}
	out := make([]Occurrence, 0, min(n, len(occs)))
	for i := len(occs) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, occs[i])
	}
	return out, nil
}

// Delivery reads a delivery whatever its project. Returns not_found.
func (t *IncidentTx) Delivery(id string) (Delivery, error) {
	return getRes[Delivery](t.tx, KindDelivery, id)
}

// DeliveryInProject reads a project's delivery. Returns not_found.
func (t *IncidentTx) DeliveryInProject(projectID, id string) (Delivery, error) {
	return getInProject[Delivery](t.tx, KindDelivery, projectID, id)
}

// MergeTarget returns the unsent delivery to (incident, channel) that new occurrences merge
// into, and false when there is none.
func (t *IncidentTx) MergeTarget(incidentID, channelID string) (Delivery, bool, error) {
	id := t.tx.Bucket(bucketDeliveryMerge).Get(pairKey(incidentID, channelID))
	if id == nil {
		return Delivery{}, false, nil
	}
	d, err := getRes[Delivery](t.tx, KindDelivery, string(id))
	return d, err == nil, err
}

// InsertDelivery queues a new delivery. A pending opening or summary becomes its
// (incident, channel)'s merge target.
func (t *IncidentTx) InsertDelivery(d *Delivery) error {
	if err := t.s.insertRes(t.tx, KindDelivery, d, t.Now); err != nil {
		return err
	}
	if d.IncidentID != "" {
		if err := t.tx.Bucket(bucketDeliveriesByInc).Put(pairKey(d.IncidentID, d.ID), nil); err != nil {
			return err
		}
	}
	return t.index(d)
}

// SaveDelivery stores a changed delivery and keeps the queue and merge indexes in step
// with its status.
func (t *IncidentTx) SaveDelivery(d *Delivery) error {
	if err := touchRes(t.tx, KindDelivery, d, t.Now); err != nil {
		return err
	}
	return t.index(d)
}

func (t *IncidentTx) index(d *Delivery) error {
	q := t.tx.Bucket(bucketDeliveryQueue)
	var err error
	if d.Queued() {
		err = q.Put([]byte(d.ID), nil)
	} else {
		err = q.Delete([]byte(d.ID))
	}
	if err != nil || d.IncidentID == "" {
		return err
	}
	m := t.tx.Bucket(bucketDeliveryMerge)
	k := pairKey(d.IncidentID, d.ChannelID)
	mergeable := d.Status == DeliveryPending && d.Attempts == 0 && (d.Kind == NoticeOpening || d.Kind == NoticeSummary)
	cur := m.Get(k)
	switch {
	case mergeable && cur == nil:
		return m.Put(k, []byte(d.ID))
	case !mergeable && string(cur) == d.ID:
		return m.Delete(k)
	}
	// Another delivery holds the slot (a retried one never takes it over): at most one
	// unsent notice per incident and channel takes new occurrences.
	return nil
}

// DeleteDelivery removes a delivery that was never sent (a summary an acknowledgement
// made moot) with its index entries.
func (t *IncidentTx) DeleteDelivery(d *Delivery) error {
	d.Status = DeliveryDelivered // out of the queue and merge indexes
	if err := t.index(d); err != nil {
		return err
	}
	if d.IncidentID != "" {
		if err := t.tx.Bucket(bucketDeliveriesByInc).Delete(pairKey(d.IncidentID, d.ID)); err != nil {
			return err
		}
	}
	return deleteRes(t.tx, KindDelivery, d)
}

// IncidentDeliveries returns an incident's deliveries, oldest first.
func (t *IncidentTx) IncidentDeliveries(incidentID string) ([]Delivery, error) {
	out := []Delivery{}
	prefix := pairPrefix(incidentID)
	c := t.tx.Bucket(bucketDeliveriesByInc).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		d, err := getRes[Delivery](t.tx, KindDelivery, string(k[len(prefix):]))
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// QueuedDeliveries returns every delivery still in the queue, oldest first.
func (t *IncidentTx) QueuedDeliveries() ([]Delivery, error) {
	var out []Delivery
	err := t.tx.Bucket(bucketDeliveryQueue).ForEach(func(k, _ []byte) error {
		d, err := getRes[Delivery](t.tx, KindDelivery, string(k))
		if err == nil {
			out = append(out, d)
		}
		return err
	})
	return out, err
}

// IncidentFilter narrows a list of incidents; empty fields keep all.
type IncidentFilter struct {
	Status, Severity, AlertID string
}

// ListIncidents lists a project's incidents newest first, one page at a time (Page.After
// is the last id of the previous page).
func (s *Store) ListIncidents(projectID string, f IncidentFilter, p Page) ([]Incident, string, error) {
	return listNewest(s, KindIncident, projectID, p, func(inc *Incident) bool {
		return (f.Status == "" || inc.Status == f.Status) && (f.Severity == "" || inc.Severity == f.Severity) && (f.AlertID == "" || inc.AlertID == f.AlertID)
	})
}

// DeliveryFilter narrows a list of deliveries; empty fields keep all.
type DeliveryFilter struct {
	Status, Kind, ChannelID, IncidentID string
}

// ListDeliveries lists a project's deliveries newest first, one page at a time: the
// delivery queue, inspectable.
func (s *Store) ListDeliveries(projectID string, f DeliveryFilter, p Page) ([]Delivery, string, error) {
	return listNewest(s, KindDelivery, projectID, p, func(d *Delivery) bool {
		return (f.Status == "" || d.Status == f.Status) && (f.Kind == "" || d.Kind == f.Kind) &&
			(f.ChannelID == "" || d.ChannelID == f.ChannelID) && (f.IncidentID == "" || d.IncidentID == f.IncidentID)
	})
}

// listNewest lists a project's resources of one kind newest first (ids are time-ordered),
// one page at a time; Page.After is the last id of the previous page.
func listNewest[R any, PR interface {
	*R
	resource
}](s *Store, kind Kind, projectID string, p Page, keep func(*R) bool) ([]R, string, error) {
	out := []R{}
	var next string
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := byProjectPrefix(kind, projectID)
		c := tx.Bucket(bucketByProject).Cursor()
		from := append(append([]byte{}, prefix...), 0xff) // past every id
		if p.After != "" {
			from = append(append([]byte{}, prefix...), p.After...)
		}
		// The last key before from.
		k, _ := c.Seek(from)
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			r, err := getRes[R, PR](tx, kind, string(k[len(prefix):]))
			if err != nil {
				return err
			}
			if !keep(&r) {
				continue
			}
			if len(out) == p.Limit {
				next = PR(&out[len(out)-1]).meta().ID
				return nil
			}
			out = append(out, r)
		}
		return nil
	})
	return out, next, err
}

// AlertStateDigest returns a SHA-256 over every key and value of the incident, occurrence
// and delivery buckets: equal digests mean byte-identical alerting state (simulation must
// leave it so).
func (s *Store) AlertStateDigest() (string, error) {
	h := sha256.New()
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketIncidents, bucketIncidentsOpen, bucketOccurrences, bucketDeliveries, bucketDeliveryQueue, bucketDeliveriesByInc, bucketDeliveryMerge} {
			h.Write(name)
			if err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(k))))
				h.Write(k)
				h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(v))))
				h.Write(v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// PruneAlertHistory deletes, oldest first and at most limit of each in one transaction,
// deliveries that ended (delivered or dead_letter) before doneBefore, and incidents
// resolved before resolvedBefore with their occurrences and every delivery of theirs that
// is no longer queued (an incident with a delivery still queued waits for it). It returns
// how many of each went; call it again while either equals limit.
func (s *Store) PruneAlertHistory(doneBefore, resolvedBefore time.Time, limit int) (deliveries, incidents int, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		deliveries, incidents = 0, 0
		t := &IncidentTx{s: s, tx: tx, Now: s.now()}
		var ids []string
		c := tx.Bucket(bucketDeliveries).Cursor()
		for k, v := c.First(); k != nil && deliveries+len(ids) < limit; k, v = c.Next() {
			var d Delivery
			if err := getJSONBytes(v, &d); err != nil {
				return err
			}
			if !d.CreatedAt.Before(doneBefore) {
				break // ids are time-ordered: the rest are younger
			}
			if !d.Queued() {
				ids = append(ids, d.ID)
			}
		}
		for _, id := range ids {
			d, err := t.Delivery(id)
			if err != nil {
				return err
			}
			if err := t.DeleteDelivery(&d); err != nil {
				return err
			}
			deliveries++
		}
		var incs []Incident
		c = tx.Bucket(bucketIncidents).Cursor()
		for k, v := c.First(); k != nil && len(incs) < limit; k, v = c.Next() {
			var inc Incident
			if err := getJSONBytes(v, &inc); err != nil {
				return err
			}
			if !inc.CreatedAt.Before(resolvedBefore) {
				break
			}
			if inc.Status == IncidentResolved && inc.ResolvedAt != nil && inc.ResolvedAt.Before(resolvedBefore) {
				incs = append(incs, inc)
			}
		}
	next:
		for i := range incs {
			inc := &incs[i]
			ds, err := t.IncidentDeliveries(inc.ID)
			if err != nil {
				return err
			}
			for j := range ds {
				if ds[j].Queued() {
					continue next
				}
			}
			for j := range ds {
				if err := t.DeleteDelivery(&ds[j]); err != nil {
					return err
				}
			}
			if err := tx.Bucket(bucketOccurrences).Delete([]byte(inc.ID)); err != nil {
				return err
			}
			if err := deleteRes(tx, KindIncident, inc); err != nil {
				return err
			}
			incidents++
		}
		return nil
	})
	return deliveries, incidents, err
}

// RecentAttempts returns the deliveries attempted at or after since (their last attempt:
// delivered_at, or the last update of one still failing or delivering), scanning back from
// the newest delivery through those created up to an hour before since: what a restarted
// dispatcher needs to start its rate buckets where the last process left them.
func (t *IncidentTx) RecentAttempts(since time.Time) ([]Delivery, error) {
	var out []Delivery
	c := t.tx.Bucket(bucketDeliveries).Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		var d Delivery
		if err := getJSONBytes(v, &d); err != nil {
			return nil, err
		}
		if d.CreatedAt.Before(since.Add(-time.Hour)) {
			break
		}
		if d.Attempts > 0 && !LastAttempt(&d).Before(since) {
			out = append(out, d)
		}
	}
	return out, nil
}

// LastAttempt is when a delivery was last tried, as well as the record tells.
func LastAttempt(d *Delivery) time.Time {
	if d.DeliveredAt != nil {
		return *d.DeliveredAt
	}
	return d.UpdatedAt
}
