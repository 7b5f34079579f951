package upstream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/waitfor"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

// quick fails the test when f takes longer than d: it must not wait for network I/O.
func quick(t *testing.T, what string, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	began := time.Now()
	go func() { f(); close(done) }()
	select {
	case <-done:
		if took := time.Since(began); took > d/2 {
			t.Logf("%s took %v", what, took)
		}
	case <-time.After(d):
		t.Fatalf("%s did not answer within %v while a connect was in progress", what, d)
	}
}

// connecting reports whether a connect of id is in progress.
func connecting(m *Manager, id string) bool {
	c := m.lookup(id)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending != nil
}

// While a connect waits for a slow server, State, Tools and Connect with a short
// context of the same id answer at once; concurrent connects share one handshake.
func TestConnectHoldsNoLockAcrossIO(t *testing.T) {
	gate := make(chan struct{})
	u := mcptest.Start(t, mcptest.Options{InitializeGate: gate})
	m := New(nil, nil, nil)
	cfg := httpConfig("slow", u.URL)

	connected := make(chan error, 2)
	go func() { connected <- m.Connect(t.Context(), cfg) }()
	waitfor.True(t, 5*time.Second, "a connect in progress", func() bool { return connecting(m, "slow") })
	go func() { connected <- m.Connect(t.Context(), proto.Clone(cfg).(*mcpgatewayv1.ServerConfig)) }()

	quick(t, "State", time.Second, func() {
		if st := m.State("slow"); st.Connected {
			t.Errorf("state while connecting: %+v", st)
		}
	})
	quick(t, "Tools", time.Second, func() {
		if _, err := m.Tools(t.Context(), "slow", false); !errors.Is(err, ErrNotConnected) {
			t.Errorf("Tools while connecting: %v", err)
		}
	})
	quick(t, "Connect with a short context", time.Second, func() {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := m.Connect(ctx, cfg); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a waiting Connect whose context ends: %v", err)
		}
	})
	close(gate)
	for range 2 {
		if err := <-connected; err != nil {
			t.Fatal(err)
		}
	}
	if got := u.Initializes(); got != 1 {
		t.Fatalf("%d initializes for concurrent connects, want 1", got)
	}
	if st := m.State("slow"); !st.Connected || connecting(m, "slow") {
		t.Fatalf("state after connect: %+v", st)
	}

	// A changed config reconnects: the old session is ended, a new one initialized.
	changed := proto.Clone(cfg).(*mcpgatewayv1.ServerConfig)
	changed.TimeoutMs = proto.Int32(20000)
	if err := m.Connect(t.Context(), changed); err != nil {
		t.Fatal(err)
	}
	if _, cur := m.connected("slow"); u.Initializes() != 2 || u.Deletes() != 1 || cur.GetTimeoutMs() != 20000 {
		t.Fatalf("after a config change: %d initializes, %d deletes, config %v", u.Initializes(), u.Deletes(), cur)
	}
	if err := m.Disconnect(t.Context(), "slow"); err != nil {
		t.Fatal(err)
	}
	noViolations(t, u)
}

// A config that differs only in its tool filters asks nothing new of the connection: it
// joins a connect in progress and keeps an open session, with no new handshake.
func TestFilterChangeKeepsTheConnection(t *testing.T) {
	gate := make(chan struct{})
	u := mcptest.Start(t, mcptest.Options{InitializeGate: gate})
	m := New(nil, nil, nil)
	cfg := httpConfig("f", u.URL)
	connected := make(chan error, 1)
	go func() { connected <- m.Connect(t.Context(), cfg) }()
	waitfor.True(t, 5*time.Second, "a connect in progress", func() bool { return connecting(m, "f") })
	// Had the filtered config started a connect of its own, the first would fail as
	// "reconfigured while connecting".
	filtered := proto.CloneOf(cfg)
	filtered.ToolsAllow = []string{"echo"}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := m.Connect(ctx, filtered); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a filtered config waiting for the connect in progress: %v", err)
	}
	close(gate)
	if err := <-connected; err != nil {
		t.Fatalf("the first connect: %v", err)
	}
	refiltered := proto.CloneOf(cfg)
	refiltered.ToolsDeny = []string{"*"}
	if err := m.Connect(t.Context(), refiltered); err != nil {
		t.Fatal(err)
	}
	if u.Initializes() != 1 || u.Deletes() != 0 || !m.State("f").Connected {
		t.Fatalf("after filter changes: %d initializes, %d deletes, state %+v", u.Initializes(), u.Deletes(), m.State("f"))
	}
	noViolations(t, u)
}

// A Disconnect during a connect wins: the connect fails, the server stays disconnected, and
// nothing the connect opened is left open.
func TestDisconnectDuringConnectWins(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		gate := make(chan struct{})
		u := mcptest.Start(t, mcptest.Options{InitializeGate: gate})
		m := New(nil, nil, nil)
		connected := make(chan error, 1)
		go func() { connected <- m.Connect(t.Context(), httpConfig("d", u.URL)) }()
		waitfor.True(t, 5*time.Second, "a connect in progress", func() bool { return connecting(m, "d") })
		quick(t, "Disconnect", 2*time.Second, func() {
			if err := m.Disconnect(t.Context(), "d"); err != nil {
				t.Error(err)
			}
		})
		if err := <-connected; !errors.Is(err, ErrNotConnected) {
			t.Fatalf("the overtaken connect: %v", err)
		}
		close(gate)
		if st := m.State("d"); st.Connected || connecting(m, "d") {
			t.Fatalf("state after Disconnect won: %+v", st)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		f, th := newFakeHost(t)
		gate := make(chan struct{})
		f.startGate = gate
		m := New(th, nil, nil)
		connected := make(chan error, 1)
		go func() { connected <- m.Connect(t.Context(), stdioConfig("s")) }()
		waitfor.True(t, 5*time.Second, "a connect in progress", func() bool { return connecting(m, "s") })
		quick(t, "Disconnect", 2*time.Second, func() {
			if err := m.Disconnect(t.Context(), "s"); err != nil {
				t.Error(err)
			}
		})
		if err := <-connected; !errors.Is(err, ErrNotConnected) {
			t.Fatalf("the overtaken connect: %v", err)
		}
		if f.count(f.stopped, "s") != 1 {
			t.Fatal("the child a cancelled connect may have started was not stopped")
		}
		close(gate)
		if st := m.State("s"); st.Connected || connecting(m, "s") {
			t.Fatalf("state after Disconnect won: %+v", st)
		}
	})
}

// A call goes to the connection of the config it is given: after a server's URL changed, a
// call with the new config is not sent to the session of the old one, and a call with a
// disabled config is refused even while a session is open.
func TestCallUsesTheConnectionOfItsConfig(t *testing.T) {
	before, after := mcptest.Start(t, mcptest.Options{}), mcptest.Start(t, mcptest.Options{})
	m := New(nil, nil, nil)
	t.Cleanup(func() { m.Close(context.Background()) })
	old := httpConfig("moved", before.URL)
	if err := m.Connect(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	moved := proto.CloneOf(old)
	moved.Url = after.URL
	params := []byte(`{"name":"echo","arguments":{"text":"x"}}`)
	if _, err := m.DispatchToolCall(t.Context(), moved, params, 0, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if b, a := len(before.ToolCalls()), len(after.ToolCalls()); b != 0 || a != 1 {
		t.Fatalf("a call with the new URL reached the old server %d times and the new one %d times, want 0 and 1", b, a)
	}
	if before.Deletes() != 1 {
		t.Errorf("the old server's session was ended %d times, want 1", before.Deletes())
	}
	off := proto.CloneOf(moved)
	off.Enabled = proto.Bool(false)
	if _, err := m.DispatchToolCall(t.Context(), off, params, 0, Hooks{}); !errors.Is(err, ErrDisabled) {
		t.Fatalf("a call with a disabled config: %v, want ErrDisabled", err)
	}
	if n := len(after.ToolCalls()); n != 1 {
		t.Fatalf("a call with a disabled config reached the server (%d calls)", n)
	}
	noViolations(t, before)
	noViolations(t, after)
}

// Info and ListTools connect as Call does: to the connection of the config they are given.
func TestInfoAndListToolsUseTheConnectionOfTheirConfig(t *testing.T) {
	before, after := mcptest.Start(t, mcptest.Options{}), mcptest.Start(t, mcptest.Options{Tools: []string{"moved"}})
	m := New(nil, nil, nil)
	t.Cleanup(func() { m.Close(context.Background()) })
	old := httpConfig("m", before.URL)
	if _, err := m.Info(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	moved := proto.CloneOf(old)
	moved.Url = after.URL
	tools, err := m.ListTools(t.Context(), moved, false)
	if err != nil || len(tools) != 2 || after.Initializes() != 1 {
		t.Fatalf("ListTools with the new URL: %d tools, %v; the new server saw %d initializes", len(tools), err, after.Initializes())
	}
	off := proto.CloneOf(moved)
	off.Enabled = proto.Bool(false)
	if _, err := m.Info(t.Context(), off); !errors.Is(err, ErrDisabled) {
		t.Fatalf("Info of a disabled config: %v", err)
	}
}

// TestHoldKeepsAServerDisconnected: after an administrator's disconnect (Hold), a call, a tool
// list or a connect does not open the server again — it fails with HeldError, saying how to
// connect it — until Release; then a call connects it as before. (A call used to reconnect it
// silently.)
func TestHoldKeepsAServerDisconnected(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	m := New(nil, nil, nil)
	t.Cleanup(func() { m.Close(context.Background()) })
	cfg := httpConfig("held", u.URL)
	params := []byte(`{"name":"echo","arguments":{"text":"x"}}`)
	if _, err := m.DispatchToolCall(t.Context(), cfg, params, 0, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Hold(t.Context(), "held"); err != nil {
		t.Fatal(err)
	}
	var held *HeldError
	for what, f := range map[string]func() error{
		"a call":    func() error { _, err := m.DispatchToolCall(t.Context(), cfg, params, 0, Hooks{}); return err },
		"tool list": func() error { _, err := m.ListTools(t.Context(), cfg, true); return err },
		"connect":   func() error { return m.Connect(t.Context(), cfg) },
	} {
		if err := f(); !errors.As(err, &held) || !errors.Is(err, ErrNotConnected) || held.Error() != `MCP server "held" was disconnected by an administrator: connect it (POST /internal/mcp/servers/held/connect, or the console's Servers view) to call it again` {
			t.Fatalf("%s while held: %v", what, err)
		}
	}
	if st := m.State("held"); st.Connected || !m.Held("held") {
		t.Fatalf("held: %+v", st)
	}
	if n := len(u.ToolCalls()); n != 1 {
		t.Fatalf("the held server got %d calls, want the 1 before the hold", n)
	}
	m.Release("held")
	if _, err := m.DispatchToolCall(t.Context(), cfg, params, 0, Hooks{}); err != nil || len(u.ToolCalls()) != 2 {
		t.Fatalf("after Release: %v, %d calls", err, len(u.ToolCalls()))
	}
	noViolations(t, u)
}
