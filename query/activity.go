package query

import (
	"context"
	"fmt"
	"time"

	"lookout/store"
)

// ModelActivity is one model's records received per step, oldest step first.
type ModelActivity struct {
	ModelKey string  `json:"model_key"`
	Counts   []int64 `json:"counts"`
}

// MaxActivitySteps caps the steps of one Activity call: each step is one count per model.
const MaxActivitySteps = 96

// Activity counts the records each active model of a project received (by _received_at)
// in n steps of step from from: the console's "records over time". It runs the same count
// query a user could run, so it reads every engine the way queries do. Returns
// validation_failed for a bad window and the query errors.
func (s *Service) Activity(ctx context.Context, projectID string, from time.Time, step time.Duration, n int) ([]ModelActivity, error) {
	if n < 1 || n > MaxActivitySteps || step < time.Minute {
		return nil, store.Invalid(store.FieldError{Field: "steps", Message: "must be 1..96 steps of at least a minute"})
	}
	out := []ModelActivity{}
	page := store.Page{Limit: 200}
	for {
		models, next, err := s.Store.ListModels(projectID, store.StatusActive, page)
		if err != nil {
			return nil, err
		}
		for i := range models {
			m := &models[i]
			a := ModelActivity{ModelKey: m.Key, Counts: make([]int64, n)}
			for j := 0; j < n; j++ {
				lo, hi := from.Add(time.Duration(j)*step), from.Add(time.Duration(j+1)*step)
				q := store.QuerySpec{
					Filters: []store.Filter{
						{Field: "_received_at", Op: "gte", Value: lo.UTC().Format(time.RFC3339Nano)},
						{Field: "_received_at", Op: "lt", Value: hi.UTC().Format(time.RFC3339Nano)},
					},
					Aggregations: []store.Aggregation{{Fn: "count", As: "n"}},
				}
				if _, errs := Validate(m, &q, nil); len(errs) > 0 {
					return nil, store.Invalid(errs...)
				}
				res, err := s.exec(ctx, m, m.WarehouseID, &q, nil)
				if err != nil {
					return nil, err
				}
				// Every engine answers a count as one int64 (the differential tests hold
				// them to it): anything else is a broken engine, not a zero.
				n, ok := int64(0), len(res.Rows) == 1 && len(res.Rows[0]) == 1
				if ok {
					n, ok = res.Rows[0][0].(int64)
				}
				if !ok {
					return nil, fmt.Errorf("activity: the count of %s answered %v", m.Key, res.Rows)
				}
				a.Counts[j] = n
			}
			out = append(out, a)
		}
		if next == "" {
			return out, nil
		}
		page.After = next
	}
}
