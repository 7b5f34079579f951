package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

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

// stop sends sig and waits for the service to exit (killing it after 15 s).
func (s *service) stop(sig syscall.Signal) { s.p.stop(sig, 15*time.Second) }

// TestOneSessionAcrossReplicas: two edges, each in front of its own mcpgateway (separate
// data dirs, one shared ZEST_SESSION_KEY), one inference node and one tool host. A session
// opened on one edge is served by both, and still after both front ends restart.
func TestOneSessionAcrossReplicas(t *testing.T) {
	base := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=",
		"ZEST_SESSION_KEY=qrvKk0m7sHq1kVQ1n3m8p0Wb7cJ2xN4yT6uE9aZ5dLw",
		"ZEST_INFERENCE_ADDR="+freeAddr(t), "ZEST_TOOLHOST_ADDR="+freeAddr(t))
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	runService(t, "zest-inference", base)
	runService(t, "zest-toolhost", base)
	var edges []*service
	var urls []string
	var gateways []*service
	for i := range 2 {
		mg := freeAddr(t)
		edge := freeAddr(t)
		gateways = append(gateways, runService(t, "zest-mcpgateway", with("ZEST_MCPGATEWAY_ADDR="+mg, "ZEST_DATA_DIR="+filepath.Join(t.TempDir(), "data"))))
		edges = append(edges, runService(t, "zest-gateway", with("ZEST_MCPGATEWAY_ADDR="+mg, "ZEST_EDGE_ADDR="+edge)))
		urls = append(urls, "http://"+edge)
		_ = i
	}
	for _, u := range urls {
		waitFor(t, 15*time.Second, func() error {
			_, err := getOK(u + "/api/v1/health")
			return err
		})
	}
	s0 := &Suite{URL: urls[0], t: t}
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
		callVia(urls[i%2])
	}
	// Restart both the second edge and the first mcpgateway.
	edges[1].stop(syscall.SIGTERM)
	gateways[0].stop(syscall.SIGKILL)
	edges[1].start()
	gateways[0].start()
	for _, u := range urls {
		waitFor(t, 15*time.Second, func() error {
			_, err := getOK(u + "/api/v1/health")
			return err
		})
	}
	for i := range 6 {
		callVia(urls[i%2])
	}
}
