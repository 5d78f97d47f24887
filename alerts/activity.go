package alerts

import (
	"time"

	"lookout/store"
)

// Activity is what the console's overview shows of a project's alerting over a window:
// incidents opened per day and how its deliveries ended.
type Activity struct {
	// Days are UTC days, oldest first; IncidentsOpened[i] counts incidents opened on Days[i].
	Days            []string `json:"days"`
	IncidentsOpened []int    `json:"incidents_opened"`
	// Deliveries counts the window's deliveries by status (test deliveries left out).
	Deliveries map[string]int `json:"deliveries"`
	// SuccessRate is delivered / (delivered + dead_letter + failed), null without any.
	SuccessRate *float64 `json:"success_rate"`
	// Truncated is set when the window held more than MaxActivityRows of either kind: the
	// figures then cover the newest ones.
	Truncated bool `json:"truncated"`
}

// MaxActivityRows bounds the incidents and the deliveries one Activity call reads.
const MaxActivityRows = 20000

// Activity tallies the incidents and deliveries created in the last days UTC days (today
// included). Returns validation_failed for days outside 1..90.
func (s *Service) Activity(projectID string, days int) (Activity, error) {
	if days < 1 || days > 90 {
		return Activity{}, store.Invalid(store.FieldError{Field: "days", Message: "must be 1..90"})
	}
	now := s.clock.Now().UTC()
	first := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -(days - 1))
	a := Activity{Days: make([]string, days), IncidentsOpened: make([]int, days), Deliveries: map[string]int{}}
	for i := range a.Days {
		a.Days[i] = first.AddDate(0, 0, i).Format("2006-01-02")
	}
	truncI, err := eachSince(func(p store.Page) ([]store.Incident, string, error) {
		return s.Store.ListIncidents(projectID, store.IncidentFilter{}, p)
	}, first, func(inc *store.Incident) time.Time { return inc.CreatedAt }, func(inc *store.Incident) {
		if d := int(inc.CreatedAt.Sub(first) / (24 * time.Hour)); d >= 0 && d < days {
			a.IncidentsOpened[d]++
		}
	})
	if err != nil {
		return a, err
	}
	truncD, err := eachSince(func(p store.Page) ([]store.Delivery, string, error) {
		return s.Store.ListDeliveries(projectID, store.DeliveryFilter{}, p)
	}, first, func(d *store.Delivery) time.Time { return d.CreatedAt }, func(d *store.Delivery) {
		if d.Kind != store.NoticeTest {
			a.Deliveries[d.Status]++
		}
	})
	if err != nil {
		return a, err
	}
	a.Truncated = truncI || truncD
	if ended := a.Deliveries[store.DeliveryDelivered] + a.Deliveries[store.DeliveryDeadLetter] + a.Deliveries[store.DeliveryFailed]; ended > 0 {
		r := float64(a.Deliveries[store.DeliveryDelivered]) / float64(ended)
		a.SuccessRate = &r
	}
	return a, nil
}

// eachSince hands fn the rows of a newest-first list created at or after first, page by
// page, and stops after MaxActivityRows of them (truncated).
func eachSince[R any](list func(store.Page) ([]R, string, error), first time.Time, created func(*R) time.Time, fn func(*R)) (truncated bool, err error) {
	read, page := 0, store.Page{Limit: 200}
	for {
		rows, next, err := list(page)
		if err != nil {
			return false, err
		}
		for i := range rows {
			if created(&rows[i]).Before(first) {
				return false, nil
			}
			if read++; read > MaxActivityRows {
				return true, nil
			}
			fn(&rows[i])
		}
		if next == "" {
			return false, nil
		}
		page.After = next
	}
}
