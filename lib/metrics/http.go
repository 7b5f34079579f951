package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NoRoute is the route label of a request no route matched (its path is never a label).
const NoRoute = "none"

var (
	// HTTPRequests counts the edge's answered requests by method, route template and status.
	HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "http_requests_total",
		Help: "HTTP requests answered, by method, route template and status code."}, []string{"method", "route", "code"})
	// HTTPDuration is their latency, to the end of the response (an SSE stream's whole life).
	HTTPDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "http_request_duration_seconds",
		Help: "HTTP request latency to the end of the response (an SSE stream's whole life), by method and route template.", Buckets: LatencyBuckets},
		[]string{"method", "route"})
	// HTTPInFlight is the requests being answered now (open GET /mcp streams included).
	HTTPInFlight = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "http_requests_in_flight",
		Help: "HTTP requests being answered now (open streams included)."})
)

func init() {
	Registry.MustRegister(HTTPRequests, HTTPDuration, HTTPInFlight)
}

// httpMethods are the method label values; any other method is counted as Other.
var httpMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true}

// ObserveHTTP records one answered request. route is the route template that answered
// ("/mcp/servers/{id}"), "" when none did; status outside 100–599 is counted as Other.
func ObserveHTTP(method, route string, status int, d time.Duration) {
	if !httpMethods[method] {
		method = Other
	}
	if route == "" {
		route = NoRoute
	}
	code := Other
	if status >= 100 && status <= 599 {
		code = strconv.Itoa(status)
	}
	HTTPRequests.WithLabelValues(method, route, code).Inc()
	HTTPDuration.WithLabelValues(method, route).Observe(d.Seconds())
}
