package http

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"lookout/query"
	"lookout/warehouse"
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

func newMetrics(storeSize func() float64, sealer *warehouse.Sealer) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
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
