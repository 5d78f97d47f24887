package alerts

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
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

// MaxQueuedBytes bounds the records queued for evaluation; past it the post-commit hook
// waits (the records are in memory already: this keeps a burst from holding them all).
const MaxQueuedBytes = 64 << 20

// FlushEvery is how long matches that only count into a recent incident may wait to be
// written; matches of a group not written lately (a new incident, maybe) go at once.
const FlushEvery = time.Second

// maxKnownGroups bounds the memory of recently written groups.
const maxKnownGroups = 100_000

// matcher is one enabled alert, compiled.
type matcher struct {
	alertID   string
	projectID string
	any       bool
	conds     []*cond.Condition
	slots     []int // per condition, the slot of its field
	group     []int // per group_by field, its slot
	groupName []string
	selName   []string // selected at flush, from the stored record
}

// modelAlerts is everything needed to evaluate one model's records.
type modelAlerts struct {
	slot      map[string]int // field name -> slot
	order     []orderGuess   // the first record's keys in order: records mostly keep one order
	orderOnce sync.Once
	types     []string // per slot
	recvd     int      // slot of _received_at, or -1
	client    int      // slot of _client_id, or -1
	eq        []eqIndex
	ranges    []*rangeIndex
	fields    int      // slots of model fields (not system fields): load stops when all are found
	watched   []string // the names of those slots, sorted (WatchedFields)
	rest      []*matcher
	matched   int // matchers in all
}

// eqIndex finds, by a string field's value, the alerts that require it.
type eqIndex struct {
	slot  int
	byVal map[string][]*matcher
}

type orderGuess struct {
	key  string
	slot int // -1: a field no alert uses
}

type evalGen struct {
	gen    uint64
	models sync.Map // projectID 0 model key -> *modelAlerts (nil: no enabled alert)
}

// groupID names one group of one alert: the alert id and the group's JSON.
type groupID struct{ alertID, group string }

// pendingGroup is the folded matches of one (alert, group).
type pendingGroup struct {
	m     *matcher
	group []byte
	count int64
	first time.Time
	last  time.Time
	occ   []pendingOcc // the latest, up to OccurrencesKept: a ring once full
	head  int          // the oldest once the ring is full
}

type pendingOcc struct {
	at       time.Time
	rec      []byte // the stored record (ingest never reuses it); selected at flush
	clientID string
}

// Evaluator checks committed records against alerts and turns matches into incidents.
type Evaluator struct {
	svc *Service
	log *slog.Logger

	cache atomic.Pointer[evalGen]

	mu      sync.Mutex
	room    *sync.Cond // signalled when the flusher takes the pending map
	pending map[groupID]*pendingGroup
	byRaw   map[*matcher]map[string]*pendingGroup // the pending groups by raw group values
	wake    chan struct{}                         // urgent: a group not written lately
	lazy    chan struct{}                         // matches of recently written groups
	known   map[groupID]struct{}                  // groups written lately

	closing bool // Close is under way: Match no longer waits for room

	qmu     sync.Mutex
	qcond   *sync.Cond
	queue   []Batch
	qbytes  int
	qclosed bool

	// Records and Nanos count the records evaluated and the time it took.
	Records, Nanos, Matches atomic.Int64
}

func newEvaluator(svc *Service, log *slog.Logger) *Evaluator {
	e := &Evaluator{svc: svc, log: log, pending: map[groupID]*pendingGroup{}, byRaw: map[*matcher]map[string]*pendingGroup{}, wake: make(chan struct{}, 1), lazy: make(chan struct{}, 1), known: map[groupID]struct{}{}}
	e.room = sync.NewCond(&e.mu)
	e.qcond = sync.NewCond(&e.qmu)
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
	ma := &modelAlerts{slot: map[string]int{}, recvd: -1, client: -1}
	ranges := rangeBuilder{}
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
		ma.matched++
		// An alert whose conditions must all hold and one of which is eq on a string is
		// found through that value: a hundred such alerts cost one map lookup per record.
		indexed := false
		if !mt.any {
			for j, cc := range mt.conds {
				if cc.Op() == cond.OpEq && cc.FieldType() == store.TypeString {
					v, _ := cc.Operand().(string)
					var byVal map[string][]*matcher
					for _, ix := range ma.eq {
						if ix.slot == mt.slots[j] {
							byVal = ix.byVal
						}
					}
					if byVal == nil {
						byVal = map[string][]*matcher{}
						ma.eq = append(ma.eq, eqIndex{mt.slots[j], byVal})
					}
					byVal[v] = append(byVal[v], mt)
					indexed = true
					break
				}
			}
		}
		if !indexed && !mt.any {
			indexed = ranges.add(mt)
		}
		if !indexed {
			ma.rest = append(ma.rest, mt)
		}
	}
	ma.ranges = ranges.build()
	if ma.matched == 0 {
		return nil, nil
	}
	ma.fields = len(ma.types)
	for _, i := range []int{ma.recvd, ma.client} {
		if i >= 0 {
			ma.fields--
		}
	}
	for name, slot := range ma.slot {
		if slot != ma.recvd && slot != ma.client {
			ma.watched = append(ma.watched, name)
		}
	}
	sort.Strings(ma.watched)
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
	// Watched and Spans, when given, say where the values of the watched fields sit in
	// each record (len(Watched) spans per record): ingest's validator found them already.
	Watched []string
	Spans   []warehouse.Span
}

// WatchedFields names the fields of a model that its enabled alerts read while matching
// (conditions and group_by), sorted: ingest reports where their values sit in each record
// it validates (ingest.Service.WatchFields), so evaluation need not scan the records again.
func (e *Evaluator) WatchedFields(projectID, modelKey string) []string {
	ma := e.model(projectID, modelKey)
	if ma == nil {
		return nil
	}
	return ma.watched
}

// Match evaluates a committed batch. It never fails and never writes: matches are folded
// for the flusher.
func (e *Evaluator) Match(b Batch) {
	ma := e.model(b.ProjectID, b.ModelKey)
	if ma == nil || len(b.Records) == 0 {
		return
	}
	start := time.Now()
	ma.learnOrder(b.Records[0])
	r := newRecordEval(ma)
	var sys [2][]byte
	if ma.recvd >= 0 {
		sys[0], _ = json.Marshal(b.ReceivedAt.UTC().Format(time.RFC3339Nano))
	}
	if ma.client >= 0 {
		sys[1], _ = json.Marshal(b.ClientID)
	}
	// Matches fold straight into the pending map, under its lock for the whole batch
	// (there is one worker; the flusher takes the map once a second): a group is found by
	// its alert and raw values without allocating, its JSON is built once per flush, and
	// the selected fields only at flush, for the latest occurrences kept.
	var keyBuf []byte
	at := b.ReceivedAt
	matches := 0
	urgent := false
	var rec []byte
	check := func(m *matcher) {
		if !m.matches(r) {
			return
		}
		matches++
		keyBuf = keyBuf[:0]
		for _, slot := range m.group {
			keyBuf = append(append(keyBuf, r.raw[slot]...), 0xff) // 0xff is never in JSON
		}
		groups := e.byRaw[m]
		if groups == nil {
			groups = map[string]*pendingGroup{}
			e.byRaw[m] = groups
		}
		pg := groups[string(keyBuf)]
		if pg == nil {
			g := groupObject(m.groupName, m.group, r.raw, ma.types)
			id := groupID{m.alertID, string(g)}
			if pg = e.pending[id]; pg == nil {
				pg = &pendingGroup{m: m, group: g, first: at}
				e.pending[id] = pg
				_, known := e.known[id]
				urgent = urgent || !known
			}
			groups[string(keyBuf)] = pg
		}
		pg.count++
		pg.last = at
		pg.add(pendingOcc{at: at, rec: rec, clientID: b.ClientID})
	}
	e.mu.Lock()
	for len(e.pending) >= maxPendingGroups && !e.closing {
		e.room.Wait()
	}
	spanSlots := ma.spanSlots(b.Watched)
	if len(b.Spans) != len(b.Watched)*len(b.Records) {
		spanSlots = nil
	}
	for i := range b.Records {
		rec = b.Records[i]
		if spanSlots != nil {
			r.fromSpans(rec, b.Spans[i*len(spanSlots):(i+1)*len(spanSlots)], spanSlots)
		} else {
			r.load(rec)
		}
		if ma.recvd >= 0 {
			r.raw[ma.recvd] = sys[0]
		}
		if ma.client >= 0 {
			r.raw[ma.client] = sys[1]
		}
		for _, ix := range ma.eq {
			if s, ok := warehouse.StringValue(r.raw[ix.slot]); ok {
				for _, m := range ix.byVal[s] {
					check(m)
				}
			}
		}
		for _, ri := range ma.ranges {
			if v, ok := r.number(ri.slot); ok {
				for _, m := range ri.lookup(v) {
					check(m)
				}
			}
		}
		for _, m := range ma.rest {
			check(m)
		}
	}
	e.mu.Unlock()
	e.Records.Add(int64(len(b.Records)))
	if matches > 0 {
		e.Matches.Add(int64(matches))
		// A group not written lately may open an incident: flush now, its opening waits
		// on nothing else. Matches of groups with a recent incident only count: they wait
		// for the next flush, at most FlushEvery away.
		ch := e.lazy
		if urgent {
			ch = e.wake
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	e.Nanos.Add(int64(time.Since(start)))
}

// forget makes the next match of an alert's group flush at once (its incident was
// resolved: the next match opens a new one).
func (e *Evaluator) forget(alertID string, group []byte) {
	e.mu.Lock()
	delete(e.known, groupID{alertID, string(group)})
	e.mu.Unlock()
}

// add keeps an occurrence among the latest OccurrencesKept (a ring once full).
func (pg *pendingGroup) add(o pendingOcc) {
	if len(pg.occ) < store.OccurrencesKept {
		pg.occ = append(pg.occ, o)
		return
	}
	pg.occ[pg.head] = o
	pg.head = (pg.head + 1) % len(pg.occ)
}

// latest returns the kept occurrences, oldest first.
func (pg *pendingGroup) latest() []pendingOcc {
	return append(append([]pendingOcc(nil), pg.occ[pg.head:]...), pg.occ[:pg.head]...)
}

// merge folds newer matches of the same group into pg.
func (pg *pendingGroup) merge(newer *pendingGroup) {
	pg.count += newer.count
	pg.last = newer.last
	for _, part := range [][]pendingOcc{newer.occ[newer.head:], newer.occ[:newer.head]} {
		for _, o := range part {
			pg.add(o)
		}
	}
}

// recordEval is one record being evaluated: its raw values by slot, each parsed at most
// once however many conditions read it.
type recordEval struct {
	ma    *modelAlerts
	raw   [][]byte
	state []uint8 // per slot: parse state (unparsed, or the kind parsed)
	num   []float64
	in    []int64
	str   []string
}

const (
	stUnparsed uint8 = iota
	stNull
	stString
	stInt
	stFloat
	stTime
	stBool
	stOther // decoded per condition (objects, arrays, values of the wrong type)
)

func newRecordEval(ma *modelAlerts) *recordEval {
	n := len(ma.types)
	return &recordEval{ma: ma, raw: make([][]byte, n), state: make([]uint8, n), num: make([]float64, n), in: make([]int64, n), str: make([]string, n)}
}

// load takes a stored record's values of the slots the alerts use. Keys are matched
// against the first record's order before the map.
func (r *recordEval) load(rec []byte) {
	clear(r.raw)
	clear(r.state)
	ma := r.ma
	pos, found := 0, 0
	warehouse.EachField(rec, func(key string, raw []byte) bool {
		slot := -1
		if pos < len(ma.order) && ma.order[pos].key == key {
			slot = ma.order[pos].slot
		} else if i, ok := ma.slot[key]; ok {
			slot = i
		}
		pos++
		if slot >= 0 && r.raw[slot] == nil {
			r.raw[slot] = raw
			found++
		}
		return found < ma.fields // the rest of the record is of no alert's concern
	})
}

// spanSlots maps watched names to slots, nil unless they cover every model-field slot
// (the alerts changed since ingest asked: then records are scanned).
func (ma *modelAlerts) spanSlots(watched []string) []int {
	if len(watched) == 0 {
		return nil
	}
	out := make([]int, len(watched))
	covered := 0
	for i, n := range watched {
		slot, ok := ma.slot[n]
		if !ok || slot == ma.recvd || slot == ma.client {
			slot = -1
		} else {
			covered++
		}
		out[i] = slot
	}
	if covered != ma.fields {
		return nil
	}
	return out
}

// fromSpans takes a record's values from the spans the validator reported.
func (r *recordEval) fromSpans(rec []byte, spans []warehouse.Span, slots []int) {
	clear(r.raw)
	clear(r.state)
	for i, sp := range spans {
		if slot := slots[i]; slot >= 0 && sp.End > 0 && int(sp.End) <= len(rec) && sp.Start <= sp.End {
			r.raw[slot] = rec[sp.Start:sp.End]
		}
	}
}

// learnOrder records a record's key order, once per compiled model (read-only after).
func (ma *modelAlerts) learnOrder(rec []byte) {
	ma.orderOnce.Do(func() {
		warehouse.EachField(rec, func(key string, _ []byte) bool {
			slot := -1
			if i, ok := ma.slot[key]; ok {
				slot = i
			}
			ma.order = append(ma.order, orderGuess{key: strings.Clone(key), slot: slot})
			return true
		})
	})
}

func (r *recordEval) parse(slot int) uint8 {
	raw := r.raw[slot]
	st := stOther
	switch {
	case len(raw) == 0 || raw[0] == 'n':
		st = stNull
	default:
		switch r.ma.types[slot] {
		case store.TypeString:
			if s, ok := warehouse.StringValue(raw); ok {
				r.str[slot], st = s, stString
			}
		case store.TypeInteger:
			if n, ok := rawInt(raw); ok {
				r.in[slot], st = n, stInt
			}
		case store.TypeNumber:
			if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
				r.num[slot], st = f, stFloat
			}
		case store.TypeBoolean:
			st = stBool
		case store.TypeTimestamp:
			if us, ok := rawTime(raw); ok {
				r.in[slot], st = us, stTime
			}
		}
	}
	r.state[slot] = st
	return st
}

// number returns a slot's value as a float64 for the range index (integers and
// timestamps convert as cond.Range expects), false when it has none.
func (r *recordEval) number(slot int) (float64, bool) {
	st := r.state[slot]
	if st == stUnparsed {
		st = r.parse(slot)
	}
	switch st {
	case stFloat:
		return r.num[slot], true
	case stInt, stTime:
		return float64(r.in[slot]), true
	}
	return 0, false
}

// match evaluates a condition on a slot's value (SQL null semantics: cond's).
func (r *recordEval) match(c *cond.Condition, slot int) bool {
	st := r.state[slot]
	if st == stUnparsed {
		st = r.parse(slot)
	}
	switch st {
	case stNull:
		return c.MatchNull()
	case stString:
		return c.MatchString(r.str[slot])
	case stInt:
		return c.MatchInt(r.in[slot])
	case stFloat:
		return c.MatchFloat(r.num[slot])
	case stTime:
		return c.MatchTime(r.in[slot])
	case stBool:
		return c.MatchBool(r.raw[slot][0] == 't')
	}
	var v any
	if err := decodeRaw(r.raw[slot], &v); err != nil {
		return false
	}
	return c.Match(v)
}

func (m *matcher) matches(r *recordEval) bool {
	for i, c := range m.conds {
		ok := r.match(c, m.slots[i])
		if m.any && ok {
			return true
		}
		if !m.any && !ok {
			return false
		}
	}
	return !m.any
}

func decodeRaw(raw []byte, v *any) error {
	if raw[0] != '{' && raw[0] != '[' && raw[0] != '"' {
		*v = json.Number(raw)
		return nil
	}
	return json.Unmarshal(raw, v)
}

// rawInt reads an integer field's raw value as cond does (5, and also 5.0 or 5e0).
func rawInt(raw []byte) (int64, bool) {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n, true
	}
	return cond.IntValue(json.Number(raw))
}

// rawTime reads a timestamp field's raw value as cond does (an RFC 3339 string, or epoch
// milliseconds) in µs since the epoch.
func rawTime(raw []byte) (int64, bool) {
	if s, ok := warehouse.StringValue(raw); ok {
		return cond.TimeValue(s)
	}
	return cond.TimeValue(json.Number(raw))
}

// groupObject builds a group's JSON object from raw values, each in its canonical form
// (canonical): the same values, however a client spelled them, name the same group.
func groupObject(names []string, slots []int, vals [][]byte, types []string) []byte {
	canon := make([][]byte, len(names))
	idx := make([]int, len(names))
	for i, slot := range slots {
		idx[i] = i
		canon[i] = canonical(types[slot], vals[slot])
	}
	return object(names, idx, canon)
}

// canonical is one spelling of a raw JSON value of a field type: numbers as Go formats
// them (5.0 and 5e0 are 5), strings without needless escapes ("\u0044E" is "DE").
// Simulation spells group values the same way, so it finds the incident a record would.
func canonical(typ string, raw []byte) []byte {
	if len(raw) == 0 || raw[0] == 'n' {
		return raw
	}
	switch typ {
	case store.TypeInteger:
		if n, ok := rawInt(raw); ok {
			return strconv.AppendInt(nil, n, 10)
		}
	case store.TypeNumber:
		if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
			if f == 0 {
				f = 0 // -0 is 0, as the warehouse folds it
			}
			if b, err := json.Marshal(f); err == nil {
				return b
			}
		}
	case store.TypeTimestamp:
		// One instant, one spelling: RFC 3339 in UTC, to the microsecond (an offset, a
		// fraction of zeros or epoch milliseconds name the same time).
		if us, ok := rawTime(raw); ok {
			return strconv.AppendQuote(nil, time.UnixMicro(us).UTC().Format(time.RFC3339Nano))
		}
	case store.TypeString:
		if raw[0] == '"' && bytes.IndexByte(raw, '\\') >= 0 {
			if s, ok := warehouse.StringValue(raw); ok {
				return warehouse.AppendJSONString(nil, s)
			}
		}
	}
	return raw
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
func (e *Evaluator) take() map[groupID]*pendingGroup {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pending) == 0 {
		return nil
	}
	p := e.pending
	e.pending = map[groupID]*pendingGroup{}
	clear(e.byRaw)
	e.room.Broadcast()
	return p
}

// giveBack returns matches a failed flush could not write, merged under newer ones.
func (e *Evaluator) giveBack(p map[groupID]*pendingGroup) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, old := range p {
		if cur := e.pending[k]; cur != nil {
			old.merge(cur)
			*cur = *old // cur stays the group the raw-key index points at
			continue
		}
		e.pending[k] = old
	}
}

// runFlusher applies folded matches until stop is closed, then flushes what is left.
func (e *Evaluator) runFlusher(stop <-chan struct{}) {
	var later <-chan time.Time
	for {
		select {
		case <-stop:
			e.Flush()
			return
		case <-e.wake:
			later = e.flushOrRetry()
		case <-e.lazy:
			if later == nil {
				later = e.svc.clock.After(FlushEvery)
			}
		case <-later:
			later = e.flushOrRetry()
		}
	}
}

// flushOrRetry flushes; after a failed write it asks to be called again in a second.
func (e *Evaluator) flushOrRetry() <-chan time.Time {
	if e.Flush() {
		return nil
	}
	return e.svc.clock.After(time.Second)
}

// stopWaiting lets Match run past maxPendingGroups: Close must not wait on a flusher that
// cannot write.
func (e *Evaluator) stopWaiting() {
	e.mu.Lock()
	e.closing = true
	e.mu.Unlock()
	e.room.Broadcast()
}

// Flush applies every folded match now, in one transaction, and reports whether it wrote
// them (false: they are kept for the next try).
func (e *Evaluator) Flush() bool {
	ok := true
	p := e.take()
	if p != nil {
		if err := e.svc.applyMatches(p); err != nil {
			e.log.Error("alerts: writing incidents failed; the matches are kept and tried again in a second", "err", err)
			e.giveBack(p)
			ok = false
		} else {
			e.mu.Lock()
			if len(e.known) > maxKnownGroups {
				clear(e.known) // only costs flushes that come sooner than needed
			}
			for k := range p {
				e.known[k] = struct{}{}
			}
			e.mu.Unlock()
		}
	}
	return ok
}

// rangeBuilder collects the matchers that must all hold and bound a numeric field: each
// is found through the interval its conditions on that field allow, so fifty alerts on
// bands of one field cost a binary search per record instead of fifty evaluations.
type rangeBuilder map[int][]rangedMatcher

type rangedMatcher struct {
	r cond.Range
	m *matcher
}

// add indexes m by the first numeric field its conditions bound (intersecting every bound
// on that field); false when none does.
func (rb rangeBuilder) add(m *matcher) bool {
	bySlot := map[int]cond.Range{}
	first := -1
	for j, c := range m.conds {
		r, ok := c.Bounds()
		if !ok {
			continue
		}
		slot := m.slots[j]
		if cur, seen := bySlot[slot]; seen {
			r = intersect(cur, r)
		} else if first < 0 {
			first = slot
		}
		bySlot[slot] = r
	}
	if first < 0 {
		return false
	}
	rb[first] = append(rb[first], rangedMatcher{bySlot[first], m})
	return true
}

func intersect(a, b cond.Range) cond.Range {
	if b.Lo > a.Lo || (b.Lo == a.Lo && !b.LoInclusive) {
		a.Lo, a.LoInclusive = b.Lo, b.LoInclusive
	}
	if b.Hi < a.Hi || (b.Hi == a.Hi && !b.HiInclusive) {
		a.Hi, a.HiInclusive = b.Hi, b.HiInclusive
	}
	return a
}

func contains(r cond.Range, v float64) bool {
	return (v > r.Lo || (r.LoInclusive && v == r.Lo)) && (v < r.Hi || (r.HiInclusive && v == r.Hi))
}

// rangeIndex splits a field's line at every bound: regions alternate between the open
// interval before a cut and the cut itself, and each region lists the matchers whose
// interval covers it.
type rangeIndex struct {
	slot    int
	cuts    []float64
	regions [][]*matcher // 2*len(cuts)+1
}

func (rb rangeBuilder) build() []*rangeIndex {
	var out []*rangeIndex
	slots := make([]int, 0, len(rb))
	for slot := range rb {
		slots = append(slots, slot)
	}
	sort.Ints(slots)
	for _, slot := range slots {
		ms := rb[slot]
		ri := &rangeIndex{slot: slot}
		for _, rm := range ms {
			for _, v := range []float64{rm.r.Lo, rm.r.Hi} {
				if !math.IsInf(v, 0) {
					ri.cuts = append(ri.cuts, v)
				}
			}
		}
		sort.Float64s(ri.cuts)
		ri.cuts = slices.Compact(ri.cuts)
		ri.regions = make([][]*matcher, 2*len(ri.cuts)+1)
		for k := range ri.regions {
			i := k / 2
			for _, rm := range ms {
				var in bool
				switch {
				case k%2 == 1: // the cut itself
					in = contains(rm.r, ri.cuts[i])
				case len(ri.cuts) == 0:
					in = rm.r.Lo < rm.r.Hi || contains(rm.r, 0)
				case i == 0: // below every cut
					in = math.IsInf(rm.r.Lo, -1)
				case i == len(ri.cuts): // above every cut
					in = math.IsInf(rm.r.Hi, 1)
				default: // strictly between two cuts: every point there is in or none is
					in = contains(rm.r, ri.cuts[i-1]/2+ri.cuts[i]/2)
				}
				if in {
					ri.regions[k] = append(ri.regions[k], rm.m)
				}
			}
		}
		out = append(out, ri)
	}
	return out
}

// lookup returns the matchers whose interval holds v.
func (ri *rangeIndex) lookup(v float64) []*matcher {
	if math.IsNaN(v) {
		return nil
	}
	i := sort.SearchFloat64s(ri.cuts, v)
	if i < len(ri.cuts) && ri.cuts[i] == v {
		return ri.regions[2*i+1]
	}
	return ri.regions[2*i]
}

// selected builds an occurrence's selected fields from its stored record, in the alert's
// order; a missing field is null.
func (m *matcher) selected(o pendingOcc) []byte {
	vals := make([][]byte, len(m.selName))
	slots := make([]int, len(m.selName))
	want := make(map[string]int, len(m.selName))
	for i, n := range m.selName {
		slots[i] = i
		switch n {
		case "_received_at":
			vals[i], _ = json.Marshal(o.at.UTC().Format(time.RFC3339Nano))
		case "_client_id":
			vals[i], _ = json.Marshal(o.clientID)
		default:
			want[n] = i
		}
	}
	if len(want) > 0 {
		warehouse.EachField(o.rec, func(key string, raw []byte) bool {
			if i, ok := want[key]; ok && vals[i] == nil {
				vals[i] = raw
			}
			return true
		})
	}
	return object(m.selName, slots, vals)
}

// batchBytes is what a queued batch holds in memory: its records, their slice headers
// and their spans.
func batchBytes(b *Batch) int {
	n := 24*len(b.Records) + 8*len(b.Spans)
	for _, r := range b.Records {
		n += len(r)
	}
	return n
}

// enqueue queues a batch for the workers, waiting while MaxQueuedBytes are queued. After
// closeQueue it evaluates on the caller's goroutine.
func (e *Evaluator) enqueue(b Batch) {
	if e.model(b.ProjectID, b.ModelKey) == nil {
		return // no enabled alert on the model: nothing to queue or keep in memory
	}
	n := batchBytes(&b)
	e.qmu.Lock()
	for e.qbytes > 0 && e.qbytes+n > MaxQueuedBytes && !e.qclosed {
		e.qcond.Wait()
	}
	if e.qclosed {
		e.qmu.Unlock()
		e.Match(b)
		return
	}
	e.queue = append(e.queue, b)
	e.qbytes += n
	e.qmu.Unlock()
	e.qcond.Broadcast()
}

// work evaluates queued batches until the queue is closed and empty.
func (e *Evaluator) work() {
	for {
		e.qmu.Lock()
		for len(e.queue) == 0 && !e.qclosed {
			e.qcond.Wait()
		}
		if len(e.queue) == 0 {
			e.qmu.Unlock()
			return
		}
		b := e.queue[0]
		e.queue[0] = Batch{}
		e.queue = e.queue[1:]
		e.qmu.Unlock()
		e.Match(b)
		e.qmu.Lock()
		e.qbytes -= batchBytes(&b)
		e.qmu.Unlock()
		e.qcond.Broadcast()
	}
}

// closeQueue lets the workers end once the queue is empty.
func (e *Evaluator) closeQueue() {
	e.qmu.Lock()
	e.qclosed = true
	e.qmu.Unlock()
	e.qcond.Broadcast()
}
