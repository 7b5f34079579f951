package stdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
	"github.com/zestmcp/zest/services/toolhost/internal/fixturebin"
	"github.com/zestmcp/zest/services/toolhost/shim"
)

var fixture string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == shim.Flag { // the test binary is the shim, as zest-toolhost is
		os.Exit(shim.Main(os.Args[2:]))
	}
	bin, cleanup, err := fixturebin.Build()
	if err != nil {
		panic(err)
	}
	fixture = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func start(t *testing.T, mod func(*Options)) *Conn {
	t.Helper()
	o := Options{Path: fixture, Env: os.Environ(), StopGrace: time.Second}
	if mod != nil {
		mod(&o)
	}
	c, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

func callTool(t *testing.T, c *Conn, ctx context.Context, name string, args map[string]any) (string, error) {
	p, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	res, err := c.Call(ctx, "tools/call", p, nil)
	if err != nil {
		return "", err
	}
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: %v", res, err)
	}
	return r.Content[0].Text, nil
}

// TestConcurrentCallsGetTheirOwnAnswers: 200 calls from 50 goroutines, answered out of order.
func TestConcurrentCallsGetTheirOwnAnswers(t *testing.T) {
	c := start(t, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				want := fmt.Sprintf("g%d-c%d", g, i)
				got, err := callTool(t, c, t.Context(), "slow", map[string]any{"message": want, "ms": (g*7 + i*13) % 30})
				if err != nil || got != want {
					errs <- fmt.Errorf("want %q, got %q (%v)", want, got, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCrashFailsInFlightCallsAtOnce(t *testing.T) {
	exited := make(chan error, 1)
	c := start(t, func(o *Options) { o.OnExit = func(err error) { exited <- err } })
	hung := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.Call(t.Context(), "tools/call", json.RawMessage(`{"name":"hang"}`), nil)
			hung <- err
		}()
	}
	waitfor.True(t, 10*time.Second, "3 calls in flight", func() bool { return c.InFlight() == 3 })
	began := time.Now()
	if err := syscall.Kill(c.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case err := <-hung:
			if !errors.Is(err, ErrExited) {
				t.Fatalf("in-flight call failed with %v, want ErrExited", err)
			}
		case <-time.After(time.Second):
			t.Fatal("in-flight call still waiting 1s after the child was killed")
		}
	}
	t.Logf("in-flight calls failed %v after SIGKILL", time.Since(began))
	if err := <-exited; !strings.Contains(err.Error(), "killed") {
		t.Fatalf("exit reason %v", err)
	}
	if _, err := callTool(t, c, t.Context(), "echo", map[string]any{"message": "x"}); !errors.Is(err, ErrExited) {
		t.Fatalf("call after exit: %v", err)
	}
}

func TestCrashReportsStderr(t *testing.T) {
	c := start(t, nil)
	_, err := callTool(t, c, t.Context(), "crash", nil)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("err = %v", err)
	}
	<-c.Done()
	if !strings.Contains(c.Err().Error(), "exit status 3") || !strings.Contains(c.Err().Error(), "crashing on purpose") {
		t.Fatalf("exit error %q lacks status or stderr", c.Err())
	}
	if !strings.Contains(c.StderrTail(), "mcpfixture starting") {
		t.Fatalf("stderr tail %q", c.StderrTail())
	}
}

func TestNonJSONLineIsAProtocolFailure(t *testing.T) {
	c := start(t, nil)
	_, err := callTool(t, c, t.Context(), "garbage", nil)
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("err = %v, want ErrProtocol", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("child not stopped after a protocol failure")
	}
}

func TestLineSizeLimit(t *testing.T) {
	c := start(t, func(o *Options) { o.MaxLineBytes = 256 << 10 })
	got, err := callTool(t, c, t.Context(), "huge", map[string]any{"bytes": 200 << 10})
	if err != nil || len(got) != 200<<10 {
		t.Fatalf("under the limit: %d bytes, %v", len(got), err)
	}
	_, err = callTool(t, c, t.Context(), "huge", map[string]any{"bytes": 300 << 10})
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "262144") {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestProgressReachesTheCallerWithItsOwnToken(t *testing.T) {
	c := start(t, nil)
	var wg sync.WaitGroup
	for caller := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got []string
			p, _ := json.Marshal(map[string]any{"name": "progress", "arguments": map[string]any{"n": 3 + caller},
				"_meta": map[string]any{"progressToken": "same-token"}})
			_, err := c.Call(t.Context(), "tools/call", p, func(n []byte) {
				var m struct {
					Params struct {
						ProgressToken any     `json:"progressToken"`
						Progress      float64 `json:"progress"`
					} `json:"params"`
				}
				json.Unmarshal(n, &m)
				got = append(got, fmt.Sprint(m.Params.ProgressToken, m.Params.Progress))
			})
			if err != nil {
				t.Error(err)
				return
			}
			if len(got) != 3+caller || got[0] != "same-token1" {
				t.Errorf("caller %d got progress %v", caller, got)
			}
		}()
	}
	wg.Wait()
}

func TestCancelSendsNotificationsCancelled(t *testing.T) {
	c := start(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := callTool(t, c, ctx, "hang", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	waitfor.True(t, 10*time.Second, "the child counted the cancellation", func() bool {
		n, _ := callTool(t, c, t.Context(), "cancelled_count", nil)
		return n == "1"
	})
}

func TestRequestsFromTheChild(t *testing.T) {
	c := start(t, nil)
	got, err := callTool(t, c, t.Context(), "ping_client", nil)
	if err != nil || !strings.Contains(got, `"result":{}`) {
		t.Fatalf("ping: %s %v", got, err)
	}
	// A call that relays nothing: roots/list gets no roots, the rest an error saying why.
	got, err = callTool(t, c, t.Context(), "roots", nil)
	if err != nil || got != `{"error":null,"result":{"roots":[]}}` {
		t.Fatalf("roots/list: %s %v", got, err)
	}
	got, err = callTool(t, c, t.Context(), "ask", map[string]any{"method": MethodSampling})
	if err != nil || !strings.Contains(got, "no client of the call in flight accepts sampling/createMessage") {
		t.Fatalf("sampling: %s %v", got, err)
	}
	got, err = callTool(t, c, t.Context(), "ask", map[string]any{"method": "other/method"})
	if err != nil || !strings.Contains(got, "-32601") {
		t.Fatalf("other/method: %s %v", got, err)
	}
}

func TestInFlightBound(t *testing.T) {
	c := start(t, func(o *Options) { o.MaxInFlight = 2 })
	for range 2 {
		go c.Call(t.Context(), "tools/call", json.RawMessage(`{"name":"hang"}`), nil) // cancelled at cleanup
	}
	waitfor.True(t, 10*time.Second, "2 calls in flight", func() bool { return c.InFlight() == 2 })
	if _, err := callTool(t, c, t.Context(), "echo", map[string]any{"message": "x"}); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "limit 2") {
		t.Fatalf("err = %v, want ErrBusy naming the limit", err)
	}
}

func TestListChangedNotificationIsReported(t *testing.T) {
	notes := make(chan string, 4)
	c := start(t, func(o *Options) { o.OnNotification = func(m string, _ []byte) { notes <- m } })
	if _, err := callTool(t, c, t.Context(), "list_changed", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-notes:
		if m != "notifications/tools/list_changed" {
			t.Fatalf("got %s", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
}

func TestLaunchErrorNamesTheOSError(t *testing.T) {
	_, err := Start(Options{Path: "/nonexistent/zest-no-such-server"})
	if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "no such file or directory") {
		t.Fatalf("err = %v", err)
	}
}

// TestStopKillsWrapperGrandchildren: a shell wrapper that starts the server as a grandchild
// (as npx does) leaves nothing behind after 50 start/stop cycles.
func TestStopKillsWrapperGrandchildren(t *testing.T) {
	if testing.Short() {
		t.Skip("50 cycles")
	}
	var pgids []int
	for range 50 {
		c, err := Start(Options{Path: "/bin/sh", Args: []string{"-c", "exec 3<&0; " + fixture + " <&3 3<&- & wait"}, StopGrace: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := callTool(t, c, t.Context(), "echo", map[string]any{"message": "x"}); err != nil {
			t.Fatal(err)
		}
		pgids = append(pgids, c.Pid())
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if left := processesInGroups(t, pgids); len(left) > 0 {
		t.Fatalf("processes left in the servers' groups: %v", left)
	}
}

// processesInGroups lists /proc entries whose process group is one of pgids.
func processesInGroups(t *testing.T, pgids []int) []string {
	t.Helper()
	want := map[int]bool{}
	for _, g := range pgids {
		want[g] = true
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		rest := s[strings.LastIndexByte(s, ')')+2:]
		var state string
		var ppid, pgrp int
		fmt.Sscanf(rest, "%s %d %d", &state, &ppid, &pgrp)
		if want[pgrp] {
			left = append(left, fmt.Sprintf("pid %s state %s pgrp %d", e.Name(), state, pgrp))
		}
	}
	return left
}

// TestPrettyParamsReachTheChild: params with newlines between tokens are compacted onto the
// request's line; without that the child would read a broken line and never answer.
func TestPrettyParamsReachTheChild(t *testing.T) {
	c := start(t, nil)
	p, _ := json.MarshalIndent(map[string]any{"name": "echo", "arguments": map[string]any{"message": "two\nlines"}}, "", "  ")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	res, err := c.Call(ctx, "tools/call", p, nil)
	if err != nil || !strings.Contains(string(res), `"text":"two\nlines"`) {
		t.Fatalf("pretty-printed params: %s %v", res, err)
	}
}

// TestBadParamsAreRefusedNotWritten: params that are not a JSON object or array fail the call
// alone; the child reads nothing of them and keeps serving.
func TestBadParamsAreRefusedNotWritten(t *testing.T) {
	c := start(t, nil)
	for _, p := range []string{`{"name":"echo"`, "{\n\"name\": echo}", `"echo"`, `{"a":1}{"b":2}`} {
		if _, err := c.Call(t.Context(), "tools/call", json.RawMessage(p), nil); !errors.Is(err, ErrBadRequest) {
			t.Errorf("params %q: err = %v, want ErrBadRequest", p, err)
		}
	}
	if got, err := callTool(t, c, t.Context(), "echo", map[string]any{"message": "still fine"}); err != nil || got != "still fine" {
		t.Fatalf("after refused params: %q %v", got, err)
	}
	if strings.Contains(c.StderrTail(), "bad input") {
		t.Fatalf("the child read a broken request: %s", c.StderrTail())
	}
}

// TestStdinQueueIsBounded: while the child does not read its stdin, requests wait for room
// with their own context. One that gives up fails alone and none of its bytes is written;
// the others are answered once the child reads again.
func TestStdinQueueIsBounded(t *testing.T) {
	c := start(t, func(o *Options) { o.MaxStdinQueueBytes = 64 << 10 })
	if got, err := callTool(t, c, t.Context(), "pause_reading", nil); err != nil || got != "paused" {
		t.Fatalf("pause_reading: %q %v", got, err)
	}
	big := strings.Repeat("a", 300<<10) // more than the pipe holds: most of it waits in the queue
	bigDone := make(chan error, 1)
	go func() {
		got, err := callTool(t, c, t.Context(), "echo", map[string]any{"message": big})
		if err == nil && got != big {
			err = fmt.Errorf("echo of %d bytes answered %d bytes", len(big), len(got))
		}
		bigDone <- err
	}()
	waitfor.True(t, 10*time.Second, "over 64 KiB queued for stdin", func() bool { q, _ := c.in.state(); return q > 64<<10 })

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := callTool(t, c, ctx, "echo", map[string]any{"message": "timed-out"})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "does not read its stdin") {
		t.Fatalf("a request with no room before its deadline: %v", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("the timed-out request returned after %v", d)
	}

	patientDone := make(chan error, 1)
	go func() {
		got, err := callTool(t, c, t.Context(), "echo", map[string]any{"message": "patient"})
		if err == nil && got != "patient" {
			err = fmt.Errorf("got %q", got)
		}
		patientDone <- err
	}()
	waitfor.True(t, 10*time.Second, "one request waiting for room", func() bool { _, w := c.in.state(); return w == 1 })
	cctx, ccancel := context.WithCancel(t.Context())
	cancelledDone := make(chan error, 1)
	go func() {
		_, err := callTool(t, c, cctx, "echo", map[string]any{"message": "cancelled"})
		cancelledDone <- err
	}()
	waitfor.True(t, 10*time.Second, "two requests waiting for room", func() bool { _, w := c.in.state(); return w == 2 })
	ccancel()
	if err := <-cancelledDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled request waiting for room: %v", err)
	}
	if _, w := c.in.state(); w != 1 {
		t.Fatalf("%d requests wait after one gave up, want the other one", w)
	}

	if err := syscall.Kill(c.Pid(), syscall.SIGUSR1); err != nil { // read again
		t.Fatal(err)
	}
	for what, done := range map[string]chan error{"the large request": bigDone, "the patient request": patientDone} {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not answered after the child read again", what)
		}
	}
	for _, m := range []string{"timed-out", "cancelled"} {
		if got, err := callTool(t, c, t.Context(), "seen", map[string]any{"message": m}); err != nil || got != "false" {
			t.Fatalf("the child received the %s request: %q %v", m, got, err)
		}
	}
	if got, _ := callTool(t, c, t.Context(), "seen", map[string]any{"message": "patient"}); got != "true" {
		t.Fatal("seen does not see what the child received")
	}
	if strings.Contains(c.StderrTail(), "bad input") {
		t.Fatalf("the child read a partial request: %s", c.StderrTail())
	}
}

// underShim runs the child under the shim (the test binary), as the tool host does.
func underShim(o *Options) {
	o.Shim = []string{os.Args[0], shim.Flag, "-stop-grace=" + o.StopGrace.String()}
}

// spawnHelper has the fixture start `sleep 300` in a session of its own and returns its pid.
func spawnHelper(t *testing.T, c *Conn, hold bool) int {
	t.Helper()
	got, err := callTool(t, c, t.Context(), "spawn_setsid", map[string]any{"hold": hold})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(got, &pid); err != nil || !running(pid) {
		t.Fatalf("spawn_setsid answered %q", got)
	}
	t.Cleanup(func() {
		if running(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
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

// TestEscapedDescendantsEndWithTheServer: a helper the server started in a session of its own
// (out of the server's process group) is gone once the child has ended, whether it was
// stopped, crashed or stopped while ignoring stdin's end, and whether or not the helper holds
// the server's stdout.
func TestEscapedDescendantsEndWithTheServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold bool
		end  func(t *testing.T, c *Conn)
	}{
		{"stop", false, func(t *testing.T, c *Conn) { c.Stop() }},
		{"stop, the helper holding stdout", true, func(t *testing.T, c *Conn) { c.Stop() }},
		{"stop of a server that does not read stdin", false, func(t *testing.T, c *Conn) {
			callTool(t, c, t.Context(), "pause_reading", nil)
			c.Stop()
		}},
		{"crash", true, func(t *testing.T, c *Conn) {
			callTool(t, c, t.Context(), "crash", nil)
			<-c.Done()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, func(o *Options) { o.StopGrace = 300 * time.Millisecond; underShim(o) })
			helper := spawnHelper(t, c, tc.hold)
			tc.end(t, c)
			<-c.Done()
			if running(helper) {
				t.Fatalf("the server's helper %d outlived it (exit: %v)", helper, c.Err())
			}
		})
	}
}
