package alerts

import (
	"sort"
	"time"

	"lookout/store"
)

// DetailDeliveries bounds the deliveries an incident's detail shows (the newest).
const DetailDeliveries = 100

// IncidentDetail is an incident with its latest occurrences (newest first, at most
// OccurrencesShown) and its deliveries (the newest DetailDeliveries, oldest first).
type IncidentDetail struct {
	store.Incident
	RecentOccurrences []store.Occurrence `json:"recent_occurrences"`
	Deliveries        []store.Delivery   `json:"deliveries"`
}

// applyMatches writes folded matches in one transaction: each opens its group's incident
// or counts into it, keeps the latest occurrences, and queues what the policy says (an
// opening to every enabled channel; merged into an unsent notice; a summary no sooner than
// the channel's cooldown allows while open; nothing while acknowledged). The queued
// deliveries reach the dispatcher after the commit.
func (s *Service) applyMatches(p map[groupID]*pendingGroup) error {
	keys := make([]groupID, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].alertID != keys[j].alertID {
			return keys[i].alertID < keys[j].alertID
		}
		return keys[i].group < keys[j].group
	})
	var queued []store.Delivery
	err := s.Store.UpdateIncidents(func(t *store.IncidentTx) error {
		queued = queued[:0]
		now := s.Now()
		alertsByID := map[string]*store.Alert{}
		channels := map[string]*store.Channel{}
		for _, k := range keys {
			pg := p[k]
			a, ok := alertsByID[pg.m.alertID]
			if !ok {
				al, err := t.Alert(pg.m.alertID)
				if err != nil && !store.IsCode(err, store.CodeNotFound) {
					return err
				}
				if err == nil && al.Enabled && al.Status == store.StatusActive {
					a = &al
				}
				alertsByID[pg.m.alertID] = a
			}
			if a == nil { // disabled or archived since the records matched
				continue
			}
			inc, open, err := t.OpenIncident(a.ID, pg.group)
			if err != nil {
				return err
			}
			if !open {
				inc = store.Incident{Meta: store.Meta{ProjectID: a.ProjectID}, AlertID: a.ID, AlertName: a.Name, ModelKey: a.ModelKey,
					Severity: a.Severity, Status: store.IncidentOpen, Group: pg.group, FirstAt: pg.first, NextSummaryAt: map[string]time.Time{}}
			}
			inc.Occurrences += pg.count
			inc.LastAt = pg.last
			if open {
				err = t.SaveIncident(&inc)
			} else {
				err = t.InsertIncident(&inc)
			}
			if err != nil {
				return err
			}
			occ := pg.latest()
			n := inc.Occurrences - int64(len(occ))
			kept := make([]store.Occurrence, len(occ))
			for i, o := range occ {
				kept[i] = store.Occurrence{Number: n + int64(i) + 1, At: o.at, Group: pg.group, Selected: pg.m.selected(o)}
			}
			if err := t.AddOccurrences(inc.ID, kept); err != nil {
				return err
			}
			for _, chID := range a.ChannelIDs {
				ch, ok := channels[chID]
				if !ok {
					c, err := t.Channel(chID)
					if err != nil && !store.IsCode(err, store.CodeNotFound) {
						return err
					}
					if err == nil {
						ch = &c
					}
					channels[chID] = ch
				}
				if ch == nil || !ch.Enabled {
					continue
				}
				if !open {
					d := newDelivery(&inc, ch, store.NoticeOpening, pg.count, now)
					if err := t.InsertDelivery(&d); err != nil {
						return err
					}
					queued = append(queued, d)
					continue
				}
				if d, ok, err := t.MergeTarget(inc.ID, chID); err != nil {
					return err
				} else if ok {
					d.Occurrences += pg.count
					if err := t.SaveDelivery(&d); err != nil {
						return err
					}
					continue
				}
				if inc.Status != store.IncidentOpen {
					continue // acknowledged: no summaries
				}
				d := newDelivery(&inc, ch, store.NoticeSummary, pg.count, now)
				if next, ok := inc.NextSummaryAt[chID]; ok && next.After(now) {
					d.NextAttemptAt, d.WaitingReason = &next, WaitCooldown
				}
				if err := t.InsertDelivery(&d); err != nil {
					return err
				}
				queued = append(queued, d)
			}
		}
		return nil
	})
	if err == nil {
		for i := range queued {
			s.disp.enqueue(&queued[i])
		}
	}
	return err
}

func newDelivery(inc *store.Incident, ch *store.Channel, kind string, occurrences int64, now time.Time) store.Delivery {
	return store.Delivery{Meta: store.Meta{ProjectID: inc.ProjectID}, AlertID: inc.AlertID, IncidentID: inc.ID, ChannelID: ch.ID,
		ChannelType: ch.Type, Kind: kind, Status: store.DeliveryPending, Occurrences: occurrences, NextAttemptAt: &now}
}

// Incident reads an incident with its latest occurrences and deliveries. Returns not_found.
func (s *Service) Incident(projectID, id string) (IncidentDetail, error) {
	var out IncidentDetail
	err := s.Store.ViewIncidents(func(t *store.IncidentTx) error {
		inc, err := t.Incident(projectID, id)
		if err != nil {
			return err
		}
		out, err = detail(t, inc)
		return err
	})
	return out, err
}

func detail(t *store.IncidentTx, inc store.Incident) (IncidentDetail, error) {
	occ, err := t.LatestOccurrences(inc.ID, OccurrencesShown)
	if err != nil {
		return IncidentDetail{}, err
	}
	ds, err := t.IncidentDeliveries(inc.ID)
	if err != nil {
		return IncidentDetail{}, err
	}
	if len(ds) > DetailDeliveries {
		ds = ds[len(ds)-DetailDeliveries:]
	}
	return IncidentDetail{Incident: inc, RecentOccurrences: occ, Deliveries: ds}, nil
}

// Acknowledge moves an open incident to acknowledged: it keeps counting occurrences, but
// sends no more summaries (an unsent one is dropped). Returns not_found, conflict (not
// open).
func (s *Service) Acknowledge(projectID, id string) (IncidentDetail, error) {
	return s.changeIncident(projectID, id, func(t *store.IncidentTx, inc *store.Incident) ([]store.Delivery, error) {
		if inc.Status != store.IncidentOpen {
			return nil, store.Errorf(store.CodeConflict, "the incident is %s: only an open incident can be acknowledged", inc.Status)
		}
		now := t.Now
		inc.Status, inc.AcknowledgedAt = store.IncidentAcknowledged, &now
		return dropUnsentSummaries(t, inc.ID, store.IncidentAcknowledged)
	})
}

// Resolve closes an open or acknowledged incident and queues a resolution notice to each
// enabled channel of its alert; the next match opens a new incident. Returns not_found,
// conflict (already resolved).
func (s *Service) Resolve(projectID, id string) (IncidentDetail, error) {
	return s.changeIncident(projectID, id, func(t *store.IncidentTx, inc *store.Incident) ([]store.Delivery, error) {
		if inc.Status == store.IncidentResolved {
			return nil, store.Errorf(store.CodeConflict, "the incident is already resolved; nothing leaves resolved (the next match opens a new incident)")
		}
		now := t.Now
		inc.Status, inc.ResolvedAt = store.IncidentResolved, &now
		queued, err := dropUnsentSummaries(t, inc.ID, store.IncidentResolved)
		if err != nil {
			return nil, err
		}
		a, err := t.Alert(inc.AlertID)
		if err != nil {
			return nil, err
		}
		due := s.Now()
		for _, chID := range a.ChannelIDs {
			ch, err := t.Channel(chID)
			if err != nil {
				return nil, err
			}
			if !ch.Enabled {
				continue
			}
			d := newDelivery(inc, &ch, store.NoticeResolution, 0, due)
			if err := t.InsertDelivery(&d); err != nil {
				return nil, err
			}
			queued = append(queued, d)
		}
		return queued, nil
	})
}

func (s *Service) changeIncident(projectID, id string, change func(t *store.IncidentTx, inc *store.Incident) ([]store.Delivery, error)) (IncidentDetail, error) {
	var out IncidentDetail
	var queued []store.Delivery
	err := s.Store.UpdateIncidents(func(t *store.IncidentTx) error {
		inc, err := t.Incident(projectID, id)
		if err != nil {
			return err
		}
		if queued, err = change(t, &inc); err != nil {
			return err
		}
		if err := t.SaveIncident(&inc); err != nil {
			return err
		}
		out, err = detail(t, inc)
		return err
	})
	if err == nil {
		if out.Status == store.IncidentResolved {
			s.eval.forget(out.AlertID, out.Group)
		}
		for i := range queued {
			s.disp.enqueue(&queued[i])
		}
	}
	return out, err
}

// dropUnsentSummaries ends an incident's summaries that have not gone out: what they would
// have said no longer needs saying once it is acknowledged or resolved. One never tried is
// deleted; one whose attempts failed ends in dead_letter, saying why, so its history stays.
func dropUnsentSummaries(t *store.IncidentTx, incidentID string, status string) ([]store.Delivery, error) {
	ds, err := t.IncidentDeliveries(incidentID)
	if err != nil {
		return nil, err
	}
	var ended []store.Delivery
	for i := range ds {
		d := &ds[i]
		if d.Kind != store.NoticeSummary || (d.Status != store.DeliveryPending && d.Status != store.DeliveryFailed) {
			continue
		}
		if d.Attempts == 0 {
			if err := t.DeleteDelivery(d); err != nil {
				return nil, err
			}
		} else {
			d.Status, d.NextAttemptAt, d.WaitingReason = store.DeliveryDeadLetter, nil, ""
			d.LastError = supersededSummary(status)
			if err := t.SaveDelivery(d); err != nil {
				return nil, err
			}
		}
		ended = append(ended, *d)
	}
	return ended, nil
}

func supersededSummary(status string) string {
	return "not sent: the incident was " + status + " before this summary could be delivered"
}

// Delivery reads a delivery. Returns not_found.
func (s *Service) Delivery(projectID, id string) (store.Delivery, error) {
	var d store.Delivery
	err := s.Store.ViewIncidents(func(t *store.IncidentTx) (err error) {
		d, err = t.DeliveryInProject(projectID, id)
		return err
	})
	return d, err
}

// RetryDelivery requeues a failed or dead-lettered delivery to go out now, with a fresh
// count of attempts. Returns not_found, conflict (any other status).
func (s *Service) RetryDelivery(projectID, id string) (store.Delivery, error) {
	var d store.Delivery
	err := s.Store.UpdateIncidents(func(t *store.IncidentTx) (err error) {
		if d, err = t.DeliveryInProject(projectID, id); err != nil {
			return err
		}
		if d.Status != store.DeliveryFailed && d.Status != store.DeliveryDeadLetter {
			return store.Errorf(store.CodeConflict, "the delivery is %s: only a failed or dead_letter delivery can be retried", d.Status)
		}
		now := s.Now()
		d.Status, d.Attempts, d.NextAttemptAt, d.WaitingReason = store.DeliveryPending, 0, &now, ""
		return t.SaveDelivery(&d)
	})
	if err == nil {
		s.disp.enqueue(&d)
	}
	return d, err
}

// TestChannel queues a test delivery through the channel's real code and returns it. A
// disabled channel can be tested too: that is how a new configuration is tried before it
// goes live. Returns not_found.
func (s *Service) TestChannel(projectID, id string) (store.Delivery, error) {
	var d store.Delivery
	err := s.Store.UpdateIncidents(func(t *store.IncidentTx) error {
		ch, err := t.ChannelInProject(projectID, id)
		if err != nil {
			return err
		}
		now := s.Now()
		d = store.Delivery{Meta: store.Meta{ProjectID: projectID}, ChannelID: ch.ID, ChannelType: ch.Type, Kind: store.NoticeTest,
			Status: store.DeliveryPending, NextAttemptAt: &now}
		return t.InsertDelivery(&d)
	})
	if err == nil {
		s.disp.enqueue(&d)
	}
	return d, err
}
