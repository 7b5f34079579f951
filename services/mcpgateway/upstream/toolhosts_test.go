package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/waitfor"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/mcpgateway/toolhosts"
	"github.com/zestmcp/zest/services/mcpgateway/toolhosts/toolhoststest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { toolhoststest.Main(m) }

// clusterWait is how long a cluster's placement waits for a tool host (toolhosts.Config.Wait).
const clusterWait = 500 * time.Millisecond

// cluster is a manager over real in-process tool hosts, following them.
type cluster struct {
	hosts map[string]*toolhoststest.Host
	pool  *toolhosts.Pool
	m     *Manager
}

func startCluster(t *testing.T, names ...string) *cluster {
	t.Helper()
	c := &cluster{hosts: map[string]*toolhoststest.Host{}}
	var addrs []string
	for _, n := range names {
		h := toolhoststest.Start(t, n)
		c.hosts[n] = h
		addrs = append(addrs, h.Addr())
	}
	p, err := toolhosts.New(toolhosts.Config{Addr: strings.Join(addrs, ","), Key: toolhoststest.Key, HealthEvery: 100 * time.Millisecond, Wait: clusterWait}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.pool = p
	c.m = NewPlaced(p, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.m.FollowToolHost(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		c.m.Close(context.Background())
		p.Close()
	})
	waitfor.NoError(t, 5*time.Second, func() error {
		if n := len(p.Healthy()); n != len(names) {
			return fmt.Errorf("%d of %d tool hosts healthy", n, len(names))
		}
		return nil
	})
	return c
}

func childConfig(t *testing.T, id, pin string) *mcpgatewayv1.ServerConfig {
	cmd, args := toolhoststest.Server(t)
	return &mcpgatewayv1.ServerConfig{Id: id, Name: id, Transport: "stdio", Command: cmd, Args: args, Enabled: proto.Bool(true), TimeoutMs: proto.Int32(10000), ToolHost: proto.String(pin)}
}

// callTool calls tool with args and returns the text of its answer.
func callTool(ctx context.Context, m *Manager, cfg *mcpgatewayv1.ServerConfig, tool string, args map[string]any) (string, error) {
	p, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	raw, err := m.DispatchToolCall(ctx, cfg, p, 0, Hooks{})
	if err != nil {
		return "", err
	}
	var r struct{ Content []struct{ Text string } }
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) == 0 {
		return "", fmt.Errorf("answer %s", raw)
	}
	return r.Content[0].Text, nil
}

// TestServersMoveWhenTheirToolHostDies: servers run where their placement says (the state
// shows it); when a tool host dies, a call in flight there fails at once naming it, its
// servers start on the others at once (without waiting for a call) and answer there, and the
// servers of the other tool hosts do not move. When it comes back, its servers return to it
// and are stopped where they were, after their calls in flight there have ended.
func TestServersMoveWhenTheirToolHostDies(t *testing.T) {
	c := startCluster(t, "th-a", "th-b", "th-c")
	ctx := t.Context()
	cfgs := map[string]*mcpgatewayv1.ServerConfig{}
	pids := map[string]string{}
	for i := range 9 {
		cfg := childConfig(t, fmt.Sprint("srv-", i), "")
		cfgs[cfg.GetId()] = cfg
		pid, err := callTool(ctx, c.m, cfg, "pid", nil)
		if err != nil {
			t.Fatal(err)
		}
		pids[cfg.GetId()] = pid
	}
	before := map[string]string{}
	count := map[string]int{}
	for id, cfg := range cfgs {
		h, err := c.pool.Placement(id, "")
		if err != nil || c.m.ToolHost(cfg) != h.Name {
			t.Fatalf("%s: the state says %q, the placement %v (%v)", id, c.m.ToolHost(cfg), h, err)
		}
		before[id] = h.Name
		count[h.Name]++
	}
	// The tool host that runs the most servers dies.
	victim := "th-a"
	for n, k := range count {
		if k > count[victim] {
			victim = n
		}
	}
	var onVictim *mcpgatewayv1.ServerConfig
	for id, cfg := range cfgs {
		if before[id] == victim {
			onVictim = cfg
			break
		}
	}
	inFlight := make(chan error, 1)
	var failedAt time.Time
	arrived, waitArrived := toolhoststest.Arrival(t)
	go func() {
		_, err := callTool(ctx, c.m, onVictim, "slow", map[string]any{"ms": 5000, "message": "never", "arrived": arrived})
		failedAt = time.Now()
		inFlight <- err
	}()
	waitArrived()
	killed := time.Now()
	c.hosts[victim].Kill()
	t.Logf("killing %s took %v", victim, time.Since(killed))

	err := <-inFlight
	failedAfter := failedAt.Sub(killed)
	want := fmt.Sprintf("the tool host %s (%s) went away during the call", victim, c.hosts[victim].Addr())
	if err == nil || !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "calls go to another tool host") {
		t.Fatalf("the call in flight: %v, want an error containing %q", err, want)
	}
	if failedAfter > time.Second {
		t.Fatalf("the call in flight failed %v after the kill", failedAfter)
	}
	t.Logf("the call in flight failed %v after the kill: %v", failedAfter, err)

	// Moved at once, by FollowToolHost: connected elsewhere before any call.
	moved := waitfor.NoError(t, 3*time.Second, func() error {
		for id, cfg := range cfgs {
			if before[id] != victim {
				continue
			}
			if st := c.m.State(id); !st.Connected || c.m.ToolHost(cfg) == victim {
				return fmt.Errorf("%s: connected %v on %s (%s)", id, st.Connected, c.m.ToolHost(cfg), st.LastError)
			}
		}
		return nil
	})
	t.Logf("the servers of %s were connected elsewhere %v after the kill", victim, time.Since(killed))
	_ = moved
	for id, cfg := range cfgs {
		pid, err := callTool(ctx, c.m, cfg, "pid", nil)
		if err != nil {
			t.Fatalf("%s after %s died: %v", id, victim, err)
		}
		if stayed := before[id] != victim; stayed != (pid == pids[id]) || (stayed && c.m.ToolHost(cfg) != before[id]) {
			t.Fatalf("%s ran on %s (pid %s), now on %s (pid %s)", id, before[id], pids[id], c.m.ToolHost(cfg), pid)
		}
	}
	t.Logf("every server answered %v after the kill", time.Since(killed))

	// The tool host comes back: its servers return; the copies they leave are stopped after
	// the calls in flight there end (a slow call on one of them succeeds).
	interim := c.m.ToolHost(onVictim)
	slow := make(chan error, 1)
	arrived, waitArrived = toolhoststest.Arrival(t)
	go func() {
		_, err := callTool(ctx, c.m, onVictim, "slow", map[string]any{"ms": 1000, "message": "m", "arrived": arrived})
		slow <- err
	}()
	waitArrived()
	c.hosts[victim].Restart()
	waitfor.NoError(t, 3*time.Second, func() error {
		for id, cfg := range cfgs {
			if got := c.m.ToolHost(cfg); got != before[id] || !c.m.State(id).Connected {
				return fmt.Errorf("%s on %s, want %s", id, got, before[id])
			}
		}
		return nil
	})
	if err := <-slow; err != nil {
		t.Fatalf("a call in flight on %s while its server moved back to %s: %v", interim, victim, err)
	}
	waitfor.NoError(t, 5*time.Second, func() error {
		_, err := c.hosts[interim].Client().GetStatus(ctx, &toolhostv1.GetStatusRequest{Id: onVictim.GetId()})
		if status.Code(err) != codes.NotFound {
			return fmt.Errorf("%s still runs on %s after it moved back: %v", onVictim.GetId(), interim, err)
		}
		return nil
	})
	if _, err := callTool(ctx, c.m, onVictim, "echo", map[string]any{"message": "back"}); err != nil {
		t.Fatal(err)
	}
}

// TestCallsAcrossADeath: calls that keep coming while a tool host dies either succeed or fail
// for having been in flight on it; none fails otherwise (a call that had not left when the
// tool host went is sent where the server runs next), and calls succeed again at once.
func TestCallsAcrossADeath(t *testing.T) {
	c := startCluster(t, "th-a", "th-b")
	cfg := childConfig(t, "busy", "")
	if _, err := callTool(t.Context(), c.m, cfg, "echo", map[string]any{"message": "x"}); err != nil {
		t.Fatal(err)
	}
	victim := c.m.ToolHost(cfg)
	var mu sync.Mutex
	var ok, inFlight int
	var other []error
	var lastFailure time.Time
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := callTool(t.Context(), c.m, cfg, "slow", map[string]any{"ms": 5, "message": fmt.Sprint(w, "-", i)})
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case strings.Contains(err.Error(), "went away during the call"):
					inFlight++
					lastFailure = time.Now()
				default:
					other = append(other, err)
				}
				mu.Unlock()
			}
		}()
	}
	// Calls flow, then the tool host dies under them, and calls succeed again after it.
	succeeded := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return ok >= n }
	}
	waitfor.True(t, 5*time.Second, "32 calls before the death", succeeded(32))
	mu.Lock()
	before := ok
	mu.Unlock()
	killed := time.Now()
	c.hosts[victim].Kill()
	waitfor.True(t, 5*time.Second, "32 calls after the death", succeeded(before+32))
	close(stop)
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("%d calls failed otherwise, e.g. %v", len(other), other[0])
	}
	if inFlight > 8 {
		t.Fatalf("%d calls failed in flight, with 8 callers", inFlight)
	}
	if c.m.ToolHost(cfg) == victim {
		t.Fatal("the server did not move")
	}
	t.Logf("%d calls succeeded, %d failed in flight (the last %v after the kill)", ok, inFlight, lastFailure.Sub(killed))
}

// TestPinnedServer: a pinned server runs on its tool host whatever its placement; while that
// one is down, its calls fail with an error that names the pin and the fix, its state shows
// the pin, and it connects again as soon as its tool host is back.
func TestPinnedServer(t *testing.T) {
	c := startCluster(t, "th-a", "th-b")
	ctx := t.Context()
	var cfgs []*mcpgatewayv1.ServerConfig
	for i := range 4 {
		cfg := childConfig(t, fmt.Sprint("pinned-", i), "th-b")
		cfgs = append(cfgs, cfg)
		if _, err := callTool(ctx, c.m, cfg, "echo", map[string]any{"message": "x"}); err != nil {
			t.Fatal(err)
		}
		if got := c.m.ToolHost(cfg); got != "th-b" {
			t.Fatalf("%s runs on %s, pinned to th-b", cfg.GetId(), got)
		}
	}
	c.hosts["th-b"].Kill()
	waitfor.NoError(t, 2*time.Second, func() error {
		if st := c.m.State(cfgs[0].GetId()); st.Connected {
			return errors.New("still connected")
		}
		return nil
	})
	began := time.Now()
	_, err := callTool(ctx, c.m, cfgs[0], "echo", map[string]any{"message": "x"})
	if err == nil || !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), `the tool host "th-b" that the server's tool_host pins is not healthy`) ||
		!strings.Contains(err.Error(), "start it, or change or remove tool_host") {
		t.Fatalf("a call while the pinned tool host is down: %v", err)
	}
	if waited := time.Since(began); waited < clusterWait || waited > clusterWait+time.Second {
		t.Fatalf("the call waited %v for the pinned tool host, want about %v", waited, clusterWait)
	}
	if got := c.m.ToolHost(cfgs[0]); got != "th-b" {
		t.Fatalf("the state shows %q while th-b is down, want the pin", got)
	}
	c.hosts["th-b"].Restart()
	// Back on th-b at once, before any call (their tools are in the catalog again).
	waitfor.NoError(t, 3*time.Second, func() error {
		for _, cfg := range cfgs[1:] {
			if st := c.m.State(cfg.GetId()); !st.Connected {
				return fmt.Errorf("%s not connected again: %s", cfg.GetId(), st.LastError)
			}
		}
		return nil
	})
	for _, cfg := range cfgs {
		if _, err := callTool(ctx, c.m, cfg, "echo", map[string]any{"message": "x"}); err != nil {
			t.Fatalf("%s after th-b came back: %v", cfg.GetId(), err)
		}
	}
	// Unpinned, a server takes its placement.
	free := childConfig(t, "pinned-0", "")
	if _, err := callTool(ctx, c.m, free, "echo", map[string]any{"message": "x"}); err != nil {
		t.Fatal(err)
	}
	if h, _ := c.pool.Placement("pinned-0", ""); c.m.ToolHost(free) != h.Name {
		t.Fatalf("unpinned: on %s, placed on %s", c.m.ToolHost(free), h.Name)
	}
}

// TestCallThatNeverLeftGoesElsewhere: a call made on a session whose tool host is already gone
// (the placement was checked a moment before the pool noticed) fails to leave — no connection
// carries it — and is sent once more where the server runs now.
func TestCallThatNeverLeftGoesElsewhere(t *testing.T) {
	c := startCluster(t, "th-a", "th-b")
	m := NewPlaced(c.pool, nil, nil) // not following: nothing moves the server but the call
	defer m.Close(context.Background())
	cfg := childConfig(t, "stale", "")
	if _, err := callTool(t.Context(), m, cfg, "echo", map[string]any{"message": "x"}); err != nil {
		t.Fatal(err)
	}
	victim := m.ToolHost(cfg)
	s, _ := m.connected(cfg.GetId())
	st := s.(*stdioSession)
	changed := c.pool.Changed()
	c.hosts[victim].Kill()
	<-changed
	waitfor.NoError(t, 2*time.Second, func() error {
		if !c.pool.Lost(st.host, 0) {
			return errors.New("not lost yet")
		}
		return nil
	})
	st.placedAt.Store(c.pool.Generation()) // as if checked just before the pool noticed
	if _, err := st.call(t.Context(), "tools/call", json.RawMessage(`{"name":"echo","arguments":{"message":"x"}}`), time.Second); !errors.Is(err, errElsewhere) {
		t.Fatalf("a call on the dead tool host's session: %v, want errElsewhere", err)
	}
	st.placedAt.Store(c.pool.Generation())
	if got, err := callTool(t.Context(), m, cfg, "echo", map[string]any{"message": "again"}); err != nil || got != "again" {
		t.Fatalf("the call was not sent elsewhere: %q %v", got, err)
	}
	if now := m.ToolHost(cfg); now == victim {
		t.Fatalf("the server still runs on %s", now)
	}
}

// TestRelayRefNamesItsToolHost: a stdio server's request for the client carries a ref that
// names the tool host holding it, and the answer reaches that tool host.
func TestRelayRefNamesItsToolHost(t *testing.T) {
	c := startCluster(t, "th-a", "th-b")
	cfg := childConfig(t, "asks", "")
	ctx := t.Context()
	if _, err := callTool(ctx, c.m, cfg, "echo", map[string]any{"message": "x"}); err != nil {
		t.Fatal(err)
	}
	on := c.m.ToolHost(cfg)
	refs := make(chan string, 1)
	answered := make(chan error, 1)
	hooks := Hooks{Relays: Relays{Roots: true}, OnRequest: func(req ServerRequest) {
		refs <- req.Ref
		go func() {
			answered <- c.m.Answer(ctx, req.Ref, json.RawMessage(`{"roots":[{"uri":"file:///work"}]}`), nil)
		}()
	}}
	raw, err := c.m.DispatchToolCall(ctx, cfg, json.RawMessage(`{"name":"roots","arguments":{}}`), 0, hooks)
	if err != nil || !strings.Contains(string(raw), "file:///work") {
		t.Fatalf("the relayed call: %s %v", raw, err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("answer: %v", err)
	}
	if ref := <-refs; !strings.HasPrefix(ref, "t:"+on+"/") {
		t.Fatalf("ref %q does not name the tool host %s", ref, on)
	}
	other := "th-a"
	if on == "th-a" {
		other = "th-b"
	}
	if err := c.m.Answer(ctx, "t:"+other+"/0123", json.RawMessage(`{}`), nil); !errors.Is(err, ErrRelayUnknown) {
		t.Fatalf("an answer for a request the other tool host does not hold: %v", err)
	}
	if err := c.m.Answer(ctx, "t:th-z/0123", json.RawMessage(`{}`), nil); !errors.Is(err, ErrRelayUnknown) || !strings.Contains(err.Error(), `"th-z"`) {
		t.Fatalf("an answer for a tool host that is gone: %v", err)
	}
}

// TestFollowEveryToolHost: FollowToolHost follows the Watch stream of every tool host; a
// list_changed from the tool host a server runs on reads its tools again from that one, while
// the same event from another tool host reads nothing; notifications of both pass on. The
// fake tool hosts answer no Describe (as tool hosts older than it): each is named by its
// address.
func TestFollowEveryToolHost(t *testing.T) {
	fakes := map[string]*fakeHost{}
	var addrs []string
	for range 2 {
		f := &fakeHost{tools: map[string][]json.RawMessage{}, started: map[string]int{}, stopped: map[string]int{}, lists: map[string]int{}, lost: map[string]bool{},
			events: make(chan *toolhostv1.WatchResponse, 16), breakW: make(chan struct{})}
		a := grpctest.Listen(t, func(g *grpc.Server) {
			toolhostv1.RegisterToolHostServiceServer(g, f)
			h := health.NewServer()
			h.SetServingStatus(toolhostv1.ToolHostService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
			healthpb.RegisterHealthServer(g, h)
		})
		fakes[a] = f
		addrs = append(addrs, a)
	}
	p, err := toolhosts.New(toolhosts.Config{Addr: strings.Join(addrs, ","), HealthEvery: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitfor.NoError(t, 5*time.Second, func() error {
		if n := len(p.Healthy()); n != 2 {
			return fmt.Errorf("%d healthy", n)
		}
		return nil
	})
	m := NewPlaced(p, nil, nil)
	var mu sync.Mutex
	notes := map[string]int{}
	m.OnNotification(func(id string, _ []byte) { mu.Lock(); notes[id]++; mu.Unlock() })
	ctx, cancel := context.WithCancel(t.Context())
	followed := make(chan struct{})
	go func() { m.FollowToolHost(ctx); close(followed) }()
	defer func() { cancel(); <-followed }()

	cfg := stdioConfig("fx")
	for _, f := range fakes {
		f.setTools("fx", tools("a"))
	}
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	on := m.ToolHost(cfg)
	if fakes[on] == nil {
		t.Fatalf("placed on %q, want a tool host named by its address", on)
	}
	waitfor.NoError(t, 5*time.Second, func() error {
		for a, f := range fakes {
			if f.watchCount() != 1 {
				return fmt.Errorf("%s has %d watchers", a, f.watchCount())
			}
		}
		return nil
	})
	changed := json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	for a, f := range fakes {
		if a == on {
			continue
		}
		f.setTools("fx", tools("a", "elsewhere"))
		f.events <- &toolhostv1.WatchResponse{Id: "fx", Kind: &toolhostv1.WatchResponse_Notification{Notification: changed}}
	}
	waitfor.NoError(t, 2*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if notes["fx"] != 1 {
			return fmt.Errorf("%d notifications passed on", notes["fx"])
		}
		return nil
	})
	// The list_changed of the tool host the server runs on next: once its tools are read, a
	// read the other's would have started is over (a server's reads run one after another,
	// the last after the last notification), and the other was never asked for them.
	fakes[on].setTools("fx", tools("a", "b"))
	fakes[on].events <- &toolhostv1.WatchResponse{Id: "fx", Kind: &toolhostv1.WatchResponse_Notification{Notification: changed}}
	waitfor.NoError(t, 5*time.Second, func() error {
		if !hasTool(m, "fx", "b") {
			return errors.New("tool b not read after list_changed")
		}
		return nil
	})
	for a, f := range fakes {
		f.mu.Lock()
		lists := f.lists["fx"]
		f.mu.Unlock()
		if a != on && lists != 0 || hasTool(m, "fx", "elsewhere") {
			t.Fatalf("tools were read from a tool host the server does not run on (%s listed them %d times)", a, lists)
		}
	}
}

// TestParkedCallResumesOnItsToolHost: a call parked for a client of MCP 2026-07-28 names the
// tool host that holds it, and the client's answers reach it there.
func TestParkedCallResumesOnItsToolHost(t *testing.T) {
	c := startCluster(t, "th-a", "th-b")
	cfg := childConfig(t, "parks", "")
	ctx := t.Context()
	hooks := Hooks{Relays: Relays{Roots: true}, Park: 5 * time.Second, OnRequest: func(ServerRequest) { t.Error("a parked call's request reached OnRequest") }}
	_, err := c.m.DispatchToolCall(ctx, cfg, json.RawMessage(`{"name":"roots","arguments":{}}`), 0, hooks)
	var asked *InputRequiredError
	if !errors.As(err, &asked) || len(asked.Requests) != 1 {
		t.Fatalf("the call did not park: %v", err)
	}
	on := c.m.ToolHost(cfg)
	if !strings.HasPrefix(asked.Call, "t:"+on+"/") || !strings.HasPrefix(asked.Requests[0].Ref, "t:"+on+"/") {
		t.Fatalf("call %q, request %q: want refs naming %s", asked.Call, asked.Requests[0].Ref, on)
	}
	raw, err := c.m.ResumeToolCall(ctx, cfg, asked.Call, []ClientAnswer{{Ref: asked.Requests[0].Ref, Result: json.RawMessage(`{"roots":[{"uri":"file:///parked"}]}`)}}, hooks)
	if err != nil || !strings.Contains(string(raw), "file:///parked") {
		t.Fatalf("resume: %s %v", raw, err)
	}
	if _, err := c.m.ResumeToolCall(ctx, cfg, "t:th-z/0123", nil, hooks); !errors.Is(err, ErrRelayUnknown) || !strings.Contains(err.Error(), `"th-z"`) {
		t.Fatalf("a call parked on a tool host that is gone: %v", err)
	}
}

// replicaOn is another mcpgateway's manager over c's tool hosts, whose pool probes them every
// healthEvery: a replica that sees a tool host come back later than c does.
func replicaOn(t *testing.T, c *cluster, healthEvery time.Duration) *Manager {
	t.Helper()
	var addrs []string
	for _, h := range c.hosts {
		addrs = append(addrs, h.Addr())
	}
	p, err := toolhosts.New(toolhosts.Config{Addr: strings.Join(addrs, ","), Key: toolhoststest.Key, HealthEvery: healthEvery, Wait: clusterWait}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := NewPlaced(p, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.FollowToolHost(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		m.Close(context.Background())
		p.Close()
	})
	return m
}

// TestMoveBackWhileAnotherReplicaStillCallsTheOldCopy: a tool host comes back; one replica
// (usually A, probing every 100 ms) sees it first, moves the server back and stops the copy
// it leaves after a drain, while the other (B probes every second) still sends calls to that
// copy. Not one call fails: the draining tool host refuses the late replica's new calls
// before the child sees them (ABORTED), and it sends each where the server runs once it sees
// the tool host back; a call that finds the copy already gone goes there too instead of
// starting the copy again.
func TestMoveBackWhileAnotherReplicaStillCallsTheOldCopy(t *testing.T) {
	a := startCluster(t, "th-a", "th-b")
	b := replicaOn(t, a, time.Second)
	cfg := childConfig(t, "busy", "")
	if _, err := callTool(t.Context(), a.m, cfg, "echo", map[string]any{"message": "x"}); err != nil {
		t.Fatal(err)
	}
	home := a.m.ToolHost(cfg)
	a.hosts[home].Kill()
	waitfor.NoError(t, 5*time.Second, func() error {
		for _, m := range []*Manager{a.m, b} {
			if _, err := callTool(t.Context(), m, cfg, "echo", map[string]any{"message": "y"}); err != nil {
				return err
			}
			if got := m.ToolHost(cfg); got == home {
				return fmt.Errorf("still on %s", got)
			}
		}
		return nil
	})
	var mu sync.Mutex
	var ok int
	var failed []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		m := b
		if w < 2 {
			m = a.m
		}
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := callTool(t.Context(), m, cfg, "slow", map[string]any{"ms": 5, "message": fmt.Sprint(w, "-", i)})
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else {
					ok++
				}
				mu.Unlock()
			}
		})
	}
	succeeded := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return ok >= n }
	}
	waitfor.True(t, 5*time.Second, "24 calls before the move back", succeeded(24))
	a.hosts[home].Restart()
	// Either replica may see the tool host back first: besides the probe period, each one's
	// connection to it waits out its own reconnect backoff (grpcdial: from 100 ms, ×1.6).
	waitfor.NoError(t, 5*time.Second, func() error {
		for name, m := range map[string]*Manager{"A": a.m, "B": b} {
			if got := m.ToolHost(cfg); got != home {
				return fmt.Errorf("replica %s still calls %s", name, got)
			}
		}
		return nil
	})
	mu.Lock()
	moved := ok
	mu.Unlock()
	waitfor.True(t, 5*time.Second, "24 calls after the move back", succeeded(moved+24))
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d calls failed while the server moved back, e.g. %v", len(failed), len(failed)+ok, failed[0])
	}
	for name, m := range map[string]*Manager{"A": a.m, "B": b} {
		if got := m.ToolHost(cfg); got != home {
			t.Fatalf("replica %s runs the server on %s after the move back, not on %s", name, got, home)
		}
	}
	t.Logf("%d calls while the server moved back to %s, none failed", ok, home)
}
