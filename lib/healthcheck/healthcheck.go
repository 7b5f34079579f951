// Package healthcheck is what a Zest binary does when run with -healthcheck: it probes the
// service that the same configuration would start — the gRPC services through their own
// grpc.health.v1 Check, the edge through GET /live — and exits 0 when it answers healthy, 1
// when not. Container images are distroless (no curl, no shell), so the binary is its own
// probe (docker compose's healthcheck runs it in the container).
package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Timeout bounds one probe, connection included. It is below the 5 s timeout of compose's
// health checks (deploy/compose.yaml), so that a hung service is reported by the probe
// ("unhealthy: ... deadline exceeded") rather than killed by docker without a word.
const Timeout = 3 * time.Second

// maxLiveBytes is as much of /live's answer as is read (it is {"status":"ok"}).
const maxLiveBytes = 4 << 10

// DialAddr returns the address a probe on the same machine dials for listen address addr: a
// service listening on every interface (no host, 0.0.0.0 or ::) is reached on loopback.
func DialAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("listen address %q: want host:port", addr)
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("listen address %q: a probe needs a fixed port, not %q", addr, port)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ip != nil && ip.To4() == nil {
			host = "::1"
		} else {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, port), nil
}

// GRPC asks the gRPC health service at listen address addr for the server's overall status
// (service ""), which lib/grpcserve sets to SERVING once it serves and to NOT_SERVING as soon
// as it drains. Health needs no key (grpcserve exempts it from the key check).
func GRPC(ctx context.Context, addr string) error {
	target, err := DialAddr(addr)
	if err != nil {
		return err
	}
	// The probe reads the status itself: with client-side health checking, a NOT_SERVING
	// server would refuse the call before it was asked.
	cc, err := grpcdial.Dial(target, "", 0, grpc.WithDisableHealthCheck())
	if err != nil {
		return err
	}
	defer cc.Close()
	res, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("grpc health check of %s: %w", target, err)
	}
	if s := res.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("grpc health check of %s: status %s", target, s)
	}
	return nil
}

// HTTP GETs path (e.g. "/live") from the HTTP server at listen address addr and wants 200.
func HTTP(ctx context.Context, addr, path string) error {
	target, err := DialAddr(addr)
	if err != nil {
		return err
	}
	url := "http://" + target + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// A client of its own: no proxy from the environment (HTTP_PROXY must not reroute a
	// loopback probe), no keep-alive to leave behind.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the method and URL
		}
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxLiveBytes))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d, want 200", url, res.StatusCode)
	}
	return nil
}

// Run runs check within timeout and reports on out (stdout: docker keeps the last lines of a
// health check's output in `docker inspect`). It returns the process exit status: 0 healthy,
// 1 not.
func Run(name string, out io.Writer, timeout time.Duration, check func(ctx context.Context) error) int {
	if timeout <= 0 {
		timeout = Timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := check(ctx)
	if err == nil {
		fmt.Fprintf(out, "%s: healthy\n", name)
		return 0
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no healthy answer within %v: %w", timeout, err)
	}
	fmt.Fprintf(out, "%s: unhealthy: %v\n", name, err)
	return 1
}
