// Package upstream connects mcpgateway to external MCP servers: stdio servers through the
// tool host, Streamable HTTP servers directly with
// mcp-go's client. A connection keeps what the handshake said and the server's tools.
// Results pass through as raw JSON, decoded once by whoever finally reads them.
package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

// Info is what the handshake told about a server.
type Info struct {
	ProtocolVersion string
	ServerInfo      map[string]any
	Capabilities    map[string]any
}

// session is one open connection to one server.
type session interface {
	info() Info
	tools(ctx context.Context, refresh bool) ([]json.RawMessage, error)
	call(ctx context.Context, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error)
	close(ctx context.Context) error
}

// Manager keeps the connections.
type Manager struct {
	toolhost  toolhostv1.ToolHostServiceClient
	lookupEnv func(string) (string, bool)
	log       *slog.Logger

	mu    sync.Mutex
	conns map[string]*conn
}

// conn is the connection state of one server id.
type conn struct {
	mu      sync.Mutex
	cfg     *mcpgatewayv1.ServerConfig
	sess    session
	lastErr string
}

// New returns a manager using the tool host for stdio servers. lookupEnv resolves
// bearer_token references (os.LookupEnv when nil).
func New(th toolhostv1.ToolHostServiceClient, lookupEnv func(string) (string, bool), log *slog.Logger) *Manager {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if log == nil {
		log = slog.Default()
	}
	return &Manager{toolhost: th, lookupEnv: lookupEnv, log: log, conns: map[string]*conn{}}
}

// Close ends the HTTP sessions. Stdio children are left to the tool host (another
// mcpgateway replica may be using them; the tool host's idle timeout stops unused ones).
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	conns := m.conns
	m.conns = map[string]*conn{}
	m.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		if h, ok := c.sess.(*httpSession); ok {
			_ = h.close(ctx)
		}
		c.sess = nil
		c.mu.Unlock()
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

func timeoutOf(cfg *mcpgatewayv1.ServerConfig) time.Duration {
	if t := cfg.GetTimeoutMs(); t > 0 {
		return time.Duration(t) * time.Millisecond
	}
	return serverconfig.DefaultTimeoutMs * time.Millisecond
}

func (m *Manager) open(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) (session, error) {
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(cfg))
	defer cancel()
	if cfg.GetTransport() == serverconfig.TransportHTTP {
		return openHTTP(ctx, cfg, m.lookupEnv, m.log)
	}
	return openStdio(ctx, cfg, m.toolhost)
}

// Connect opens (or keeps) the connection of cfg. A changed config reconnects.
func (m *Manager) Connect(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error {
	if !cfg.GetEnabled() {
		return fmt.Errorf("%w: %q is disabled; enable it to connect", ErrDisabled, cfg.GetId())
	}
	c := m.get(cfg.GetId())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil && sameConfig(c.cfg, cfg) {
		return nil
	}
	if c.sess != nil {
		_ = c.sess.close(ctx)
		c.sess = nil
	}
	c.cfg = cfg
	s, err := m.open(ctx, cfg)
	if err != nil {
		c.lastErr = err.Error()
		return err
	}
	c.sess, c.lastErr = s, ""
	return nil
}

func sameConfig(a, b *mcpgatewayv1.ServerConfig) bool {
	if a == nil || b == nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// Disconnect closes the connection of id (a no-op when none is open).
func (m *Manager) Disconnect(ctx context.Context, id string) error {
	m.mu.Lock()
	c := m.conns[id]
	m.mu.Unlock()
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if c.sess != nil {
		err = c.sess.close(ctx)
		c.sess = nil
	}
	return err
}

// Forget disconnects id and drops its state (on delete).
func (m *Manager) Forget(ctx context.Context, id string) {
	_ = m.Disconnect(ctx, id)
	m.mu.Lock()
	delete(m.conns, id)
	m.mu.Unlock()
}

// Config returns the config of a connected server (nil when it is not connected), so that
// calls to it need no registry read.
func (m *Manager) Config(id string) *mcpgatewayv1.ServerConfig {
	m.mu.Lock()
	c := m.conns[id]
	m.mu.Unlock()
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return nil
	}
	return c.cfg
}

// Tools returns the tools of a connected server (refresh lists them again).
func (m *Manager) Tools(ctx context.Context, id string, refresh bool) ([]json.RawMessage, error) {
	c := m.get(id)
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotConnected, id)
	}
	t, err := s.tools(ctx, refresh)
	if err != nil {
		c.mu.Lock()
		c.lastErr = err.Error()
		c.mu.Unlock()
	}
	return t, err
}

// Call sends one request to the server of cfg, connecting first when needed (servers
// reconnect on first use after a restart of mcpgateway).
func (m *Manager) Call(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	c := m.get(cfg.GetId())
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s == nil {
		if err := m.Connect(ctx, cfg); err != nil {
			return nil, err
		}
		c.mu.Lock()
		s = c.sess
		c.mu.Unlock()
		if s == nil {
			return nil, fmt.Errorf("%w: %q", ErrNotConnected, cfg.GetId())
		}
	}
	if timeout <= 0 {
		timeout = timeoutOf(cfg)
	}
	return s.call(ctx, method, params, timeout)
}

// State is a server's connection state.
type State struct {
	Connected bool
	LastError string
	Info      Info
}

// State reports the connection state of id.
func (m *Manager) State(id string) State {
	m.mu.Lock()
	c := m.conns[id]
	m.mu.Unlock()
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

// Test connects to cfg under a throwaway id, lists its tools and disconnects.
func (m *Manager) Test(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) (Info, []json.RawMessage, error) {
	s, err := m.open(ctx, cfg)
	if err != nil {
		return Info{}, nil, err
	}
	defer s.close(context.WithoutCancel(ctx)) //nolint:errcheck // best effort
	tools, err := s.tools(ctx, false)
	return s.info(), tools, err
}
