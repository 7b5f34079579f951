package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/waitfor"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// replicaSessionKey is the one ZEST_SESSION_KEY of the replicas of a test (sessions are
// signed by it, so any mcpgateway serves any session).
const replicaSessionKey = "qrvKk0m7sHq1kVQ1n3m8p0Wb7cJ2xN4yT6uE9aZ5dLw"

// service is one binary started by hand, for layouts other than the default four.
type service struct {
	t    *testing.T
	name string
	env  []string
	p    *proc
}

func runService(t *testing.T, name string, env []string) *service {
	t.Helper()
	s := &service{t: t, name: name, env: env}
	s.start()
	t.Cleanup(func() { s.stop(syscall.SIGTERM) })
	return s
}

func (s *service) start() {
	cmd := exec.Command(filepath.Join(binDir, s.name))
	cmd.Env = s.env
	s.p = startProc(s.t, s.name, cmd, false)
}

// serving checks once that the service answers its health check: the edge's /live, the
// others' gRPC health (SERVING).
func (s *service) serving() error {
	addr := envOf(s.env, listenVars[s.name])
	if s.name == "zest-gateway" {
		_, err := getOK("http://" + addr + "/live")
		return err
	}
	cc, err := grpcdial.Dial(addr, serviceKey, 0)
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil && r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		err = fmt.Errorf("%s at %s: %v", s.name, addr, r.GetStatus())
	}
	return err
}

// stop sends sig and waits for the service to exit (killing it after 15 s).
func (s *service) stop(sig syscall.Signal) { s.p.stop(sig, 15*time.Second) }

// replicas is the layout of the replica tests: two edges, each in front of its own
// mcpgateway (separate data dirs, one shared ZEST_SESSION_KEY), one inference node and one
// tool host.
type replicas struct {
	urls            []string
	edges, gateways []*service
}

func startReplicas(t *testing.T, extra ...string) replicas {
	t.Helper()
	base := append(append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=",
		"ZEST_SESSION_KEY="+replicaSessionKey,
		"ZEST_INFERENCE_ADDR="+freeAddr(t), "ZEST_TOOLHOST_ADDR="+freeAddr(t)), extra...)
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	runService(t, "zest-inference", base)
	runService(t, "zest-toolhost", base)
	var r replicas
	for range 2 {
		mg := freeAddr(t)
		edge := freeAddr(t)
		r.gateways = append(r.gateways, runService(t, "zest-mcpgateway", with("ZEST_MCPGATEWAY_ADDR="+mg, "ZEST_DATA_DIR="+filepath.Join(t.TempDir(), "data"))))
		r.edges = append(r.edges, runService(t, "zest-gateway", with("ZEST_MCPGATEWAY_ADDR="+mg, "ZEST_EDGE_ADDR="+edge)))
		r.urls = append(r.urls, "http://"+edge)
	}
	r.waitHealthy(t)
	return r
}

func (r replicas) waitHealthy(t *testing.T) {
	t.Helper()
	for _, u := range r.urls {
		waitfor.NoError(t, 15*time.Second, func() error {
			_, err := getOK(u + "/api/v1/health")
			return err
		})
	}
}

// restart restarts the second edge and the first mcpgateway.
func (r replicas) restart(t *testing.T) {
	t.Helper()
	r.edges[1].stop(syscall.SIGTERM)
	r.gateways[0].stop(syscall.SIGKILL)
	r.edges[1].start()
	r.gateways[0].start()
	r.waitHealthy(t)
}

// TestOneSessionAcrossReplicas: a session opened on one edge is served by both, and still
// after both front ends restart.
func TestOneSessionAcrossReplicas(t *testing.T) {
	r := startReplicas(t)
	s0 := &Suite{URL: r.urls[0], t: t}
	session, _ := mcpInit(t, s0, "2025-11-25")
	callVia := func(u string) {
		t.Helper()
		s := &Suite{URL: u, t: t}
		r := mcpCall(t, s, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lemonade_list_models","arguments":{}}}`)
		if r.Status != 200 || !strings.Contains(string(r.Body), "builtin-llm") {
			t.Fatalf("via %s: %d %s", u, r.Status, r.Body)
		}
	}
	for i := range 6 {
		callVia(r.urls[i%2])
	}
	r.restart(t)
	for i := range 6 {
		callVia(r.urls[i%2])
	}
}

// TestPresetSessionAcrossReplicas: a session of /mcp/presets/{id} is served by both replicas
// (each has the preset in its registry), and still after both front ends restart; /mcp with
// ZEST_MCP_PRESET likewise.
func TestPresetSessionAcrossReplicas(t *testing.T) {
	r := startReplicas(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_MCP_PRESET=both")
	for _, u := range r.urls {
		if resp := admin(t, &Suite{URL: u, t: t}, "POST", "/presets", `{"id":"both","mcp_server_ids":["lemonade"]}`); resp.Status != 200 {
			t.Fatalf("preset via %s: %d %s", u, resp.Status, resp.Body)
		}
	}
	s0 := &Suite{URL: r.urls[0], t: t}
	preset, _ := presetInit(t, s0, "both")
	own, _ := mcpInit(t, s0, "2025-11-25")
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lemonade_list_models","arguments":{}}}`
	callVia := func(u string) {
		t.Helper()
		s := &Suite{URL: u, t: t}
		if resp := presetCall(t, s, "both", preset, call); resp.Status != 200 || !strings.Contains(string(resp.Body), "builtin-llm") {
			t.Fatalf("preset via %s: %d %s", u, resp.Status, resp.Body)
		}
		if resp := mcpCall(t, s, own, call); resp.Status != 200 || !strings.Contains(string(resp.Body), "builtin-llm") {
			t.Fatalf("/mcp via %s: %d %s", u, resp.Status, resp.Body)
		}
	}
	for i := range 4 {
		callVia(r.urls[i%2])
	}
	r.restart(t)
	for i := range 4 {
		callVia(r.urls[i%2])
	}
}
