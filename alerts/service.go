package alerts

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"lookout/cond"
	"lookout/store"
)

// Service is the alerting API over the store. Handlers call it; it holds the rules, the
// evaluator and the delivery queue.
type Service struct {
	Store *store.Store
	Now   func() time.Time

	clock    Clock
	log      *slog.Logger
	eval     *Evaluator
	disp     *Dispatcher
	stop     context.CancelFunc
	stopEval chan struct{}
	done     sync.WaitGroup
	evalDone sync.WaitGroup
}

// Config is what New needs. Only Store is required.
type Config struct {
	Store *store.Store
	// Clock drives every alerting time (nil: the real clock).
	Clock Clock
	Log   *slog.Logger
	// Client sends webhooks and Slack messages (nil: one with SendTimeout).
	Client *http.Client
	// RootCAs verifies SMTP servers' certificates at STARTTLS (nil: the system's).
	RootCAs *x509.CertPool
	// SendTimeout bounds one send attempt (0: 10 s).
	SendTimeout time.Duration
}

// New returns the alerting service. Start runs its background work.
func New(c Config) *Service {
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = 10 * time.Second
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: c.SendTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	s := &Service{Store: c.Store, Now: c.Clock.Now, clock: c.Clock, log: c.Log}
	s.eval = newEvaluator(s, c.Log)
	s.disp = newDispatcher(s, c)
	return s
}

// Start runs the evaluator's flusher and the dispatcher until Close.
func (s *Service) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop, s.stopEval = cancel, make(chan struct{})
	// One worker: evaluation keeps far ahead of ingest (a core evaluates over a million
	// records a second with a hundred alerts), and a second would take CPU from ingest
	// in the bursts when both could run.
	workers := 1
	s.evalDone.Add(workers)
	for range workers {
		go func() { defer s.evalDone.Done(); s.eval.work() }()
	}
	s.done.Add(3)
	go func() { defer s.done.Done(); s.eval.runFlusher(s.stopEval) }()
	go func() { defer s.done.Done(); s.disp.Run(ctx) }()
	go func() { defer s.done.Done(); s.pruneLoop(ctx) }()
}

// How long alerting history is kept: deliveries that ended (delivered or dead_letter),
// and resolved incidents with their occurrences and deliveries.
const (
	KeepDeliveries = 30 * 24 * time.Hour
	KeepIncidents  = 90 * 24 * time.Hour
	PruneEvery     = time.Hour
	pruneBatch     = 1000
)

func (s *Service) pruneLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(PruneEvery):
		}
		if _, _, err := s.PruneHistory(); err != nil {
			s.log.Warn("alerts: pruning old incidents and deliveries failed; trying again in an hour", "err", err)
		}
	}
}

// PruneHistory deletes deliveries that ended more than KeepDeliveries ago and incidents
// resolved more than KeepIncidents ago, in transactions of a bounded size, and returns how
// many of each went.
func (s *Service) PruneHistory() (deliveries, incidents int, err error) {
	now := s.Now()
	for {
		d, i, err := s.Store.PruneAlertHistory(now.Add(-KeepDeliveries), now.Add(-KeepIncidents), pruneBatch)
		deliveries, incidents = deliveries+d, incidents+i
		if err != nil || (d < pruneBatch && i < pruneBatch) {
			return deliveries, incidents, err
		}
	}
}

// Close evaluates what is queued, flushes the last matches, stops dispatching and waits
// for sends under way until ctx ends (those cut go out again after the next start).
func (s *Service) Close(ctx context.Context) error {
	if s.stop == nil {
		return nil
	}
	s.eval.closeQueue()
	s.eval.stopWaiting()
	s.evalDone.Wait()
	close(s.stopEval)
	s.stop()
	s.done.Wait()
	return s.disp.Close(ctx)
}

// Match evaluates a committed batch against the enabled alerts of its model, on the
// caller's goroutine. It never fails and never writes.
func (s *Service) Match(b Batch) { s.eval.Match(b) }

// Enqueue is ingest's post-commit hook (main hands it over): it queues a committed batch
// for the evaluator's workers and returns at once, so an acknowledgement waits for no
// evaluation. Only when more than MaxQueuedBytes of records wait does it wait for room.
func (s *Service) Enqueue(b Batch) { s.eval.enqueue(b) }

// WatchedFields is the ingest hook that names the fields the evaluator reads from a model's
// records (see Evaluator.WatchedFields).
func (s *Service) WatchedFields(projectID, modelKey string) []string {
	return s.eval.WatchedFields(projectID, modelKey)
}

// Evaluator returns the evaluator, for metrics and tests.
func (s *Service) Evaluator() *Evaluator { return s.eval }

// Dispatcher returns the delivery dispatcher, for metrics and tests.
func (s *Service) Dispatcher() *Dispatcher { return s.disp }

// The delivery policy's limits (spec §8), published in metadata.
const (
	DeliveriesPerChannelPerMinute = 10
	DeliveriesPerProjectPerMinute = 60
	OccurrencesShown              = 50
)

// CreateAlert validates and stores an alert. See store.CreateAlert for the errors.
func (s *Service) CreateAlert(projectID string, in store.AlertInput) (store.Alert, error) {
	return s.Store.CreateAlert(projectID, in, Rules)
}

// UpdateAlert validates and replaces an alert. See store.UpdateAlert for the errors.
func (s *Service) UpdateAlert(projectID, id string, in store.AlertInput, ifMatch int) (store.Alert, error) {
	return s.Store.UpdateAlert(projectID, id, in, ifMatch, Rules)
}

// MetaField is a governed field in metadata.
type MetaField struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Description string   `json:"description"`
	Required    bool     `json:"required"`
	System      bool     `json:"system"`
	Operators   []string `json:"operators"`
	Groupable   bool     `json:"groupable"`
}

// MetaModel is an active model and its governed fields, sorted by name.
type MetaModel struct {
	Key    string      `json:"key"`
	Name   string      `json:"name"`
	Fields []MetaField `json:"fields"`
}

// Metadata is what an alert editor needs, in a deterministic order: the same state gives
// the same bytes.
type Metadata struct {
	ProjectID    string              `json:"project_id"`
	Models       []MetaModel         `json:"models"`
	Operators    map[string][]string `json:"operators"`
	ChannelTypes []string            `json:"channel_types"`
	TriggerTypes []string            `json:"trigger_types"`
	Severities   []string            `json:"severities"`
	Match        []string            `json:"match"`
	Limits       map[string]int      `json:"limits"`
}

// Metadata returns the project's alert metadata. Returns not_found (project).
func (s *Service) Metadata(projectID string) (Metadata, error) {
	st, err := s.Store.AlertMetadata(projectID)
	if err != nil {
		return Metadata{}, err
	}
	md := Metadata{ProjectID: projectID, Models: []MetaModel{}, Operators: map[string][]string{},
		ChannelTypes: ChannelTypes(), TriggerTypes: []string{store.TriggerEvent},
		Severities: []string{store.SeverityCritical, store.SeverityInfo, store.SeverityWarning},
		Match:      []string{store.MatchAll, store.MatchAny},
		Limits: map[string]int{
			"cooldown_seconds_min": store.MinCooldown, "cooldown_seconds_default": store.MinCooldown,
			"deliveries_per_channel_per_minute": DeliveriesPerChannelPerMinute,
			"deliveries_per_project_per_minute": DeliveriesPerProjectPerMinute,
			"max_conditions":                    store.MaxAlertItems, "max_select_fields": store.MaxAlertItems,
			"max_group_by": store.MaxAlertItems, "max_channels": store.MaxAlertItems,
			"pattern_max_length": cond.MaxPattern, "list_max_values": cond.MaxList,
			"occurrences_shown": OccurrencesShown,
		}}
	for _, t := range cond.Types() {
		md.Operators[t] = cond.OperatorsFor(t)
	}
	for _, m := range st.Models {
		mm := MetaModel{Key: m.Key, Name: m.Name, Fields: []MetaField{}}
		add := func(f store.Field, system bool) {
			mm.Fields = append(mm.Fields, MetaField{Name: f.Name, Type: f.Type, Description: f.Description, Required: f.Required,
				System: system, Operators: cond.OperatorsFor(f.Type), Groupable: groupable(f.Type)})
		}
		for _, f := range m.Fields {
			add(f, false)
		}
		for _, f := range SystemFields {
			add(f, true)
		}
		sort.Slice(mm.Fields, func(i, j int) bool { return mm.Fields[i].Name < mm.Fields[j].Name })
		md.Models = append(md.Models, mm)
	}
	sort.Slice(md.Models, func(i, j int) bool { return md.Models[i].Key < md.Models[j].Key })
	return md, nil
}

// ConditionResult explains one condition of a simulation.
type ConditionResult struct {
	Field       string `json:"field"`
	Operator    string `json:"operator"`
	Value       any    `json:"value"`
	Actual      any    `json:"actual"`
	Matched     bool   `json:"matched"`
	Explanation string `json:"explanation"`
}

// Gate is something that would hold a notification back.
type Gate struct {
	Gate      string `json:"gate"`
	ChannelID string `json:"channel_id,omitempty"`
	Message   string `json:"message"`
}

// Simulation is a simulation's answer: how each condition fared on the event, the group
// and selected values (nothing else of the event), and whether a notification would go out.
type Simulation struct {
	SimulationID string            `json:"simulation_id"`
	Valid        bool              `json:"valid"`
	Matched      bool              `json:"matched"`
	Conditions   []ConditionResult `json:"conditions"`
	Group        map[string]any    `json:"group"`
	Selected     map[string]any    `json:"selected"`
	WouldNotify  bool              `json:"would_notify"`
	Gates        []Gate            `json:"gates"`
}

// decodeEvent reads an event object, numbers kept exact.
func decodeEvent(raw json.RawMessage) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var ev map[string]any
	if err := d.Decode(&ev); err != nil || ev == nil {
		return nil, store.Invalid(store.FieldError{Field: "event", Message: "must be a JSON object"})
	}
	return ev, nil
}

// SimulateDraft validates a draft rule as creation would and runs it on sampleEvent.
// Returns validation_failed (the draft, or an event that is not an object), not_found.
func (s *Service) SimulateDraft(projectID string, in store.AlertInput, sampleEvent json.RawMessage) (Simulation, error) {
	a := store.NewAlert(projectID, in)
	a.Origin, a.SimulationID = "", ""
	return s.simulate(&a, sampleEvent, "sample_event", true)
}

// SimulateAlert runs a stored alert on event. Returns validation_failed (the event, or an
// alert its model no longer fits), not_found.
func (s *Service) SimulateAlert(projectID, id string, event json.RawMessage) (Simulation, error) {
	a, err := s.Store.Alert(projectID, id)
	if err != nil {
		return Simulation{}, err
	}
	return s.simulate(&a, event, "event", false)
}

func (s *Service) simulate(a *store.Alert, raw json.RawMessage, eventField string, draft bool) (Simulation, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return Simulation{}, store.Invalid(store.FieldError{Field: eventField, Message: "is required: the event to simulate the alert on"})
	}
	ev, err := decodeEvent(raw)
	if err != nil {
		return Simulation{}, store.Invalid(store.FieldError{Field: eventField, Message: "must be a JSON object"})
	}
	m, err := s.Store.ValidateDraft(a, Rules)
	if err != nil {
		return Simulation{}, err
	}
	c, err := compile(m, a)
	if err != nil {
		return Simulation{}, store.Errorf(store.CodeConflict, "the alert no longer fits its model: %v", err)
	}
	if _, ok := ev["_received_at"]; !ok { // the event is simulated as received now
		ev["_received_at"] = s.Now().UTC().Format(time.RFC3339Nano)
	}
	out := Simulation{Valid: true, Conditions: []ConditionResult{}, Group: map[string]any{}, Selected: map[string]any{}, Gates: []Gate{}}
	matchedAll, matchedAny := true, false
	for i, cc := range c.conds {
		cd := a.Conditions[i]
		actual := ev[cd.Field]
		ok := cc.Match(actual)
		matchedAll, matchedAny = matchedAll && ok, matchedAny || ok
		out.Conditions = append(out.Conditions, ConditionResult{Field: cd.Field, Operator: cd.Operator, Value: cd.Value,
			Actual: actual, Matched: ok, Explanation: cd.Field + " " + cc.Explain(actual, ok)})
	}
	out.Matched = matchedAll
	if a.Match == store.MatchAny {
		out.Matched = matchedAny
	}
	for _, f := range a.GroupBy {
		out.Group[f] = ev[f]
	}
	for _, f := range a.SelectFields {
		out.Selected[f] = ev[f]
	}
	if !out.Matched {
		out.Gates = append(out.Gates, Gate{Gate: "not_matched", Message: "the event does not match the conditions"})
	}
	if !a.Enabled {
		out.Gates = append(out.Gates, Gate{Gate: "alert_disabled", Message: "the alert is disabled: it evaluates nothing"})
	}
	if len(a.ChannelIDs) == 0 {
		out.Gates = append(out.Gates, Gate{Gate: "no_channels", Message: "the alert names no notification channel: an incident would open, but nobody would be told"})
	}
	enabled := 0
	for _, id := range a.ChannelIDs {
		ch, err := s.Store.Channel(a.ProjectID, id)
		if err != nil {
			return Simulation{}, err
		}
		if !ch.Enabled {
			out.Gates = append(out.Gates, Gate{Gate: "channel_disabled", ChannelID: id, Message: "channel " + ch.Name + " is disabled"})
			continue
		}
		enabled++
	}
	if len(a.ChannelIDs) > 0 && enabled == 0 {
		out.Gates = append(out.Gates, Gate{Gate: "all_channels_disabled", Message: "every channel of the alert is disabled"})
	}
	notify := out.Matched && a.Enabled && enabled > 0
	if !draft && out.Matched {
		held, err := s.incidentGates(a, groupJSON(m, a.GroupBy, ev), &out)
		if err != nil {
			return Simulation{}, err
		}
		notify = notify && !held
	}
	out.WouldNotify = notify
	sim := store.Simulation{ProjectID: a.ProjectID, Draft: draft, RuleKey: a.RuleKey()}
	if !draft {
		sim.AlertID = a.ID
	}
	if err := s.Store.RecordSimulation(&sim); err != nil {
		return Simulation{}, err
	}
	out.SimulationID = sim.ID
	return out, nil
}

// groupJSON is the group object of an event, the same bytes the evaluator builds from a
// stored record.
func groupJSON(m *store.Model, names []string, ev map[string]any) []byte {
	fields := governed(m)
	vals := make([][]byte, len(names))
	slots := make([]int, len(names))
	types := make([]string, len(names))
	for i, n := range names {
		slots[i], types[i] = i, fields[n].Type
		if v, ok := ev[n]; ok && v != nil {
			vals[i], _ = json.Marshal(v) // canonical takes out any escape it adds
		}
	}
	return groupObject(names, slots, vals, types)
}

// incidentGates adds the gates the live state would apply to a matching event: an incident
// already open or acknowledged for its group, a channel's cooldown, a spent rate budget.
// held reports that no notice would go at all.
func (s *Service) incidentGates(a *store.Alert, group []byte, out *Simulation) (held bool, err error) {
	var inc store.Incident
	var open bool
	if err := s.Store.ViewIncidents(func(t *store.IncidentTx) (err error) {
		inc, open, err = t.OpenIncident(a.ID, group)
		return err
	}); err != nil {
		return false, err
	}
	now := s.Now()
	if open && inc.Status == store.IncidentAcknowledged {
		out.Gates = append(out.Gates, Gate{Gate: "incident_acknowledged", Message: "incident " + inc.ID + " is acknowledged for this group: the event would be counted into it and nobody told until it is resolved"})
		return true, nil
	}
	anyDue := !open
	if open {
		out.Gates = append(out.Gates, Gate{Gate: "incident_open", Message: "incident " + inc.ID + " is already open for this group: the event would be counted into it, and summarised at most once per cooldown"})
	}
	for _, id := range a.ChannelIDs {
		if next, ok := inc.NextSummaryAt[id]; open && ok && next.After(now) {
			out.Gates = append(out.Gates, Gate{Gate: "cooldown", ChannelID: id, Message: "the next summary to this channel goes no sooner than " + next.UTC().Format(time.RFC3339) + " (cooldown_seconds)"})
		} else {
			anyDue = true
		}
		if wait, scope := s.disp.budget(a.ProjectID, id); wait > 0 {
			out.Gates = append(out.Gates, Gate{Gate: scope + "_rate_limit", ChannelID: id, Message: "the " + scope + "'s delivery budget is spent: a notice would wait about " + wait.Round(time.Second).String()})
		}
	}
	return !anyDue, nil
}
