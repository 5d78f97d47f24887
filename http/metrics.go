package http

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"lookout/alerts"
	"lookout/query"
	"lookout/warehouse"
	"lookout/warehouse/sink"
)

// metrics are the Prometheus series of one Server, in their own registry so several servers
// (tests) never collide.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	records  *prometheus.CounterVec
	queries  *prometheus.HistogramVec
	blocks   *prometheus.CounterVec
}

func newMetrics(storeSize func() float64, sealer *warehouse.Sealer, al *alerts.Service) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	if al != nil {
		m.reg.MustRegister(alertCollector{al})
	}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lookout_http_requests_total",
		Help: "HTTP requests answered, by listener, route pattern, method and status.",
	}, []string{"listener", "route", "method", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lookout_http_request_duration_seconds",
		Help:    "Time to answer HTTP requests, by listener, route pattern, method and status.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"listener", "route", "method", "status"})
	m.records = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lookout_ingest_records_total",
		Help: "Records received by ingest (HTTP and WebSocket), by result: accepted (durably stored) or rejected.",
	}, []string{"result"})
	m.queries = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lookout_query_duration_seconds",
		Help:    "Time to run queries (runtime and console), by form: adhoc or api. The count is the number of queries.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"form"})
	m.blocks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lookout_query_blocks_total",
		Help: "Column blocks (and unsealed log chunks) queries met, by outcome: scanned, or skipped by time range, min/max or dictionary.",
	}, []string{"outcome"})
	m.reg.MustRegister(m.queries, m.blocks)
	if sealer != nil {
		for _, c := range []struct {
			name, help string
			v          func() int64
		}{
			{"lookout_warehouse_sealed_records_total", "Records the sealer moved from record logs into column blocks.", sealer.SealedRecords.Load},
			{"lookout_warehouse_sealed_blocks_total", "Column blocks the sealer wrote.", sealer.SealedBlocks.Load},
			{"lookout_retention_dropped_records_total", "Records dropped because they were past their model's retention_days.", sealer.RetentionDropped.Load},
			{"lookout_warehouse_compactions_total", "Warehouse files rewritten to give back the space sealing freed.", sealer.Compactions.Load},
		} {
			v := c.v
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help}, func() float64 { return float64(v()) }))
		}
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "lookout_warehouse_seal_write_seconds_total",
			Help: "Time sealing held warehouse files' write locks (ingest commits to those files wait meanwhile).",
		}, sealer.Records.SealWriteSeconds))
	}
	m.reg.MustRegister(m.requests, m.latency, m.records,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lookout_store_size_bytes",
			Help: "Size of the control-plane data file (lookout.db).",
		}, storeSize),
	)
	return m
}

// knownMethods are the request methods that get their own label value. Any client may send
// any token as a method; labelling it raw would let random methods mint unbounded series.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// methodLabel is a request method as a bounded label value.
func methodLabel(method string) string {
	if knownMethods[method] {
		return method
	}
	return "other"
}

// observe counts one answered request. route is a registered pattern or "unmatched", never a
// raw path, and method is bounded by methodLabel, so the series stay few whatever is sent.
func (m *metrics) observe(listener, route, method string, status int, seconds float64) {
	st := strconv.Itoa(status)
	method = methodLabel(method)
	m.requests.WithLabelValues(listener, route, method, st).Inc()
	m.latency.WithLabelValues(listener, route, method, st).Observe(seconds)
}

func (m *metrics) ingested(accepted, rejected int) {
	m.records.WithLabelValues("accepted").Add(float64(accepted))
	m.records.WithLabelValues("rejected").Add(float64(rejected))
}

// queried counts one query.
func (m *metrics) queried(form string, seconds float64, res *query.Result) {
	m.queries.WithLabelValues(form).Observe(seconds)
	if res != nil {
		m.blocks.WithLabelValues("scanned").Add(float64(res.Stats.BlocksScanned))
		m.blocks.WithLabelValues("skipped").Add(float64(res.Stats.BlocksSkipped))
	}
}

// alertCollector reads the evaluator's counters and the delivery queue's state at scrape
// time.
type alertCollector struct{ al *alerts.Service }

var (
	alertDeliveriesDesc = prometheus.NewDesc("lookout_alert_deliveries_total",
		"Delivery attempts that ended, by channel type and the status they left the delivery in (delivered, failed: retry scheduled, dead_letter).",
		[]string{"channel_type", "status"}, nil)
	alertQueueDesc = prometheus.NewDesc("lookout_alert_delivery_queue",
		"Deliveries in the queue, by status (pending, delivering, failed).", []string{"status"}, nil)
	alertOldestDesc = prometheus.NewDesc("lookout_alert_delivery_oldest_pending_seconds",
		"Age of the oldest delivery waiting to go out (pending or failed); 0 when none waits.", nil, nil)
	alertRecordsDesc = prometheus.NewDesc("lookout_alert_evaluated_records_total",
		"Committed records checked against the enabled alerts of their model.", nil, nil)
	alertMatchesDesc = prometheus.NewDesc("lookout_alert_matches_total",
		"Matches of a record and an alert (occurrences).", nil, nil)
	alertEvalDesc = prometheus.NewDesc("lookout_alert_evaluation_seconds_total",
		"Time spent evaluating committed records; divide its rate by lookout_alert_evaluated_records_total's for the time per record.", nil, nil)
	alertPerRecordDesc = prometheus.NewDesc("lookout_alert_evaluation_seconds_per_record",
		"Average evaluation time per record since the start.", nil, nil)
)

func (alertCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{alertDeliveriesDesc, alertQueueDesc, alertOldestDesc, alertRecordsDesc, alertMatchesDesc, alertEvalDesc, alertPerRecordDesc} {
		ch <- d
	}
}

func (c alertCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.al.Dispatcher().Stats()
	for k, v := range st.Outcomes {
		ch <- prometheus.MustNewConstMetric(alertDeliveriesDesc, prometheus.CounterValue, float64(v), k[0], k[1])
	}
	for status, n := range st.Depth {
		ch <- prometheus.MustNewConstMetric(alertQueueDesc, prometheus.GaugeValue, float64(n), status)
	}
	ch <- prometheus.MustNewConstMetric(alertOldestDesc, prometheus.GaugeValue, st.OldestPending.Seconds())
	ev := c.al.Evaluator()
	recs, nanos := ev.Records.Load(), ev.Nanos.Load()
	ch <- prometheus.MustNewConstMetric(alertRecordsDesc, prometheus.CounterValue, float64(recs))
	ch <- prometheus.MustNewConstMetric(alertMatchesDesc, prometheus.CounterValue, float64(ev.Matches.Load()))
	ch <- prometheus.MustNewConstMetric(alertEvalDesc, prometheus.CounterValue, float64(nanos)/1e9)
	per := 0.0
	if recs > 0 {
		per = float64(nanos) / 1e9 / float64(recs)
	}
	ch <- prometheus.MustNewConstMetric(alertPerRecordDesc, prometheus.GaugeValue, per)
}

// sinkCollector reads the sink workers' figures at scrape time: one series per (warehouse,
// model) being shipped.
type sinkCollector struct{ m *sink.Manager }

var (
	sinkLagDesc = prometheus.NewDesc("lookout_sink_lag_records",
		"Records committed locally that the model's external warehouse has not confirmed yet.", []string{"warehouse_id", "model_id"}, nil)
	sinkErrorsDesc = prometheus.NewDesc("lookout_sink_errors_total",
		"Failed attempts to ship a model's records to its external warehouse (each is retried with backoff).", []string{"warehouse_id", "model_id"}, nil)
	sinkShippedDesc = prometheus.NewDesc("lookout_sink_shipped_records_total",
		"Records the external warehouse confirmed.", []string{"warehouse_id", "model_id"}, nil)
)

func (sinkCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sinkLagDesc
	ch <- sinkErrorsDesc
	ch <- sinkShippedDesc
}

func (c sinkCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.m.Statuses() {
		ch <- prometheus.MustNewConstMetric(sinkLagDesc, prometheus.GaugeValue, float64(st.LagRecords), st.WarehouseID, st.ModelID)
		ch <- prometheus.MustNewConstMetric(sinkErrorsDesc, prometheus.CounterValue, float64(st.Errors), st.WarehouseID, st.ModelID)
		ch <- prometheus.MustNewConstMetric(sinkShippedDesc, prometheus.CounterValue, float64(st.Shipped), st.WarehouseID, st.ModelID)
	}
}
