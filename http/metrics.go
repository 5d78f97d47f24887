package http

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the Prometheus series of one Server, in their own registry so several servers
// (tests) never collide.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	records  *prometheus.CounterVec
}

func newMetrics(storeSize func() float64) *metrics {
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
