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
	read := 0
	page := store.Page{Limit: 200}
incidents:
	for {
		incs, next, err := s.Store.ListIncidents(projectID, store.IncidentFilter{}, page)
		if err != nil {
			return a, err
		}
		for _, inc := range incs {
			if inc.CreatedAt.Before(first) {
				break incidents
			}
			if read++; read > MaxActivityRows {
				a.Truncated = true
				break incidents
			}
			if d := int(inc.CreatedAt.Sub(first) / (24 * time.Hour)); d >= 0 && d < days {
				a.IncidentsOpened[d]++
			}
		}
		if next == "" {
			break
		}
		page.After = next
	}
	read, page = 0, store.Page{Limit: 200}
deliveries:
	for {
		ds, next, err := s.Store.ListDeliveries(projectID, store.DeliveryFilter{}, page)
		if err != nil {
			return a, err
		}
		for _, d := range ds {
			if d.CreatedAt.Before(first) {
				break deliveries
			}
			if read++; read > MaxActivityRows {
				a.Truncated = true
				break deliveries
			}
			if d.Kind != store.NoticeTest {
				a.Deliveries[d.Status]++
			}
		}
		if next == "" {
			break
		}
		page.After = next
	}
	if ended := a.Deliveries[store.DeliveryDelivered] + a.Deliveries[store.DeliveryDeadLetter] + a.Deliveries[store.DeliveryFailed]; ended > 0 {
		r := float64(a.Deliveries[store.DeliveryDelivered]) / float64(ended)
		a.SuccessRate = &r
	}
	return a, nil
}
