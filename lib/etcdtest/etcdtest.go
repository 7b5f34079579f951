// Package etcdtest runs a real etcd cluster for a test: 1 or 3 members as separate processes
// on 127.0.0.1, data under t.TempDir(), every process killed and reaped when the test ends.
// Members can be killed (SIGKILL) and restarted on the same data and ports, so that tests
// exercise what a crash does, not what a mock says it does. StartTLS serves the client URLs
// over https and requires client certificates, from a test CA that NewCerts generates.
//
// The binary is testenv.Etcd: $ZEST_ETCD_BIN, else <repo>/.bin/etcd (`make etcd` builds it
// from the pinned module in scripts/etcd). When it is missing the test is skipped, or fails
// when ZEST_REQUIRE_ALL=1 (make test sets it: CI must fail, not skip).
package etcdtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
)

// Timing of the members: a heartbeat every 50 ms and an election after 500 ms without one, so
// a killed leader is replaced in about half a second (etcd's defaults, 100 ms and 1 s, double
// that). fsync stays on: what a test of a crash checks is durability.
const (
	HeartbeatInterval = 50 * time.Millisecond
	ElectionTimeout   = 500 * time.Millisecond
)

// QuotaBackendBytes caps each member's database (etcd refuses writes past it, as it would in
// production at its own quota): 64 MiB is plenty for a test and keeps a runaway one small.
const QuotaBackendBytes = 64 << 20

// startTimeout bounds how long a member (or the whole cluster) may take to answer /health.
const startTimeout = 15 * time.Second

// stopGrace is how long Stop waits after SIGTERM before SIGKILL. A member of a cluster takes
// a second or more to stop on its own (it waits up to 1 s for its peers' connections to
// close, and a leader tries to hand over to peers that are stopping too); a test's cluster,
// about to be deleted, holds nothing worth that wait.
const stopGrace = 500 * time.Millisecond

// startAttempts: a free port found by listening on :0 can be taken by another process before
// etcd binds it; the whole cluster then starts again on new ports, at most this many times.
const startAttempts = 3

// TB is what Start needs of a test: testing.TB has it, and a program that is not a test (the
// benchmarks) can give its own.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
	Cleanup(func())
	Failed() bool
}

var _ TB = testing.TB(nil)

// Cluster is a running etcd cluster.
type Cluster struct {
	t       TB
	bin     string
	certs   *Certs // nil: plaintext client URLs
	members []*member
}

type member struct {
	name       string
	dir        string // data dir
	logPath    string // stdout and stderr of every run, appended
	clientPort int
	peerPort   int
	scheme     string // of the client URL: "http" or "https"
	args       []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd is reaped
}

// Start runs a cluster of n members (1 or 3) and returns once every member answers /health.
// The cluster stops when the test ends.
func Start(t TB, n int) *Cluster {
	t.Helper()
	return start(t, n, nil)
}

// start is Start, with client TLS when certs is not nil (StartTLS).
func start(t TB, n int, certs *Certs) *Cluster {
	t.Helper()
	if n != 1 && n != 3 {
		t.Fatalf("etcdtest.Start: %d members; want 1 or 3", n)
	}
	scheme := "http"
	if certs != nil {
		scheme = "https"
	}
	bin := testenv.Need(t, testenv.Etcd, "it runs a real etcd cluster")
	root := t.TempDir()
	var lastErr error
	for attempt := range startAttempts {
		c := &Cluster{t: t, bin: bin, certs: certs}
		ports, err := freePorts(2 * n)
		if err != nil {
			t.Fatal(err)
		}
		token := randomToken()
		var initial []string
		for i := range n {
			m := &member{
				name: fmt.Sprintf("m%d", i), dir: filepath.Join(root, fmt.Sprintf("try%d-m%d", attempt, i)),
				clientPort: ports[2*i], peerPort: ports[2*i+1], scheme: scheme,
			}
			m.logPath = m.dir + ".log"
			c.members = append(c.members, m)
			initial = append(initial, m.name+"="+m.peerURL())
		}
		for _, m := range c.members {
			m.args = []string{
				"--name", m.name, "--data-dir", m.dir,
				"--listen-client-urls", m.clientURL(), "--advertise-client-urls", m.clientURL(),
				"--listen-peer-urls", m.peerURL(), "--initial-advertise-peer-urls", m.peerURL(),
				"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
				"--initial-cluster-token", token,
				"--heartbeat-interval", strconv.Itoa(int(HeartbeatInterval / time.Millisecond)),
				"--election-timeout", strconv.Itoa(int(ElectionTimeout / time.Millisecond)),
				"--quota-backend-bytes", strconv.Itoa(QuotaBackendBytes),
				"--log-level", "error",
			}
			if certs != nil {
				m.args = append(m.args, certs.serverArgs()...)
			}
		}
		// Every started process is stopped when the test ends, whatever happens next.
		t.Cleanup(c.Stop)
		t.Cleanup(func() {
			if t.Failed() {
				c.logTails()
			}
		})
		deadline := time.Now().Add(startTimeout)
		lastErr = nil
		// One member after another, each once it serves its peers: a new member asks every
		// peer whether it was bootstrapped already, and waits 1 s for one that has opened its
		// port but serves nothing yet; started all at once, the cluster often took 2 s more.
		for _, m := range c.members {
			if err := c.start(m); err != nil {
				t.Fatal(err)
			}
			if lastErr = c.waitServing(m, m.peerURL()+"/members", nil, deadline); lastErr != nil {
				break
			}
		}
		for _, m := range c.members {
			if lastErr != nil {
				break
			}
			lastErr = c.waitServing(m, m.clientURL()+"/health", checkHealth, deadline)
		}
		if lastErr == nil {
			return c
		}
		c.Stop()
		if !strings.Contains(readTail(c.members, 4096), "address already in use") {
			break
		}
	}
	t.Fatalf("etcd cluster of %d did not start: %v", n, lastErr)
	return nil
}

// Endpoints returns the members' client addresses, host:port (as etcd's Go client takes them).
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = "127.0.0.1:" + strconv.Itoa(m.clientPort)
	}
	return out
}

// ClientURL returns member i's client URL, http://127.0.0.1:port (https:// after StartTLS).
func (c *Cluster) ClientURL(i int) string { return c.members[i].clientURL() }

// Kill sends SIGKILL to member i and returns once the process is reaped. Killing a member that
// is not running is a no-op.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
	m.cmd = nil
}

// Restart starts member i again, on its data dir and ports, after Kill, and returns once it
// answers /health (it has rejoined the cluster and has a leader).
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	m := c.members[i]
	if err := c.start(m); err != nil {
		c.t.Fatal(err)
	}
	if err := c.waitHealthy(m, time.Now().Add(startTimeout)); err != nil {
		c.t.Fatalf("restarting etcd member %d: %v", i, err)
	}
}

// Stop ends every member, all at once: SIGTERM, then SIGKILL after stopGrace; every process
// is reaped. Start registers it with t.Cleanup; calling it earlier is allowed.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Go(m.stop)
	}
	wg.Wait()
}

func (m *member) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(stopGrace):
		_ = m.cmd.Process.Signal(syscall.SIGKILL)
		<-m.exited
	}
	m.cmd = nil
}

func (m *member) clientURL() string { return m.scheme + "://127.0.0.1:" + strconv.Itoa(m.clientPort) }
func (m *member) peerURL() string   { return "http://127.0.0.1:" + strconv.Itoa(m.peerPort) }

// start runs m's process; a goroutine reaps it and closes m.exited.
func (c *Cluster) start(m *member) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return fmt.Errorf("etcd member %s is already running (Kill it first)", m.name)
	}
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start etcd member %s: %w", m.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	m.cmd, m.exited = cmd, exited
	return nil
}

// waitHealthy waits until m answers /health (see checkHealth), exits, or deadline passes.
func (c *Cluster) waitHealthy(m *member, deadline time.Time) error {
	return c.waitServing(m, m.clientURL()+"/health", checkHealth, deadline)
}

// waitServing polls GET url until it answers 200 and check, when not nil, accepts the body;
// m exiting or deadline passing ends the wait with an error.
func (c *Cluster) waitServing(m *member, url string, check func([]byte) error, deadline time.Time) error {
	m.mu.Lock()
	exited := m.exited
	m.mu.Unlock()
	// A member accepts connections before it serves them (it waits to join the cluster): a
	// short timeout polls again instead of waiting on a connection that may never be served.
	client := c.httpClient(250 * time.Millisecond)
	var exitErr error
	_, err := waitfor.Poll(time.Until(deadline), func() error {
		select {
		case <-exited:
			exitErr = fmt.Errorf("etcd member %s exited while starting; its log ends:\n%s", m.name, tail(m.logPath, 2048))
			return waitfor.Stop(exitErr)
		default:
		}
		return get(client, url, check)
	})
	if err != nil && exitErr == nil {
		return fmt.Errorf("etcd member %s: %s %w; its log ends:\n%s", m.name, url, err, tail(m.logPath, 2048))
	}
	return err
}

func get(client *http.Client, url string, check func([]byte) error) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	if check != nil {
		return check(body)
	}
	return nil
}

// checkHealth accepts etcd's /health answer {"health":"true"}: the member has a leader and
// serves a linearizable read.
func checkHealth(body []byte) error {
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("/health: %w", err)
	}
	if h.Health != "true" {
		return fmt.Errorf("/health: %s %s", h.Health, h.Reason)
	}
	return nil
}

// health checks url's /health once.
func health(client *http.Client, url string) error {
	return get(client, url+"/health", checkHealth)
}

// freePorts returns n distinct loopback ports that were free a moment ago (held open together
// so that none is returned twice), outside the kernel's ephemeral range: Restart binds a
// member's ports again, and no other process is given them while it is down
// (testenv.ListenFixed).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range n {
		l, err := testenv.ListenFixed()
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// randomToken keeps members of two clusters from ever joining each other.
func randomToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "etcdtest-" + hex.EncodeToString(b)
}

// logTails logs the end of every member's log (for a failed test).
func (c *Cluster) logTails() {
	for _, m := range c.members {
		if t := tail(m.logPath, 4096); t != "" {
			c.t.Logf("etcd member %s log (end):\n%s", m.name, t)
		}
	}
}

func readTail(ms []*member, n int) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(tail(m.logPath, n))
	}
	return b.String()
}

// tail returns the last n bytes of the file at path ("" when it cannot be read).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// Leader returns the index of the member that leads the cluster, as the members say through
// etcd's JSON gateway (POST /v3/maintenance/status); -1 when none answers that it leads.
func (c *Cluster) Leader() int {
	client := c.httpClient(time.Second)
	for i, m := range c.members {
		resp, err := client.Post(m.clientURL()+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
		if err != nil {
			continue
		}
		var st struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
			Leader string `json:"leader"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err == nil && st.Leader != "" && st.Leader == st.Header.MemberID {
			return i
		}
	}
	return -1
}

// PID returns member i's process id (0 when it is not running).
func (c *Cluster) PID(i int) int {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}
