package alerts

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"lookout/cond"
	"lookout/store"
	"lookout/warehouse"
)

// Evaluation runs in two halves. Match, called with every committed batch (ingest's
// post-commit hook, handed over by main), checks each record against the enabled alerts of
// its model, compiled once per change of the control plane, and folds the matches into a
// map keyed by (alert, group values): counts, first and last times and the latest
// OccurrencesKept occurrences. It writes nothing, so an acknowledgement never waits for
// bbolt. A single flusher goroutine then applies the folded matches in one transaction:
// incidents opened or counted, occurrences kept, deliveries queued (the outbox row commits
// with the incident change), and wakes the dispatcher.

// maxPendingGroups bounds the folded matches waiting for the flusher. Past it, Match waits
// for a flush: the only way a rule can hold ingest back is by opening more new incidents
// than one transaction a few milliseconds long can write.
const maxPendingGroups = 50_000

// matcher is one enabled alert, compiled.
type matcher struct {
	alertID   string
	projectID string
	any       bool
	conds     []*cond.Condition
	slots     []int // per condition, the slot of its field
	group     []int // per group_by field, its slot
	groupName []string
	sel       []int
	selName   []string
}

// modelAlerts is everything needed to evaluate one model's records.
type modelAlerts struct {
	slot    map[string]int // field name -> slot
	types   []string       // per slot
	recvd   int            // slot of _received_at, or -1
	client  int            // slot of _client_id, or -1
	eq      map[int]map[string][]*matcher
	rest    []*matcher
	matched int // matchers in all
}

type evalGen struct {
	gen    uint64
	models sync.Map // projectID 0 model key -> *modelAlerts (nil: no enabled alert)
}

// pendingGroup is the folded matches of one (alert, group).
type pendingGroup struct {
	alertID string
	group   []byte
	count   int64
	first   time.Time
	last    time.Time
	occ     []pendingOcc // the latest, up to OccurrencesKept, oldest first
}

type pendingOcc struct {
	at       time.Time
	selected []byte
}

// Evaluator checks committed records against alerts and turns matches into incidents.
type Evaluator struct {
	svc *Service
	log *slog.Logger

	cache atomic.Pointer[evalGen]

	mu      sync.Mutex
	room    *sync.Cond // signalled when the flusher takes the pending map
	pending map[string]*pendingGroup
	wake    chan struct{}
	flushed chan struct{} // closed and replaced after every flush (tests wait on it)

	// Records and Nanos count the records evaluated and the time it took.
	Records, Nanos, Matches atomic.Int64
}

func newEvaluator(svc *Service, log *slog.Logger) *Evaluator {
	e := &Evaluator{svc: svc, log: log, pending: map[string]*pendingGroup{}, wake: make(chan struct{}, 1), flushed: make(chan struct{})}
	e.room = sync.NewCond(&e.mu)
	return e
}

// model returns the compiled alerts of a model for the current control-plane generation,
// nil when it has no enabled alert.
func (e *Evaluator) model(projectID, modelKey string) *modelAlerts {
	gen := e.svc.Store.RuntimeGeneration()
	g := e.cache.Load()
	if g == nil || g.gen != gen {
		fresh := &evalGen{gen: gen}
		if g == nil || g.gen < gen {
			e.cache.CompareAndSwap(g, fresh)
		}
		g = fresh
	}
	ck := projectID + "\x00" + modelKey
	if v, ok := g.models.Load(ck); ok {
		return v.(*modelAlerts)
	}
	ma, err := e.compileModel(projectID, modelKey)
	if err != nil {
		e.log.Error("alerts: cannot load the alerts of a model; its records are not evaluated until the next change", "project_id", projectID, "model", modelKey, "err", err)
	}
	g.models.Store(ck, ma)
	return ma
}

func (e *Evaluator) compileModel(projectID, modelKey string) (*modelAlerts, error) {
	m, err := e.svc.Store.ModelByKey(projectID, modelKey)
	if err != nil {
		if store.IsCode(err, store.CodeNotFound) {
			return nil, nil
		}
		return nil, err
	}
	all, err := e.svc.Store.ProjectAlerts(projectID)
	if err != nil {
		return nil, err
	}
	fields := governed(&m)
	ma := &modelAlerts{slot: map[string]int{}, recvd: -1, client: -1, eq: map[int]map[string][]*matcher{}}
	slotOf := func(name string) int {
		if i, ok := ma.slot[name]; ok {
			return i
		}
		i := len(ma.types)
		ma.slot[name] = i
		ma.types = append(ma.types, fields[name].Type)
		switch name {
		case "_received_at":
			ma.recvd = i
		case "_client_id":
			ma.client = i
		}
		return i
	}
	for i := range all {
		a := &all[i]
		if !a.Enabled || a.Status != store.StatusActive || a.ModelKey != modelKey {
			continue
		}
		c, err := compile(&m, a)
		if err != nil {
			e.log.Warn("alerts: an alert no longer fits its model and is not evaluated", "alert_id", a.ID, "err", err)
			continue
		}
		mt := &matcher{alertID: a.ID, projectID: projectID, any: a.Match == store.MatchAny, conds: c.conds,
			groupName: a.GroupBy, selName: a.SelectFields}
		for _, cd := range a.Conditions {
			mt.slots = append(mt.slots, slotOf(cd.Field))
		}
		for _, f := range a.GroupBy {
			mt.group = append(mt.group, slotOf(f))
		}
		for _, f := range a.SelectFields {
			mt.sel = append(mt.sel, slotOf(f))
		}
		ma.matched++
		// An alert whose conditions must all hold and one of which is eq on a string is
		// found through that value: a hundred such alerts cost one map lookup per record.
		indexed := false
		if !mt.any {
			for j, cc := range mt.conds {
				if cc.Op() == cond.OpEq && cc.FieldType() == store.TypeString {
					v, _ := cc.Operand().(string)
					byVal := ma.eq[mt.slots[j]]
					if byVal == nil {
						byVal = map[string][]*matcher{}
						ma.eq[mt.slots[j]] = byVal
					}
					byVal[v] = append(byVal[v], mt)
					indexed = true
					break
				}
			}
		}
		if !indexed {
			ma.rest = append(ma.rest, mt)
		}
	}
	if ma.matched == 0 {
		return nil, nil
	}
	return ma, nil
}

// Batch is a committed batch of one model's records, as ingest hands it over: each record
// the stored form of the model's fields, the system fields beside them.
type Batch struct {
	ProjectID  string
	ModelKey   string
	ReceivedAt time.Time
	ClientID   string
	Records    [][]byte
}

// Match evaluates a committed batch. It never fails and never writes: matches are folded
// for the flusher.
func (e *Evaluator) Match(b Batch) {
	ma := e.model(b.ProjectID, b.ModelKey)
	if ma == nil || len(b.Records) == 0 {
		return
	}
	start := time.Now()
	slots := make([][]byte, len(ma.types))
	var sys [2][]byte
	if ma.recvd >= 0 {
		sys[0], _ = json.Marshal(b.ReceivedAt.UTC().Format(time.RFC3339Nano))
	}
	if ma.client >= 0 {
		sys[1], _ = json.Marshal(b.ClientID)
	}
	var hits []*matcher
	type hit struct {
		m        *matcher
		group    []byte
		selected []byte
	}
	var found []hit
	for _, rec := range b.Records {
		clear(slots)
		warehouse.EachField(rec, func(key string, raw []byte) bool {
			if i, ok := ma.slot[key]; ok {
				slots[i] = raw
			}
			return true
		})
		if ma.recvd >= 0 {
			slots[ma.recvd] = sys[0]
		}
		if ma.client >= 0 {
			slots[ma.client] = sys[1]
		}
		hits = hits[:0]
		for slot, byVal := range ma.eq {
			if s, ok := warehouse.StringValue(slots[slot]); ok {
				hits = append(hits, byVal[s]...)
			}
		}
		hits = append(hits, ma.rest...)
		for _, m := range hits {
			if !m.matches(ma, slots) {
				continue
			}
			found = append(found, hit{m: m, group: object(m.groupName, m.group, slots), selected: object(m.selName, m.sel, slots)})
		}
	}
	e.Records.Add(int64(len(b.Records)))
	if len(found) == 0 {
		e.Nanos.Add(int64(time.Since(start)))
		return
	}
	at := b.ReceivedAt
	e.mu.Lock()
	for len(e.pending) >= maxPendingGroups {
		e.room.Wait()
	}
	for _, h := range found {
		k := h.m.alertID + "\x00" + string(h.group)
		pg := e.pending[k]
		if pg == nil {
			pg = &pendingGroup{alertID: h.m.alertID, group: h.group, first: at}
			e.pending[k] = pg
		}
		pg.count++
		pg.last = at
		if len(pg.occ) == store.OccurrencesKept {
			copy(pg.occ, pg.occ[1:])
			pg.occ = pg.occ[:len(pg.occ)-1]
		}
		pg.occ = append(pg.occ, pendingOcc{at: at, selected: h.selected})
	}
	e.mu.Unlock()
	e.Matches.Add(int64(len(found)))
	select {
	case e.wake <- struct{}{}:
	default:
	}
	e.Nanos.Add(int64(time.Since(start)))
}

func (m *matcher) matches(ma *modelAlerts, slots [][]byte) bool {
	for i, c := range m.conds {
		ok := matchRaw(c, ma.types[m.slots[i]], slots[m.slots[i]])
		if m.any && ok {
			return true
		}
		if !m.any && !ok {
			return false
		}
	}
	return !m.any
}

// matchRaw evaluates a condition on a raw JSON value of a stored record (nil: missing).
func matchRaw(c *cond.Condition, typ string, raw []byte) bool {
	if len(raw) == 0 || raw[0] == 'n' {
		return c.MatchNull()
	}
	switch typ {
	case store.TypeString:
		if s, ok := warehouse.StringValue(raw); ok {
			return c.MatchString(s)
		}
		return false
	case store.TypeInteger:
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return c.MatchInt(n)
		}
	case store.TypeNumber:
		if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
			return c.MatchFloat(f)
		}
		return false
	case store.TypeBoolean:
		return c.Match(raw[0] == 't')
	case store.TypeTimestamp:
		if s, ok := warehouse.StringValue(raw); ok {
			if us, ok := cond.ParseTime(s); ok {
				return c.MatchTime(us)
			}
			return false
		}
	}
	var v any
	if err := decodeRaw(raw, &v); err != nil {
		return false
	}
	return c.Match(v)
}

func decodeRaw(raw []byte, v *any) error {
	if raw[0] != '{' && raw[0] != '[' && raw[0] != '"' {
		*v = json.Number(raw)
		return nil
	}
	return json.Unmarshal(raw, v)
}

// object builds the JSON object of the named fields' raw values (null when missing), in
// the alert's order: the same values always give the same bytes, so it keys a group.
func object(names []string, slots []int, vals [][]byte) []byte {
	if len(names) == 0 {
		return []byte("{}")
	}
	out := make([]byte, 0, 64)
	out = append(out, '{')
	for i, n := range names {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, n)
		out = append(out, ':')
		if v := vals[slots[i]]; len(v) > 0 {
			out = append(out, v...)
		} else {
			out = append(out, "null"...)
		}
	}
	return append(out, '}')
}

// take swaps the folded matches out.
func (e *Evaluator) take() map[string]*pendingGroup {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pending) == 0 {
		return nil
	}
	p := e.pending
	e.pending = map[string]*pendingGroup{}
	e.room.Broadcast()
	return p
}

// giveBack returns matches a failed flush could not write, merged under newer ones.
func (e *Evaluator) giveBack(p map[string]*pendingGroup) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, old := range p {
		cur := e.pending[k]
		if cur == nil {
			e.pending[k] = old
			continue
		}
		cur.count += old.count
		cur.first = old.first
		occ := append(old.occ, cur.occ...)
		if len(occ) > store.OccurrencesKept {
			occ = occ[len(occ)-store.OccurrencesKept:]
		}
		cur.occ = occ
	}
}

// runFlusher applies folded matches until stop is closed, then flushes what is left.
func (e *Evaluator) runFlusher(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			e.Flush()
			return
		case <-e.wake:
			e.Flush()
		}
	}
}

// Flush applies every folded match now, in one transaction.
func (e *Evaluator) Flush() {
	p := e.take()
	if p != nil {
		if err := e.svc.applyMatches(p); err != nil {
			e.log.Error("alerts: writing incidents failed; the matches are kept and written with the next batch", "err", err)
			e.giveBack(p)
		}
	}
	e.mu.Lock()
	close(e.flushed)
	e.flushed = make(chan struct{})
	e.mu.Unlock()
}

// Flushed returns a channel closed after the next flush; tests wait on it.
func (e *Evaluator) Flushed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.flushed
}
