package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/envref"
	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/internal/fixturebin"
	"github.com/zestmcp/zest/services/toolhost/stdio"
	"google.golang.org/protobuf/encoding/protojson"
)

var fixture string

// fixtureTools is the number of tools mcpfixture lists.
const fixtureTools = 18

func TestMain(m *testing.M) {
	bin, cleanup, err := fixturebin.Build()
	if err != nil {
		panic(err)
	}
	fixture = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func newSup(t *testing.T, mod func(*Config)) *Supervisor {
	t.Helper()
	cfg := DefaultConfig()
	cfg.StopGrace = time.Second
	if mod != nil {
		mod(&cfg)
	}
	s := New(cfg)
	t.Cleanup(s.Close)
	return s
}

func spec(id string, args ...string) *toolhostv1.ServerSpec {
	return &toolhostv1.ServerSpec{Id: id, Command: fixture, Args: args, TimeoutMs: 10000}
}

func echo(t *testing.T, s *Supervisor, id, msg string) (string, error) {
	t.Helper()
	p, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]any{"message": msg}})
	res, err := s.Call(t.Context(), id, "tools/call", p, 0, nil)
	if err != nil {
		return "", err
	}
	var r struct{ Content []struct{ Text string } }
	json.Unmarshal(res, &r)
	if len(r.Content) == 0 {
		return "", fmt.Errorf("result %s", res)
	}
	return r.Content[0].Text, nil
}

func TestHandshakeAndPagedTools(t *testing.T) {
	s := newSup(t, nil)
	st, err := s.EnsureStarted(t.Context(), spec("fx", "-pages", "3"), false)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState() != toolhostv1.ServerState_SERVER_STATE_READY || st.GetPid() == 0 || st.GetProtocolVersion() != "2025-11-25" ||
		st.GetServerInfo().GetFields()["name"].GetStringValue() != "mcpfixture" || st.GetInstructions() != "mcpfixture is a test server" {
		t.Fatalf("status = %v", st)
	}
	tools, err := s.ListTools(t.Context(), "fx")
	if err != nil || len(tools) != fixtureTools {
		t.Fatalf("tools: %d, %v (want all %d across 3 pages)", len(tools), err, fixtureTools)
	}
	// Same spec again: the same child.
	st2, err := s.EnsureStarted(t.Context(), spec("fx", "-pages", "3"), false)
	if err != nil || st2.GetPid() != st.GetPid() {
		t.Fatalf("second EnsureStarted: pid %d vs %d, %v", st2.GetPid(), st.GetPid(), err)
	}
	// Changed spec: a new child.
	st3, err := s.EnsureStarted(t.Context(), spec("fx", "-pages", "1"), false)
	if err != nil || st3.GetPid() == st.GetPid() {
		t.Fatalf("changed spec kept pid %d: %v", st3.GetPid(), err)
	}
}

func TestSIGKILLMidCallThenNextCallRestarts(t *testing.T) {
	s := newSup(t, nil)
	st, err := s.EnsureStarted(t.Context(), spec("fx"), false)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := s.Call(t.Context(), "fx", "tools/call", json.RawMessage(`{"name":"hang"}`), 0, nil)
		errc <- err
	}()
	waitfor.True(t, 10*time.Second, "the call in flight", func() bool {
		srv, err := s.get("fx")
		if err != nil {
			return false
		}
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.conn != nil && srv.conn.InFlight() == 1
	})
	syscall.Kill(int(st.GetPid()), syscall.SIGKILL)
	select {
	case err := <-errc:
		if !errors.Is(err, stdio.ErrExited) || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("in-flight call: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("in-flight call not failed within 1s of SIGKILL")
	}
	got, err := echo(t, s, "fx", "again")
	if err != nil || got != "again" {
		t.Fatalf("next call: %q %v", got, err)
	}
	st2, _ := s.Status("fx")
	if st2.GetRestartCount() != 1 || st2.GetPid() == st.GetPid() || !strings.Contains(st2.GetLastError(), "killed") {
		t.Fatalf("status after restart = %v", st2)
	}
}

func TestCrashLoopIsReportedNotSpun(t *testing.T) {
	s := newSup(t, func(c *Config) { c.BackoffBase = time.Hour })
	bad := &toolhostv1.ServerSpec{Id: "bad", Command: "/bin/sh", Args: []string{"-c", "echo boom >&2; exit 7"}, TimeoutMs: 5000}
	_, err := s.EnsureStarted(t.Context(), bad, false)
	if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "exit status 7") {
		t.Fatalf("first start: %v", err)
	}
	_, err = s.Call(t.Context(), "bad", "tools/list", nil, 0, nil) // first crash: restart at once
	if !errors.Is(err, ErrHandshake) {
		t.Fatalf("second start: %v", err)
	}
	began := time.Now()
	_, err = s.Call(t.Context(), "bad", "tools/list", nil, 0, nil)
	if !errors.Is(err, ErrCrashLoop) || !strings.Contains(err.Error(), "next restart in") {
		t.Fatalf("third: %v, want ErrCrashLoop", err)
	}
	if time.Since(began) > 100*time.Millisecond {
		t.Fatal("a crash-looping server must be refused at once, not waited for")
	}
	st, _ := s.Status("bad")
	if st.GetState() != toolhostv1.ServerState_SERVER_STATE_FAILED || !strings.Contains(st.GetStderrTail(), "boom") {
		t.Fatalf("status = %v", st)
	}
}

func TestSecretsAreResolvedButNeverShown(t *testing.T) {
	var logs bytes.Buffer
	const secret = "hunter2-very-secret-value"
	s := newSup(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.LookupEnv = func(k string) (string, bool) {
			if k == "TOOLHOST_TEST_SECRET" {
				return secret, true
			}
			return "", false
		}
	})
	raw := spec("fx")
	raw.Env = map[string]string{"API_TOKEN": secret}
	if _, err := s.EnsureStarted(t.Context(), raw, false); !errors.Is(err, envref.ErrRawValue) || strings.Contains(err.Error(), secret) {
		t.Fatalf("raw value: %v", err)
	}
	missing := spec("fx")
	missing.Env = map[string]string{"API_TOKEN": "${NOT_SET_ANYWHERE}"}
	if _, err := s.EnsureStarted(t.Context(), missing, false); err == nil || err.Error() != "Required MCP environment variable is not set: NOT_SET_ANYWHERE" {
		t.Fatalf("missing: %v", err)
	}
	good := spec("fx")
	good.Env = map[string]string{"API_TOKEN": "${TOOLHOST_TEST_SECRET}"}
	st, err := s.EnsureStarted(t.Context(), good, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Call(t.Context(), "fx", "tools/call", json.RawMessage(`{"name":"env","arguments":{"name":"API_TOKEN"}}`), 0, nil)
	if err != nil || !strings.Contains(string(res), secret) {
		t.Fatalf("the child did not get the value: %s %v", res, err)
	}
	syscall.Kill(int(st.GetPid()), syscall.SIGKILL) // crash paths log too
	waitfor.True(t, 10*time.Second, "fx failed", func() bool {
		st, _ := s.Status("fx")
		return st.GetState() == toolhostv1.ServerState_SERVER_STATE_FAILED
	})
	all, _ := protojson.Marshal(&toolhostv1.ListServersResponse{Servers: s.List()})
	for what, text := range map[string]string{"status": string(all), "logs": logs.String()} {
		if strings.Contains(text, secret) {
			t.Fatalf("%s show the secret value: %s", what, text)
		}
	}
}

func TestListChangedRefreshesTools(t *testing.T) {
	s := newSup(t, nil)
	if _, err := s.EnsureStarted(t.Context(), spec("fx"), false); err != nil {
		t.Fatal(err)
	}
	events := s.Watch(t.Context(), "fx")
	if _, err := s.Call(t.Context(), "fx", "tools/call", json.RawMessage(`{"name":"list_changed"}`), 0, nil); err != nil {
		t.Fatal(err)
	}
	// A watcher may first get the server's status (its ready state can be published after
	// EnsureStarted returns): wait for the notification itself.
	timeout := time.After(5 * time.Second)
	for seen := false; !seen; {
		select {
		case ev := <-events:
			switch {
			case strings.Contains(string(ev.Notification), "list_changed"):
				seen = true
			case len(ev.Notification) > 0:
				t.Fatalf("event %+v", ev)
			}
		case <-timeout:
			t.Fatal("no list_changed event")
		}
	}
	tools, _ := s.ListTools(t.Context(), "fx")
	if len(tools) != fixtureTools+1 || !strings.Contains(string(tools[fixtureTools]), "added_later") {
		t.Fatalf("tools not refreshed: %d", len(tools))
	}
}

func TestIdleStopAndLazyStart(t *testing.T) {
	s := newSup(t, func(c *Config) { c.IdleTimeout = 200 * time.Millisecond; c.LazyStart = true })
	st, err := s.EnsureStarted(t.Context(), spec("fx"), false)
	if err != nil || st.GetPid() != 0 || st.GetState() != toolhostv1.ServerState_SERVER_STATE_STOPPED {
		t.Fatalf("lazy start launched: %v %v", st, err)
	}
	if got, err := echo(t, s, "fx", "first"); err != nil || got != "first" {
		t.Fatalf("first call: %q %v", got, err)
	}
	waitfor.True(t, 10*time.Second, "fx stopped when idle", func() bool {
		st, _ := s.Status("fx")
		return st.GetState() == toolhostv1.ServerState_SERVER_STATE_STOPPED
	})
	if got, err := echo(t, s, "fx", "after idle"); err != nil || got != "after idle" {
		t.Fatalf("call after idle stop: %q %v", got, err)
	}
	if st, _ := s.Status("fx"); st.GetRestartCount() != 0 {
		t.Fatalf("an idle stop is not a crash: restart_count %d", st.GetRestartCount())
	}
}

func TestHandshakeTimeout(t *testing.T) {
	s := newSup(t, nil)
	slow := spec("slow", "-start-delay", "3s")
	slow.TimeoutMs = 1000
	began := time.Now()
	_, err := s.EnsureStarted(t.Context(), slow, false)
	if !errors.Is(err, ErrHandshake) || time.Since(began) > 2500*time.Millisecond {
		t.Fatalf("err = %v after %v", err, time.Since(began))
	}
}

func TestUnknownCommandNamesTheOSError(t *testing.T) {
	s := newSup(t, nil)
	_, err := s.EnsureStarted(t.Context(), &toolhostv1.ServerSpec{Id: "x", Command: "zest-no-such-command-anywhere"}, false)
	if !errors.Is(err, stdio.ErrLaunch) || !strings.Contains(err.Error(), "executable file not found in $PATH") {
		t.Fatalf("err = %v", err)
	}
}

func TestConcurrentFirstUseStartsOneChild(t *testing.T) {
	s := newSup(t, func(c *Config) { c.LazyStart = true })
	if _, err := s.EnsureStarted(t.Context(), spec("fx"), false); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := echo(t, s, "fx", fmt.Sprint(i)); err != nil || got != fmt.Sprint(i) {
				t.Errorf("call %d: %q %v", i, got, err)
			}
		}()
	}
	wg.Wait()
	if st, _ := s.Status("fx"); st.GetRestartCount() != 0 || st.GetPid() == 0 {
		t.Fatalf("status = %v", st)
	}
}

// TestLaunchOutlivesTheCallerWhoStartedIt: the caller whose call launched a slow-starting
// server gives up; the launch goes on for the others, and nothing counts as a crash.
func TestLaunchOutlivesTheCallerWhoStartedIt(t *testing.T) {
	s := newSup(t, func(c *Config) { c.LazyStart = true })
	if _, err := s.EnsureStarted(t.Context(), spec("slow", "-start-delay", "1500ms"), false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	impatient := make(chan error, 1)
	go func() { // the first use: this call launches the child
		p := json.RawMessage(`{"name":"echo","arguments":{"message":"impatient"}}`)
		_, err := s.Call(ctx, "slow", "tools/call", p, 0, nil)
		impatient <- err
	}()
	waitfor.True(t, 10*time.Second, "slow starting", func() bool {
		st, _ := s.Status("slow")
		return st.GetState() == toolhostv1.ServerState_SERVER_STATE_STARTING
	})
	first := make(chan error, 1)
	go func() { _, err := echo(t, s, "slow", "first"); first <- err }() // waits with its own context
	cancel()
	select {
	case err := <-impatient:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the caller who gave up: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("a cancelled caller still waits for the launch")
	}
	if st, _ := s.Status("slow"); st.GetState() != toolhostv1.ServerState_SERVER_STATE_STARTING {
		t.Fatalf("after one caller gave up: %v", st)
	}
	if err := <-first; err != nil {
		t.Fatalf("a caller waiting for the same launch: %v", err)
	}
	if got, err := echo(t, s, "slow", "second"); err != nil || got != "second" {
		t.Fatalf("a later caller: %q %v", got, err)
	}
	st, _ := s.Status("slow")
	if st.GetState() != toolhostv1.ServerState_SERVER_STATE_READY || st.GetRestartCount() != 0 || st.GetLastError() != "" {
		t.Fatalf("status = %v, want READY with no restart and no error", st)
	}
}

// TestStopWhileStarting: a server stopped during its launch ends STOPPED, its child gone,
// and its waiters fail with ErrStopped, not a crash.
func TestStopWhileStarting(t *testing.T) {
	s := newSup(t, func(c *Config) { c.LazyStart = true })
	if _, err := s.EnsureStarted(t.Context(), spec("slow", "-start-delay", "1500ms"), false); err != nil {
		t.Fatal(err)
	}
	waiter := make(chan error, 1)
	go func() { _, err := echo(t, s, "slow", "x"); waiter <- err }()
	var pid int32
	waitfor.True(t, 10*time.Second, "slow starting with a pid", func() bool {
		st, _ := s.Status("slow")
		pid = st.GetPid()
		return st.GetState() == toolhostv1.ServerState_SERVER_STATE_STARTING && pid != 0
	})
	st, err := s.Stop("slow")
	if err != nil || st.GetState() != toolhostv1.ServerState_SERVER_STATE_STOPPED || st.GetRestartCount() != 0 {
		t.Fatalf("Stop = %v, %v", st, err)
	}
	if err := <-waiter; !errors.Is(err, ErrStopped) && !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("waiter: %v", err)
	}
	waitfor.True(t, 10*time.Second, "the child gone", func() bool { return syscall.Kill(int(pid), 0) != nil })
}

// TestStartFailureSaysWhy: a server that cannot start is reported with the line of its
// stderr that explains it, not with Node's version trailer; the status keeps stderr whole.
func TestStartFailureSaysWhy(t *testing.T) {
	testenv.Need(t, testenv.Node, "the failure it reports is Node's")
	s := newSup(t, nil)
	_, err := s.EnsureStarted(t.Context(), &toolhostv1.ServerSpec{Id: "missing", Command: "node", Args: []string{"/nonexistent.js"}, TimeoutMs: 10000}, false)
	if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "Cannot find module '/nonexistent.js'") || strings.Contains(err.Error(), "Node.js v") {
		t.Fatalf("err = %v", err)
	}
	st, _ := s.Status("missing")
	if !strings.Contains(st.GetLastError(), "Cannot find module") || !strings.Contains(st.GetStderrTail(), "Node.js v") ||
		!strings.Contains(st.GetStderrTail(), "    at ") {
		t.Fatalf("status: last_error %q, stderr_tail %q", st.GetLastError(), st.GetStderrTail())
	}
}

// TestSpecChangeWhileStarting: a spec changed while the old one is still launching voids
// that launch, but not its callers: a call waiting for it, and the EnsureStarted of the new
// spec, are served by a child of the new spec; the old child is gone.
func TestSpecChangeWhileStarting(t *testing.T) {
	slowSpec := spec("fx", "-start-delay", "1500ms")
	newSpec := spec("fx", "-pages", "1")
	startingPid := func(s *Supervisor) int32 {
		var pid int32
		waitfor.True(t, 10*time.Second, "fx starting with a pid", func() bool {
			st, _ := s.Status("fx")
			pid = st.GetPid()
			return st.GetState() == toolhostv1.ServerState_SERVER_STATE_STARTING && pid != 0
		})
		return pid
	}
	t.Run("a waiting call", func(t *testing.T) {
		s := newSup(t, func(c *Config) { c.LazyStart = true })
		if _, err := s.EnsureStarted(t.Context(), slowSpec, false); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			got string
			err error
		}
		waiter := make(chan answer, 1)
		go func() { got, err := echo(t, s, "fx", "after the change"); waiter <- answer{got, err} }() // launches the slow spec
		oldPid := startingPid(s)
		if _, err := s.EnsureStarted(t.Context(), newSpec, false); err != nil {
			t.Fatal(err)
		}
		if a := <-waiter; a.err != nil || a.got != "after the change" {
			t.Fatalf("the call waiting for the replaced launch: %q %v", a.got, a.err)
		}
		st, _ := s.Status("fx")
		if st.GetState() != toolhostv1.ServerState_SERVER_STATE_READY || st.GetPid() == oldPid || st.GetRestartCount() != 0 {
			t.Fatalf("status = %v, want READY in a new child (old pid %d), no restart counted", st, oldPid)
		}
		waitfor.True(t, 10*time.Second, "the old child gone", func() bool { return syscall.Kill(int(oldPid), 0) != nil })
	})
	t.Run("the new spec's EnsureStarted", func(t *testing.T) {
		s := newSup(t, nil)
		first := make(chan error, 1)
		go func() { _, err := s.EnsureStarted(t.Context(), slowSpec, false); first <- err }()
		oldPid := startingPid(s)
		st, err := s.EnsureStarted(t.Context(), newSpec, false)
		if err != nil || st.GetState() != toolhostv1.ServerState_SERVER_STATE_READY || st.GetPid() == oldPid {
			t.Fatalf("EnsureStarted of the new spec: %v, %v (old pid %d)", st, err, oldPid)
		}
		<-first // superseded: whatever it says, it must not hang
		if got, err := echo(t, s, "fx", "new"); err != nil || got != "new" {
			t.Fatalf("call after the change: %q %v", got, err)
		}
		waitfor.True(t, 10*time.Second, "the old child gone", func() bool { return syscall.Kill(int(oldPid), 0) != nil })
	})
}

// TestStopDrainedLetsCallsInFlightEnd: a server moved to another tool host is stopped with a
// drain, which waits for the calls in flight to end (they succeed), up to the drain time
// (a call that outlasts it fails, as with a plain Stop); a call that comes meanwhile is
// refused with ErrMoving, never admitted behind the drain's back.
func TestStopDrainedLetsCallsInFlightEnd(t *testing.T) {
	s := newSup(t, nil)
	if _, err := s.EnsureStarted(t.Context(), spec("fx"), false); err != nil {
		t.Fatal(err)
	}
	call := func(tool string, ms int) chan error {
		done := make(chan error, 1)
		p, _ := json.Marshal(map[string]any{"name": tool, "arguments": map[string]any{"ms": ms, "message": "m"}})
		go func() {
			_, err := s.Call(context.Background(), "fx", "tools/call", p, 0, nil)
			done <- err
		}()
		return done
	}
	waitInFlight := func(n int) {
		t.Helper()
		waitfor.True(t, 5*time.Second, fmt.Sprintf("%d calls in flight", n), func() bool {
			srv, err := s.get("fx")
			return err == nil && srv.admitted() == n
		})
	}
	slow := call("slow", 300)
	waitInFlight(1)
	began := time.Now()
	stopped := make(chan error, 1)
	go func() { _, err := s.StopDrained(t.Context(), "fx", 5*time.Second); stopped <- err }()
	// While it drains, a new call is refused without reaching the child.
	srv, _ := s.get("fx")
	waitfor.True(t, 10*time.Second, "the server draining", func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.draining })
	if err := <-call("echo", 0); !errors.Is(err, ErrMoving) {
		t.Fatalf("a call during the drain: %v, want ErrMoving", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := <-slow; err != nil {
		t.Fatalf("the call in flight failed on a drained stop: %v", err)
	}
	if d := time.Since(began); d > 3*time.Second {
		t.Fatalf("the drained stop took %v", d)
	}
	if _, err := s.Status("fx"); !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("the server is still known after the stop: %v", err)
	}

	// A call that outlasts the drain fails when the drain time is up.
	if _, err := s.EnsureStarted(t.Context(), spec("fx"), false); err != nil {
		t.Fatal(err)
	}
	hung := call("hang", 0)
	waitInFlight(1)
	began = time.Now()
	if _, err := s.StopDrained(t.Context(), "fx", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < 200*time.Millisecond {
		t.Fatalf("stopped after %v, before the drain time", d)
	}
	if err := <-hung; err == nil {
		t.Fatal("a call that outlasted the drain succeeded")
	}
	if _, err := s.StopDrained(t.Context(), "nope", time.Second); !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("unknown server: %v", err)
	}
}
