package supervisor

import (
	"errors"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/zestmcp/zest/lib/metrics"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/stdio"
)

// Child-process metrics. The gauges are read from the supervisors' state at scrape time
// (stateCollector), so they can never drift from it; the counters count events where they
// happen. The server label of restarts is capped (metrics.DefaultMaxLabelSets, then "other").
var (
	childStarts = prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "toolhost_child_starts_total",
		Help: "Child processes started (first starts and restarts)."})
	childExits = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "toolhost_child_exits_total",
		Help: "Child processes that ended, by reason: crash (exited by itself or failed its handshake) or stop (stopped by the tool host)."},
		[]string{"reason"})
	childRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "toolhost_child_restarts_total",
		Help: "Restarts of a failed server, by server (past 1000 servers: other)."}, []string{"server"})
	restartCap = metrics.NewCap(metrics.DefaultMaxLabelSets, true)

	childrenDesc = prometheus.NewDesc(metrics.Namespace+"_toolhost_children", "Child processes running now.", nil, nil)
	inFlightDesc = prometheus.NewDesc(metrics.Namespace+"_toolhost_calls_in_flight", "Requests sent to the children and not yet answered (each child takes ZEST_TOOLHOST_MAX_IN_FLIGHT at most).", nil, nil)
	serversDesc  = prometheus.NewDesc(metrics.Namespace+"_toolhost_servers", "Registered servers by state (stopped, starting, ready, failed).", []string{"state"}, nil)

	liveMu sync.Mutex
	live   = map[*Supervisor]struct{}{} // supervisors not closed, for stateCollector
)

func init() {
	childExits.WithLabelValues("crash")
	childExits.WithLabelValues("stop")
	metrics.Registry.MustRegister(childStarts, childExits, childRestarts, stateCollector{})
}

func track(s *Supervisor) {
	liveMu.Lock()
	live[s] = struct{}{}
	liveMu.Unlock()
}

func untrack(s *Supervisor) {
	liveMu.Lock()
	delete(live, s)
	liveMu.Unlock()
}

// countExit counts the end of a child, once per child (its conn's OnExit), however it ended.
func countExit(err error) {
	if errors.Is(err, stdio.ErrStopped) {
		childExits.WithLabelValues("stop").Inc()
	} else {
		childExits.WithLabelValues("crash").Inc()
	}
}

func countRestart(id string) { childRestarts.WithLabelValues(restartCap.Values(id)...).Inc() }

// stateCollector reports the children running and the servers per state of every live
// supervisor (a process runs one; tests may run several).
type stateCollector struct{}

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- childrenDesc
	ch <- inFlightDesc
	ch <- serversDesc
}

func (stateCollector) Collect(ch chan<- prometheus.Metric) {
	liveMu.Lock()
	sups := make([]*Supervisor, 0, len(live))
	for s := range live {
		sups = append(sups, s)
	}
	liveMu.Unlock()
	children, inFlight := 0, 0
	states := map[string]int{}
	for _, st := range toolhostv1.ServerState_name {
		if st != "SERVER_STATE_UNSPECIFIED" {
			states[stateLabel(st)] = 0
		}
	}
	for _, s := range sups {
		s.mu.Lock()
		servers := make([]*server, 0, len(s.servers))
		for _, srv := range s.servers {
			servers = append(servers, srv)
		}
		s.mu.Unlock()
		for _, srv := range servers {
			srv.mu.Lock()
			if srv.conn != nil {
				children++
				inFlight += srv.conn.InFlight()
			}
			states[stateLabel(srv.state.String())]++
			srv.mu.Unlock()
		}
	}
	ch <- prometheus.MustNewConstMetric(childrenDesc, prometheus.GaugeValue, float64(children))
	ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(inFlight))
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(serversDesc, prometheus.GaugeValue, float64(n), st)
	}
}

func stateLabel(enum string) string {
	return strings.ToLower(strings.TrimPrefix(enum, "SERVER_STATE_"))
}
