package openaiengine

import (
	"net/url"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/zestmcp/zest/lib/metrics"
)

// Replica metrics, read from the running engines at scrape time (replicaCollector), so they
// follow the prober without a gauge to keep in step. Labels are bounded by the model file:
// the model id and the replica's base URL without user information, query or fragment (a key
// never becomes a label).
var (
	replicaUpDesc = prometheus.NewDesc(metrics.Namespace+"_inference_replica_up",
		"1 when the engine replica answered its last health probe, else 0.", []string{"model", "replica"}, nil)
	replicaInFlightDesc = prometheus.NewDesc(metrics.Namespace+"_inference_replica_in_flight",
		"Requests in flight to the engine replica.", []string{"model", "replica"}, nil)

	runningMu sync.Mutex
	running   = map[*Engine]struct{}{} // engines whose Run is probing
)

func init() { metrics.Registry.MustRegister(replicaCollector{}) }

func trackRunning(e *Engine) func() {
	runningMu.Lock()
	running[e] = struct{}{}
	runningMu.Unlock()
	return func() {
		runningMu.Lock()
		delete(running, e)
		runningMu.Unlock()
	}
}

// replicaLabel is a base URL as a label: scheme, host and path only.
func replicaLabel(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return "invalid"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

type replicaCollector struct{}

func (replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- replicaUpDesc
	ch <- replicaInFlightDesc
}

func (replicaCollector) Collect(ch chan<- prometheus.Metric) {
	runningMu.Lock()
	engines := make([]*Engine, 0, len(running))
	for e := range running {
		engines = append(engines, e)
	}
	runningMu.Unlock()
	seen := map[[2]string]bool{} // two engines of one process (tests) may serve the same replica
	for _, e := range engines {
		for _, h := range e.Health() {
			k := [2]string{h.Model, replicaLabel(h.BaseURL)}
			if seen[k] {
				continue
			}
			seen[k] = true
			up := 0.0
			if h.Healthy {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(replicaUpDesc, prometheus.GaugeValue, up, k[0], k[1])
			ch <- prometheus.MustNewConstMetric(replicaInFlightDesc, prometheus.GaugeValue, float64(h.InFlight), k[0], k[1])
		}
	}
}
