// Package upstream connects mcpgateway to external MCP servers: stdio servers through the
// tool host, Streamable HTTP servers directly with
// mcp-go's client. A connection keeps what the handshake said and the server's tools.
// Results pass through as raw JSON, decoded once by whoever finally reads them.
//
// No lock is held across network I/O: a connection is opened by one goroutine per server
// (single flight) while every caller waits for it with its own context, so State, Tools and
// Disconnect never wait behind a handshake.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/toolhosts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Info is what the handshake told about a server.
type Info struct {
	ProtocolVersion string
	ServerInfo      map[string]any
	Capabilities    map[string]any
	// Instructions is the server's "instructions" from its initialize result ("" when none).
	Instructions string
}

// session is one open connection to one server.
type session interface {
	info() Info
	tools(ctx context.Context, refresh bool) ([]json.RawMessage, error)
	call(ctx context.Context, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error)
	// callWith is call with a caller's hooks: the server's progress notifications of this
	// call reach hooks.OnProgress with the caller's token (when params carry
	// _meta.progressToken), and its requests that the caller's client accepts reach
	// hooks.OnRequest.
	callWith(ctx context.Context, method string, params json.RawMessage, timeout time.Duration, hooks Hooks) (json.RawMessage, error)
	close(ctx context.Context) error
}

// Manager keeps the connections.
type Manager struct {
	// hosts are the tool hosts stdio servers run on, each server on the one its placement
	// picks (toolhosts.Pool.Place).
	hosts     *toolhosts.Pool
	lookupEnv func(string) (string, bool)
	log       *slog.Logger

	mu    sync.Mutex
	conns map[string]*conn

	// notify receives the notifications servers send outside a call's progress (see
	// OnNotification).
	notify atomic.Pointer[func(serverID string, msg []byte)]
	// relayed is how far the Watch streams have passed on each stdio server's notifications
	// (order.go).
	relayed relayed
	// waiting are the HTTP servers' requests relayed to clients, waiting for Answer.
	waiting *waiters
	// pins decides which listed tools are served (PinTools); nil: all of them.
	pins atomic.Pointer[Pins]
	// maxEventBytes bounds a line of an HTTP server's event stream (MaxEventBytes; a test
	// sets a smaller one, so that reaching it takes no time).
	maxEventBytes int
	// oauth signs in to the HTTP servers whose config has an oauth block (SetOAuth); nil: such
	// a server cannot connect.
	oauth atomic.Pointer[oauthclient.Signer]
}

// SetOAuth gives the manager the signer of the HTTP servers that sign in by OAuth.
func (m *Manager) SetOAuth(s *oauthclient.Signer) { m.oauth.Store(s) }

// OAuth is the manager's signer (nil when none was set).
func (m *Manager) OAuth() *oauthclient.Signer { return m.oauth.Load() }

// conn is the connection state of one server id. mu guards the fields and is held only to
// read or write them, never across I/O.
type conn struct {
	mu      sync.Mutex
	cfg     *mcpgatewayv1.ServerConfig // the config of sess, or of the connect in progress
	sess    session
	lastErr string
	pending *attempt
	// homeless is set when the connection was dropped because no tool host could run the
	// server any more: it connects again as soon as one can (FollowToolHost).
	homeless bool
	// held is set by an administrator's disconnect (Hold): no call connects the server again
	// until an administrator connects it (Connect).
	held bool
}

// attempt is one connect in progress. err is set before done is closed.
type attempt struct {
	cfg *mcpgatewayv1.ServerConfig
	// host is the tool host a stdio server connects on (zero for HTTP).
	host   toolhosts.Host
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	// shutdown is set (under conn.mu) when Manager.Close cancelled the connect: a stdio
	// child it may have started is left to the tool host, as Close leaves every child.
	shutdown bool
}

// New returns a manager using the one tool host th for stdio servers. lookupEnv resolves
// bearer_token references (os.LookupEnv when nil).
func New(th toolhostv1.ToolHostServiceClient, lookupEnv func(string) (string, bool), log *slog.Logger) *Manager {
	return NewPlaced(toolhosts.Fixed("", th), lookupEnv, log)
}

// NewPlaced returns a manager that runs each stdio server on the tool host of hosts its
// placement picks, and moves it when that changes (FollowToolHost). The caller closes hosts.
func NewPlaced(hosts *toolhosts.Pool, lookupEnv func(string) (string, bool), log *slog.Logger) *Manager {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if log == nil {
		log = slog.Default()
	}
	return &Manager{hosts: hosts, lookupEnv: lookupEnv, log: log, conns: map[string]*conn{}, waiting: newWaiters(), maxEventBytes: MaxEventBytes}
}

// Close ends the HTTP sessions and the connects in progress. Stdio children are left to the
// tool host (another mcpgateway replica may be using them; the tool host's idle timeout
// stops unused ones).
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	conns := m.conns
	m.conns = map[string]*conn{}
	m.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		s, a := c.sess, c.pending
		c.sess, c.pending, c.homeless = nil, nil, false
		if a != nil {
			a.shutdown = true
		}
		c.mu.Unlock()
		if a != nil {
			a.cancel()
		}
		if h, ok := s.(*httpSession); ok {
			_ = h.close(ctx)
		}
	}
}

func (m *Manager) get(id string) *conn {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.conns[id]
	if c == nil {
		c = &conn{}
		m.conns[id] = c
	}
	return c
}

func (m *Manager) lookup(id string) *conn {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conns[id]
}

// msTimeout is a timeout_ms value as a duration (0: the default).
func msTimeout(ms int32) time.Duration {
	if ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return serverconfig.DefaultTimeoutMs * time.Millisecond
}

func timeoutOf(cfg *mcpgatewayv1.ServerConfig) time.Duration { return msTimeout(cfg.GetTimeoutMs()) }

func (m *Manager) open(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, host toolhosts.Host) (session, error) {
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(cfg))
	defer cancel()
	// A failed open returns a nil session, not a nil pointer in a non-nil interface.
	var s session
	var err error
	if cfg.GetTransport() == serverconfig.TransportHTTP {
		var h *httpSession
		if h, err = openHTTP(ctx, cfg, m.lookupEnv, m.emit, m.waiting, m.maxEventBytes, m.admit(cfg.GetId()), m.oauth.Load(), m.log); err == nil {
			s = h
		}
	} else {
		var st *stdioSession
		if st, err = openStdio(ctx, cfg, host, m.hosts, &m.relayed, m.admit(cfg.GetId()), m.log); err == nil {
			s = st
		}
	}
	return s, err
}

// Connect opens (or keeps) the connection of cfg. A changed config reconnects, unless only
// its tool filters changed (serverconfig.SameConnection), which ask nothing of the
// connection. Concurrent callers with the same config share one connect; each waits for it with its own ctx, and
// the connect goes on, bounded by the server's timeout, when a caller stops waiting.
// A server an administrator disconnected (Hold) is not connected until Release: Connect
// fails with HeldError.
func (m *Manager) Connect(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error {
	if !cfg.GetEnabled() {
		return &DisabledError{ID: cfg.GetId()}
	}
	if m.Held(cfg.GetId()) { // before placing, which may wait for a tool host
		return &HeldError{ID: cfg.GetId()}
	}
	host, err := m.place(ctx, cfg)
	c := m.get(cfg.GetId())
	c.mu.Lock()
	if c.held {
		c.mu.Unlock()
		return &HeldError{ID: cfg.GetId()}
	}
	if err != nil {
		if c.sess == nil && c.pending == nil {
			c.lastErr = err.Error()
		}
		c.mu.Unlock()
		return err
	}
	if c.sess != nil && serverconfig.SameConnection(c.cfg, cfg) && sameHost(hostOf(c.sess), host) {
		c.mu.Unlock()
		return nil
	}
	a := c.pending
	if a == nil || !serverconfig.SameConnection(a.cfg, cfg) || !sameHost(a.host, host) {
		a = m.start(ctx, c, cfg, host)
	}
	c.mu.Unlock()
	select {
	case <-a.done:
		return a.err
	case <-ctx.Done():
		return fmt.Errorf("%w: connecting %q: %w", ErrUpstream, cfg.GetId(), ctx.Err())
	}
}

// place is the tool host a stdio server of cfg runs on (toolhosts.Pool.Place: its pin, else
// its rendezvous placement, waiting a little when none is healthy); zero for HTTP.
func (m *Manager) place(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) (toolhosts.Host, error) {
	if cfg.GetTransport() == serverconfig.TransportHTTP {
		return toolhosts.Host{}, nil
	}
	h, err := m.hosts.Place(ctx, cfg.GetId(), cfg.GetToolHost())
	if err != nil {
		return h, fmt.Errorf("%w: %q: %w", ErrUpstream, cfg.GetId(), err)
	}
	return h, nil
}

// hostOf is the tool host of a stdio session (zero for anything else).
func hostOf(s session) toolhosts.Host {
	if st, ok := s.(*stdioSession); ok {
		return st.host
	}
	return toolhosts.Host{}
}

func sameHost(a, b toolhosts.Host) bool { return a.Name == b.Name && a.Addr == b.Addr }

// start begins a connect of cfg on host, replacing the connection or connect in progress of
// c (whose lock the caller holds).
func (m *Manager) start(ctx context.Context, c *conn, cfg *mcpgatewayv1.ServerConfig, host toolhosts.Host) *attempt {
	prev, old := c.pending, c.sess
	if prev != nil {
		prev.cancel()
	}
	// The connect keeps the caller's context values (the request id of its log lines), not
	// its cancellation: other callers may be waiting for it.
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &attempt{cfg: cfg, host: host, cancel: cancel, done: make(chan struct{})}
	c.pending, c.sess, c.cfg, c.homeless = a, nil, cfg, false
	go m.run(actx, c, a, prev, old)
	return a
}

// run is one connect: it waits for the connect it replaces to end, closes the connection it
// replaces, opens the new one, and installs it unless a Disconnect or another config came
// first, in which case it closes what it opened.
func (m *Manager) run(ctx context.Context, c *conn, a *attempt, prev *attempt, old session) {
	defer a.cancel()
	if prev != nil {
		<-prev.done
	}
	if old != nil {
		m.retire(ctx, a, old)
	}
	s, err := m.open(ctx, a.cfg, a.host)
	c.mu.Lock()
	current, shutdown := c.pending == a, a.shutdown
	if current {
		c.pending = nil
		if err == nil {
			c.sess, c.lastErr = s, ""
		} else {
			c.lastErr = err.Error()
		}
	}
	c.mu.Unlock()
	if !current {
		m.discard(ctx, a.cfg, a.host, s, !shutdown)
		err = fmt.Errorf("%w: %q was disconnected or reconfigured while connecting", ErrNotConnected, a.cfg.GetId())
	}
	a.err = err
	close(a.done)
}

// retire closes the connection a connect replaces. A stdio server that moves to another tool
// host is stopped on the old one only when that one is still healthy (a dead one took its
// children along), and without holding up the new connection: after the calls in flight
// there, of every replica, have ended (StopRequest.drain_ms).
func (m *Manager) retire(ctx context.Context, a *attempt, old session) {
	if st, ok := old.(*stdioSession); ok && !sameHost(st.host, a.host) {
		if !m.hosts.Up(st.host) {
			m.log.DebugContext(ctx, "not stopping the server on the tool host it left: that tool host is gone", "server", a.cfg.GetId(), "tool_host", st.host.String())
			return
		}
		go m.stopMoved(context.WithoutCancel(ctx), a.cfg, st)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, timeoutOf(a.cfg))
	defer cancel()
	if err := old.close(cctx); err != nil {
		m.log.WarnContext(ctx, "closing the previous connection failed", "server", a.cfg.GetId(), "err", err)
	}
}

// stopMoved stops a server on the tool host it moved away from, once the calls in flight
// there have ended (up to the server's timeout).
func (m *Manager) stopMoved(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, st *stdioSession) {
	drain := timeoutOf(cfg)
	ctx, cancel := context.WithTimeout(ctx, drain+stopSlack)
	defer cancel()
	if cur, _ := m.connected(cfg.GetId()); cur != nil && sameHost(hostOf(cur), st.host) {
		return // moved back meanwhile: that child is the one in use again
	}
	_, err := st.th.Stop(ctx, &toolhostv1.StopRequest{Id: cfg.GetId(), DrainMs: int32(drain.Milliseconds())})
	switch {
	case err == nil:
		m.log.InfoContext(ctx, "stopped the server on the tool host it moved away from", "server", cfg.GetId(), "tool_host", st.host.String())
	case status.Code(err) != codes.NotFound:
		m.log.WarnContext(ctx, "stopping the server on the tool host it moved away from failed (its idle timeout stops it)", "server", cfg.GetId(),
			"tool_host", st.host.String(), "err", err)
	}
}

// stopSlack is the time a Stop gets beyond its drain, for the child to exit.
const stopSlack = 10 * time.Second

// discard closes what a connect overtaken by a Disconnect or another config opened. With
// stopStdio, a stdio child is stopped even when the connect failed half way (the tool host
// may have started it); without, stdio children are left to the tool host.
func (m *Manager) discard(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, host toolhosts.Host, s session, stopStdio bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeoutOf(cfg))
	defer cancel()
	if cfg.GetTransport() != serverconfig.TransportHTTP {
		if !stopStdio {
			return
		}
		if s == nil {
			s = &stdioSession{th: host.Client, host: host, spec: &toolhostv1.ServerSpec{Id: cfg.GetId()}, log: m.log}
		}
	}
	if s != nil {
		_ = s.close(ctx)
	}
}

// Disconnect closes the connection of id (a no-op when none is open). A connect in progress
// is cancelled: it fails, and the server stays disconnected.
func (m *Manager) Disconnect(ctx context.Context, id string) error {
	c := m.lookup(id)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	s, a := c.sess, c.pending
	c.sess, c.pending, c.homeless = nil, nil, false
	c.mu.Unlock()
	if a != nil {
		a.cancel()
		// The cancelled connect closes what it opened; wait for it, so that nothing of it
		// is left once Disconnect returns.
		select {
		case <-a.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s != nil {
		return s.close(ctx)
	}
	return nil
}

// Hold is an administrator's disconnect: Disconnect, and nothing connects the server again
// until Release (an administrator's connect) — on this replica: the hold is not shared with
// other replicas, and a restart forgets it.
func (m *Manager) Hold(ctx context.Context, id string) error {
	c := m.get(id)
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
	return m.Disconnect(ctx, id)
}

// Release ends a Hold of id: an administrator connects it again.
func (m *Manager) Release(id string) {
	if c := m.lookup(id); c != nil {
		c.mu.Lock()
		c.held = false
		c.mu.Unlock()
	}
}

// Held reports whether an administrator's disconnect holds id.
func (m *Manager) Held(id string) bool {
	c := m.lookup(id)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// Forget disconnects id and drops its state (on delete).
func (m *Manager) Forget(ctx context.Context, id string) {
	_ = m.Disconnect(ctx, id)
	m.mu.Lock()
	delete(m.conns, id)
	m.mu.Unlock()
}

// connected returns the open session of id, or nil.
func (m *Manager) connected(id string) (session, *mcpgatewayv1.ServerConfig) {
	c := m.lookup(id)
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return nil, nil
	}
	return c.sess, c.cfg
}

// Tools returns the tools of a connected server (refresh lists them again), without
// connecting one that is not.
func (m *Manager) Tools(ctx context.Context, id string, refresh bool) ([]json.RawMessage, error) {
	s, _ := m.connected(id)
	if s == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotConnected, id)
	}
	return m.tools(ctx, id, s, refresh)
}

// Listed returns the tools a connected server listed last, without I/O, and their version: a
// number that changes whenever another list is kept (a refresh, a list_changed, a reconnect).
// ok is false when the server is not connected (or has not been listed yet). The slice is
// shared: callers must not modify it.
func (m *Manager) Listed(id string) (tools []json.RawMessage, version uint64, ok bool) {
	s, _ := m.connected(id)
	var c *toolCache
	switch s := s.(type) {
	case *stdioSession:
		c = &s.cache
	case *httpSession:
		c = &s.cache
	default:
		return nil, 0, false
	}
	return c.listing()
}

// ListTools returns the tools of the server of cfg (refresh lists them again), connecting
// first when needed, as Call does.
func (m *Manager) ListTools(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, refresh bool) ([]json.RawMessage, error) {
	var tools []json.RawMessage
	_, err := m.onSession(ctx, cfg, 0, func(s session, _ time.Duration) (json.RawMessage, error) {
		var err error
		tools, err = m.tools(ctx, cfg.GetId(), s, refresh)
		return nil, err
	})
	return tools, err
}

// Info returns what the handshake of the server of cfg said, connecting first when needed,
// as Call does.
func (m *Manager) Info(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) (Info, error) {
	var inf Info
	_, err := m.onSession(ctx, cfg, 0, func(s session, _ time.Duration) (json.RawMessage, error) {
		inf = s.info()
		return nil, nil
	})
	return inf, err
}

// tools lists the tools of session s of id, recording a failure as the server's last error.
func (m *Manager) tools(ctx context.Context, id string, s session, refresh bool) ([]json.RawMessage, error) {
	t, err := s.tools(ctx, refresh)
	if err != nil {
		if c := m.lookup(id); c != nil {
			c.mu.Lock()
			if c.sess == s {
				c.lastErr = err.Error()
			}
			c.mu.Unlock()
		}
	}
	return t, err
}

// Call sends one request to the server of cfg, connecting first when needed (servers
// reconnect on first use after a restart of mcpgateway).
func (m *Manager) Call(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	if err := bypass(method); err != nil {
		return nil, err
	}
	res, err := m.onSession(ctx, cfg, timeout, func(s session, timeout time.Duration) (json.RawMessage, error) {
		return s.call(ctx, method, params, timeout)
	})
	return m.admitPage(ctx, cfg, method, res, err)
}

// ready returns the open session of cfg and the call's timeout (the server's timeout_ms
// unless timeout is set). A session opened with another connection config (the server was
// reconfigured, or the caller holds an older config than the one connected) is not used:
// Connect(cfg) opens cfg's own, and refuses a disabled cfg. The pointer check keeps the
// common case — the config that connected, as the registry cache hands it out — cheap.
func (m *Manager) ready(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, timeout time.Duration) (session, time.Duration, error) {
	s, cur := m.connected(cfg.GetId())
	if s == nil || !cfg.GetEnabled() || (cur != cfg && !serverconfig.SameConnection(cur, cfg)) || !m.placed(s, cfg) {
		if err := m.Connect(ctx, cfg); err != nil {
			return nil, 0, err
		}
		if s, cur = m.connected(cfg.GetId()); s == nil || !serverconfig.SameConnection(cur, cfg) {
			return nil, 0, fmt.Errorf("%w: %q was disconnected or reconfigured while connecting", ErrNotConnected, cfg.GetId())
		}
	}
	if timeout <= 0 {
		timeout = timeoutOf(cfg)
	}
	return s, timeout, nil
}

// placed reports whether session s of cfg is on the tool host its placement picks now: when
// the healthy tool hosts changed since it was last checked (toolhosts.Pool.Generation), it
// is checked again; otherwise it costs one atomic load.
func (m *Manager) placed(s session, cfg *mcpgatewayv1.ServerConfig) bool {
	st, ok := s.(*stdioSession)
	if !ok {
		return true
	}
	gen := m.hosts.Generation()
	if st.placedAt.Load() == gen {
		return true
	}
	h, err := m.hosts.Placement(cfg.GetId(), cfg.GetToolHost())
	if err != nil || !sameHost(h, st.host) {
		return false
	}
	st.placedAt.Store(gen)
	return true
}

// onSession runs f on the ready session of cfg, and once more when the server's tool host went
// away before anything of the call left (errElsewhere): the server is placed again, on
// another tool host, and connected there. A call that reached the tool host is never sent
// twice.
func (m *Manager) onSession(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, timeout time.Duration, f func(s session, timeout time.Duration) (json.RawMessage, error)) (json.RawMessage, error) {
	for try := 0; ; try++ {
		s, t, err := m.ready(ctx, cfg, timeout)
		var res json.RawMessage
		if err == nil {
			res, err = f(s, t)
		}
		if try == 0 && errors.Is(err, errElsewhere) && ctx.Err() == nil {
			m.log.InfoContext(ctx, "the tool host went away before the call left: calling again where the server runs now", "server", cfg.GetId(), "err", err)
			continue
		}
		return res, err
	}
}

// CallProgress is Call for a request whose params carry _meta.progressToken: the server's
// notifications/progress of this call reach onProgress (JSON-RPC notifications with the
// caller's own token) before CallProgress returns. Stdio servers are called through the tool
// host's CallStream; HTTP servers get a token of Zest's own, mapped back on the way out.
func (m *Manager) CallProgress(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, method string, params json.RawMessage, timeout time.Duration, onProgress func([]byte)) (json.RawMessage, error) {
	if err := bypass(method); err != nil {
		return nil, err
	}
	res, err := m.onSession(ctx, cfg, timeout, func(s session, timeout time.Duration) (json.RawMessage, error) {
		return s.callWith(ctx, method, params, timeout, Hooks{OnProgress: onProgress})
	})
	return m.admitPage(ctx, cfg, method, res, err)
}

// OnNotification sets f to receive every notification a server sends that is not the
// progress of a call made with CallProgress: list_changed, notifications/message,
// notifications/resources/updated, … of stdio servers (from the tool host's Watch, whether or
// not this manager has them connected) and of connected HTTP servers. f must not block.
func (m *Manager) OnNotification(f func(serverID string, msg []byte)) { m.notify.Store(&f) }

// emit hands one server notification to the OnNotification function, if any.
func (m *Manager) emit(serverID string, msg []byte) {
	if f := m.notify.Load(); f != nil {
		(*f)(serverID, msg)
	}
}

// State is a server's connection state.
type State struct {
	Connected bool
	LastError string
	Info      Info
}

// State reports the connection state of id. It never waits for I/O.
func (m *Manager) State(id string) State {
	c := m.lookup(id)
	if c == nil {
		return State{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := State{LastError: c.lastErr}
	if c.sess != nil {
		st.Connected, st.Info = true, c.sess.info()
	}
	return st
}

// ToolHost is the name of the tool host a stdio server of cfg runs on (connected here), else
// the one its placement picks now, else the one its config pins (down); "" for HTTP servers
// and when no tool host is healthy. It never waits for I/O.
func (m *Manager) ToolHost(cfg *mcpgatewayv1.ServerConfig) string {
	if cfg.GetTransport() == serverconfig.TransportHTTP {
		return ""
	}
	if s, _ := m.connected(cfg.GetId()); s != nil {
		if st, ok := s.(*stdioSession); ok {
			return st.host.Name
		}
	}
	if h, err := m.hosts.Placement(cfg.GetId(), cfg.GetToolHost()); err == nil {
		return h.Name
	}
	return cfg.GetToolHost()
}

// Test connects to cfg under a throwaway id, lists its tools and disconnects.
func (m *Manager) Test(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) (Info, []json.RawMessage, error) {
	host, err := m.place(ctx, cfg)
	if err != nil {
		return Info{}, nil, err
	}
	s, err := m.open(ctx, cfg, host)
	if err != nil {
		return Info{}, nil, err
	}
	defer s.close(context.WithoutCancel(ctx)) // best effort
	tools, err := s.tools(ctx, false)
	return s.info(), tools, err
}
