// Package e2e drives the four built Zest binaries as separate processes on free loopback
// ports, as a user would: over HTTP, through the edge.
//
// Its files are named by area; `make e2e AREA=<area>` runs the tests of one:
//
//	suite_      the harness every area shares: processes and ports (suite_test.go), HTTP,
//	            the admin API, MCP clients, the npm peers, metrics, the browser
//	mcp_        the MCP endpoints (/mcp, /mcp/servers/{id}, /mcp/presets/{id}), their eras,
//	            relays and bridges, conformance suites and real clients
//	admin_      the admin API and zestctl: servers, their config, approvals, the audit trail,
//	            the activity, filters, output hygiene, the one door
//	console_    the web console in a real browser
//	edge_       the edge's own routes: REST under every prefix, request ids, keys, GUI3's calls
//	inference_  models, chat, OpenAI routes, media, engines, size limits, the chat loop's tools
//	cluster_    replicas, balancing, failover of tool hosts, following the registry, chaos
//	security_   budgets and rate limits, keys before bodies, secrets, the sandbox
//	ops_        metrics, traces, health checks, make run
//
// A test that needs what not every machine has (the npm peers, node, Chromium, Prometheus,
// root, bubblewrap) says so with lib/testenv: it skips without it, and fails under make test.
package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
)

var binDir string

// serviceKey is ZEST_SERVICE_KEY of every suite: the tool host takes no other credential.
const serviceKey = "e2e-service-key-0123456789abcdef"

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

// runSuite runs the tests and returns their exit code, after its deferred calls (the
// binaries' temporary directory) have run: os.Exit would skip them.
func runSuite(m *testing.M) int {
	binDir = os.Getenv("ZEST_BIN_DIR")
	if binDir == "" {
		// Build the binaries when the test runs on its own (make e2e passes ZEST_BIN_DIR).
		dir, err := os.MkdirTemp("", "zest-e2e-bin")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		root := repoRoot()
		// Each from its module's directory: zestctl's is cli/ (docs/decisions.md).
		for _, b := range []struct{ module, pkg string }{
			{".", "./gateway/cmd/zest-gateway"}, {".", "./services/inference/cmd/zest-inference"},
			{".", "./services/mcpgateway/cmd/zest-mcpgateway"}, {".", "./services/toolhost/cmd/zest-toolhost"},
			{"cli", "./cmd/zestctl"},
		} {
			pkg := b.pkg
			cmd := exec.Command("go", "build", "-o", dir+"/", pkg)
			cmd.Dir = filepath.Join(root, b.module)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "build", pkg, err)
				return 1
			}
		}
		binDir = dir
	}
	metricsOff() // suite_metrics_test.go
	// The suite runs as root and its fixtures lie in root's private temporary directories, so
	// its tool hosts keep servers as root (the default runs them as nobody: TestUnsandboxedServer
	// CannotReadTheToolHost, which sets it back).
	os.Setenv("ZEST_TOOLHOST_SERVER_UID", "0")
	return m.Run()
}

// Suite is one running copy of Zest.
type Suite struct {
	URL     string
	DataDir string
	Env     []string
	t       *testing.T
	key     string
	procs   map[string]*proc
}

// Ports. A port is never closed and looked up again (another process could take it in
// between): the test opens the listening socket and hands it to the service that listens
// there (socket activation: LISTEN_FDS=1, the socket as fd 3; see lib/listen), which then
// owns it: when the service dies its port refuses connections, as in production. A restarted
// service binds its address again itself; the port is outside the kernel's ephemeral range
// (testenv.ListenFixed), so no other process's port-0 listen or outgoing connection is given
// it while the service is down.
var (
	socketsMu sync.Mutex
	sockets   = map[string]*os.File{} // address → listening socket not yet handed over
)

// freeAddr reserves a loopback address for a service the test starts there.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := testenv.ListenFixed() // outside the ephemeral range: a restart binds it again
	if err != nil {
		t.Fatal(err)
	}
	f, err := l.(*net.TCPListener).File()
	l.Close() // f holds the socket
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	socketsMu.Lock()
	sockets[addr] = f
	socketsMu.Unlock()
	t.Cleanup(func() { takeSocket(addr).Close() })
	return addr
}

// takeSocket removes and returns the socket reserved for addr (nil when there is none).
func takeSocket(addr string) *os.File {
	socketsMu.Lock()
	defer socketsMu.Unlock()
	f := sockets[addr]
	delete(sockets, addr)
	return f
}

// unusedAddr returns a loopback address where no service of the test will listen: the test
// holds it and refuses every connection at once, as a stopped service's port does.
func unusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // a reset, as a refused connection
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// listenVars names the variable each service binary listens on.
var listenVars = map[string]string{
	"zest-gateway": "ZEST_EDGE_ADDR", "zest-mcpgateway": "ZEST_MCPGATEWAY_ADDR",
	"zest-inference": "ZEST_INFERENCE_ADDR", "zest-toolhost": "ZEST_TOOLHOST_ADDR",
}

// repoRoot is the repository's root directory.
func repoRoot() string {
	root, err := testenv.RepoRoot()
	if err != nil {
		panic(err)
	}
	return root
}

// envOf returns the value an environment gives a variable (the last one wins, as for exec).
func envOf(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if val, ok := strings.CutPrefix(kv, name+"="); ok {
			v = val
		}
	}
	return v
}

// handOver gives cmd (service binary name) the socket reserved for the address it listens on,
// if it was not handed over already, and returns what to call once cmd has started: the
// test's copy is closed then, so that the service owns the socket.
func handOver(cmd *exec.Cmd, name string) (started func()) {
	f := takeSocket(envOf(cmd.Env, listenVars[name]))
	if f == nil {
		return func() {} // a restart: the service binds its address itself
	}
	cmd.ExtraFiles = []*os.File{f}
	cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], "LISTEN_FDS=1")
	return func() { f.Close() }
}

// suiteEnv returns the environment of a suite on free ports with data in a temp dir.
func suiteEnv(t *testing.T, extra ...string) (env []string, edge, dataDir string) {
	t.Helper()
	edge = freeAddr(t)
	dataDir = filepath.Join(t.TempDir(), "data")
	env = append(os.Environ(),
		"ZEST_EDGE_ADDR="+edge,
		"ZEST_PUBLIC_URL=http://"+edge, // the base of the OAuth resource URLs, when a test sets ZEST_OAUTH_ISSUER
		"ZEST_INFERENCE_ADDR="+freeAddr(t),
		"ZEST_MCPGATEWAY_ADDR="+freeAddr(t),
		"ZEST_TOOLHOST_ADDR="+freeAddr(t),
		"ZEST_DATA_DIR="+dataDir,
		"ZEST_LOG_LEVEL=warn",
		"LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=", "LEMONADE_ALLOWED_ORIGINS=",
		"ZEST_SERVICE_KEY="+serviceKey,
	)
	return append(env, extra...), edge, dataDir
}

// startSuite starts the four binaries and stops them (SIGTERM, then SIGKILL) at cleanup,
// failing the test when one does not exit cleanly.
func startSuite(t *testing.T, extra ...string) *Suite {
	t.Helper()
	env, edge, dataDir := suiteEnv(t, extra...)
	s := &Suite{URL: "http://" + edge, DataDir: dataDir, Env: env, t: t, procs: map[string]*proc{}}
	for _, name := range []string{"zest-inference", "zest-toolhost", "zest-mcpgateway", "zest-gateway"} {
		s.Start(name)
	}
	t.Cleanup(func() {
		for _, p := range s.procs {
			p.stopChecked(t)
		}
	})
	s.key = envOf(extra, "LEMONADE_API_KEY")
	s.WaitHealthy()
	return s
}

// WaitHealthy waits until the edge reports every service serving.
func (s *Suite) WaitHealthy() {
	s.t.Helper()
	waitfor.NoError(s.t, 15*time.Second, func() error {
		req, _ := http.NewRequest("GET", s.URL+"/api/v1/health", nil)
		if s.key != "" {
			req.Header.Set("Authorization", "Bearer "+s.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("health %d %s", resp.StatusCode, b)
		}
		return nil
	})
}

// proc is one process a test started: its output, and done, which receives its exit error
// and is closed once it has exited. Every test starts its processes with startProc.
type proc struct {
	name  string
	cmd   *exec.Cmd
	logs  *logBuffer
	done  chan error
	group bool // cmd leads a process group of its own; signals go to the whole group
}

// startProc starts cmd, keeping what it writes. A service binary (name in listenVars) is
// handed the socket reserved for its address; with group, cmd leads a process group of its
// own (its children are signalled with it).
func startProc(t *testing.T, name string, cmd *exec.Cmd, group bool) *proc {
	t.Helper()
	started := func() {}
	if _, service := listenVars[name]; service {
		started = handOver(cmd, name)
	}
	if group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	err := cmd.Start()
	started()
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, logs: logs, done: make(chan error, 1), group: group}
	go func() { p.done <- cmd.Wait(); close(p.done) }()
	return p
}

// signal sends sig to the process (or its group).
func (p *proc) signal(sig syscall.Signal) error {
	if p.group {
		return syscall.Kill(-p.cmd.Process.Pid, sig)
	}
	return p.cmd.Process.Signal(sig)
}

// exited waits up to d for the process to exit.
func (p *proc) exited(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// stop sends sig and waits up to grace for the process to exit, then kills it (its group)
// and waits. It returns the exit error and whether the process exited within grace; a
// process that had exited already is left as it is.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) (err error, inTime bool) {
	if !p.running() {
		return nil, true
	}
	_ = p.signal(sig)
	select {
	case err := <-p.done:
		return err, true
	case <-time.After(grace):
		_ = p.signal(syscall.SIGKILL)
		<-p.done
		return nil, false
	}
}

// logBuffer holds what a process writes, read by the test while the process runs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Start starts (or restarts) one service binary.
func (s *Suite) Start(name string) {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name))
	cmd.Env = s.Env
	s.procs[name] = startProc(s.t, name, cmd, false)
}

// Kill sends sig to one service and waits for it to exit.
func (s *Suite) Kill(name string, sig syscall.Signal) {
	s.t.Helper()
	p := s.procs[name]
	_ = p.signal(sig)
	if !p.exited(15 * time.Second) {
		s.t.Fatalf("%s did not exit after %v", name, sig)
	}
}

// Logs returns what a service wrote so far.
func (s *Suite) Logs(name string) string { return s.procs[name].logs.String() }

// stopChecked stops a service of the suite: SIGTERM, and a test error when it does not exit
// cleanly within 15 s.
func (p *proc) stopChecked(t *testing.T) {
	err, inTime := p.stop(syscall.SIGTERM, 15*time.Second)
	switch {
	case !inTime:
		t.Errorf("%s did not stop within 15s of SIGTERM; killed. logs:\n%s", p.name, p.logs.String())
	case err != nil:
		t.Errorf("%s exited with %v after SIGTERM; logs:\n%s", p.name, err, p.logs.String())
	}
}
