package frontdoor

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// doorMetrics are the front door's Prometheus series (Options.Metrics):
//
//	durable_llm_frontdoor_requests_total{route, status}   requests answered
//	durable_llm_frontdoor_refusals_total{code}            error answers by their error code (401 missing_api_key, 429 rate_limit_exceeded, …)
//	durable_llm_frontdoor_request_seconds{route}          time to the request's end (a stream's included)
//	durable_llm_frontdoor_streams_open                     streamed calls followed now
//
// route is the path of the route's pattern ("/v1/chat/completions",
// "/v1/responses/{id}"): a bounded set, never a path with an ID.
type doorMetrics struct {
	requests *prometheus.CounterVec
	refusals *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// newDoorMetrics registers h's series with reg.
func newDoorMetrics(reg prometheus.Registerer, h *Handler) (*doorMetrics, error) {
	m := &doorMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "durable_llm_frontdoor_requests_total",
			Help: "Requests the front door answered, by route pattern and HTTP status."}, []string{"route", "status"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "durable_llm_frontdoor_refusals_total",
			Help: "Error answers of the front door, by their error code (missing_api_key, rate_limit_exceeded, request_too_large, temporal_unavailable, …)."}, []string{"code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "durable_llm_frontdoor_request_seconds",
			Help:    "Time from a request's arrival to its end, a streamed answer's included, by route pattern.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}}, []string{"route"}),
	}
	streams := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "durable_llm_frontdoor_streams_open",
		Help: "Streamed calls the front door follows now (one subscription per call, whatever its readers)."},
		func() float64 { return float64(h.hubs.open()) })
	for _, c := range []prometheus.Collector{m.requests, m.refusals, m.duration, streams} {
		if err := reg.Register(c); err != nil {
			return nil, errors.Join(errors.New("frontdoor: metrics"), err)
		}
	}
	return m, nil
}

// observe counts one request that ended: its route pattern, without its
// method (an unknown URL is the catch-all "/"), what rec saw, and how
// long it took.
func (m *doorMetrics) observe(pattern string, rec *recorder, took time.Duration) {
	if m == nil {
		return
	}
	route := pattern
	if _, path, ok := strings.Cut(pattern, " "); ok {
		route = path
	}
	m.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
	if rec.code != "" {
		m.refusals.WithLabelValues(rec.code).Inc()
	}
	m.duration.WithLabelValues(route).Observe(took.Seconds())
}

// noteCode tells the request's recorder, under w's wrappers, the error
// code of the answer.
func noteCode(w http.ResponseWriter, code string) {
	for {
		switch x := w.(type) {
		case *recorder:
			x.code = code
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}
