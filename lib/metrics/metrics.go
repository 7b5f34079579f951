// Package metrics is what every Zest service shares for Prometheus: one registry per process
// (with Go's runtime and the process collectors), the HTTP server that exposes it on its own
// address (ZEST_<SERVICE>_METRICS_ADDR, loopback by default, "off" disables), the gRPC
// server and client interceptors (request counts, latency histograms, calls in flight per
// RPC), the edge's HTTP request metrics, and a cap on label sets (Cap) for the labels whose
// values come from what users register (servers, tools).
//
// Metrics are process-wide (package variables): a process runs one service, and a test that
// builds a service several times in one process shares them instead of failing to register
// the same names twice.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/zestmcp/zest/lib/listen"
)

// Namespace prefixes Zest's own metric names (zest_…); the gRPC metrics keep the standard
// grpc_server_* / grpc_client_* names of go-grpc-middleware, which existing dashboards know.
const Namespace = "zest"

// Off is the address value that disables a metrics server: an empty environment variable
// means "not set" to envflag (the default applies), so disabling needs a word.
const Off = "off"

// Registry holds every metric of this process.
var Registry = newRegistry()

func newRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Server timeouts: a scrape is one small GET; nothing here streams.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 60 * time.Second
	// ShutdownTimeout bounds how long a scrape in progress may finish when the service stops.
	ShutdownTimeout = 2 * time.Second
)

// PublicFlag is the shared setting (lib/service's Common, ZEST_METRICS_PUBLIC) that lets a
// metrics address be other than loopback.
const PublicFlag = "metrics-public"

// ValidateAddr checks a metrics address setting named flag (for the error): empty or Off
// (disabled), or host:port on loopback — metrics have no authentication — unless public
// (PublicFlag) says the operator means another address.
func ValidateAddr(flag, addr string, public bool) error {
	if Disabled(addr) {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%s %q: want host:port, or %q to serve no metrics", flag, addr, Off)
	}
	return listen.ValidateUnauthenticated(flag, addr, PublicFlag, public, "metrics have no authentication (they name servers, tools and routes)")
}

// ValidateApart checks that the metrics address (flag) is not the service's own API address
// (apiFlag): the metrics server starts first and would take the API's port.
func ValidateApart(flag, addr, apiFlag, apiAddr string) error {
	if !Disabled(addr) && addr == apiAddr {
		return fmt.Errorf("%s %q is %s too: give metrics a port of their own, or %q", flag, addr, apiFlag, Off)
	}
	return nil
}

// Disabled reports whether addr turns the metrics server off.
func Disabled(addr string) bool { return addr == "" || strings.EqualFold(addr, Off) }

// Server is a running metrics server.
type Server struct {
	addr string
	done chan struct{}
}

// Addr is the address the server listens on (the port chosen when the setting said :0).
func (s *Server) Addr() string { return s.addr }

// Done is closed when the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

// Start serves GET /metrics (Registry) on addr until ctx is done; nil, nil when addr is
// disabled. The listen error is returned at once, so that a taken port stops the service at
// startup with the address named.
func Start(ctx context.Context, addr string, log *slog.Logger) (*Server, error) {
	if Disabled(addr) {
		return nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	// Not listen.TCP: a socket handed over by a supervisor is the service's own port.
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	s := &Server{addr: lis.Addr().String(), done: make(chan struct{})}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	log.Info("metrics serving", "addr", s.addr, "path", "/metrics")
	go func() {
		defer close(s.done)
		select {
		case err := <-errc:
			log.Error("metrics server stopped", "err", err)
			return
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server", "err", err)
		}
	}()
	return s, nil
}

// Handler serves Registry in Prometheus's text (or OpenMetrics) format.
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{Registry: Registry, MaxRequestsInFlight: 4,
		Timeout: WriteTimeout - time.Second})
}
