package e2e

// Services a test starts apart from a Suite (one binary, two replicas, a tool host over gRPC),
// and what tests read of processes (health, memory, logs).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/waitfor"
	"google.golang.org/grpc"
)

// runHealthcheck runs one built binary with -healthcheck in env and returns its exit status
// and output.
func runHealthcheck(t *testing.T, bin string, env []string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), "-healthcheck")
	cmd.Env = env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("%s -healthcheck took %v; its probe gives up after 3s", bin, took)
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("%s -healthcheck: %v", bin, err)
	return -1, ""
}

// peakRSS is a process's peak resident set (VmHWM) in MiB.
func peakRSS(t *testing.T, s *Suite, name string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.procs[name].cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb >> 10
		}
	}
	t.Fatalf("no VmHWM for %s", name)
	return 0
}

// logLine returns the first line of logs that holds every one of parts ("" when none does).
func logLine(logs string, parts ...string) string {
	for _, l := range strings.Split(logs, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return l
		}
	}
	return ""
}

// running says whether pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// startToolhost runs the zest-toolhost binary alone, with env added to its environment, and
// returns its client and process (killed at cleanup).
func startToolhost(t *testing.T, env ...string) (toolhostv1.ToolHostServiceClient, *proc) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(filepath.Join(binDir, "zest-toolhost"), "-toolhost-stop-grace", "1s")
	cmd.Env = append(append(os.Environ(), "ZEST_TOOLHOST_ADDR="+addr, "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=", "ZEST_SERVICE_KEY="+serviceKey), env...)
	p := startProc(t, "zest-toolhost", cmd, false)
	t.Cleanup(func() { p.stop(syscall.SIGKILL, 15*time.Second) })
	cc, err := grpcdial.Dial(addr, serviceKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c := toolhostv1.NewToolHostServiceClient(cc)
	waitfor.NoError(t, 10*time.Second, func() error {
		_, err := c.ListServers(t.Context(), &toolhostv1.ListServersRequest{})
		return err
	})
	return c, p
}

func ensure(t *testing.T, c toolhostv1.ToolHostServiceClient, id, command string, args ...string) *toolhostv1.ServerStatus {
	t.Helper()
	return ensureSpec(t, c, &toolhostv1.ServerSpec{Id: id, Command: command, Args: args, TimeoutMs: 30000})
}

func ensureSpec(t *testing.T, c toolhostv1.ToolHostServiceClient, spec *toolhostv1.ServerSpec) *toolhostv1.ServerStatus {
	t.Helper()
	id := spec.GetId()
	r, err := c.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: spec})
	if err != nil {
		t.Fatalf("EnsureStarted %s: %v", id, err)
	}
	return r.GetStatus()
}

// callText calls a tool and returns the text of its answer.
func callText(t *testing.T, c toolhostv1.ToolHostServiceClient, id, tool string) string {
	t.Helper()
	p, _ := json.Marshal(map[string]any{"name": tool, "arguments": map[string]any{}})
	r, err := c.Call(t.Context(), &toolhostv1.CallRequest{Id: id, Method: "tools/call", Params: p})
	if err != nil {
		t.Fatalf("%s on %s: %v", tool, id, err)
	}
	var res struct{ Content []struct{ Text string } }
	if err := json.Unmarshal(r.GetResult(), &res); err != nil || len(res.Content) != 1 {
		t.Fatalf("%s on %s: %s %v", tool, id, r.GetResult(), err)
	}
	return res.Content[0].Text
}

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

func dialService(t *testing.T, addr, key string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpcdial.Dial(addr, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}
