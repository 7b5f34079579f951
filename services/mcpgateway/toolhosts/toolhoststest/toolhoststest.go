// Package toolhoststest runs real tool hosts (services/toolhost/host) in the test process, on
// 127.0.0.1, each under a name, that a test can kill abruptly (every connection closed at
// once, as when the process dies) and start again at the same address; and a small stdio MCP
// server, the test binary itself, for them to run (Main, Server).
package toolhoststest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/waitfor"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/host"
)

// Key is the service key the tool hosts require.
const Key = "toolhoststest-service-key-0123456789"

// childArg, as the test binary's first argument, runs it as the stdio MCP server.
const childArg = "toolhoststest-mcp-server"

// Main runs the tests, or the stdio MCP server when the binary was started as one (Server):
// call it from TestMain.
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		serve()
		// Not os.Exit: under -race, it sleeps a second (GORACE atexit_sleep_ms) before the
		// process ends, and the tool host's stop would wait it out.
		syscall.Exit(0)
	}
	os.Exit(m.Run())
}

// Server is the command and arguments of the stdio MCP server (a test binary whose TestMain
// calls Main). Its tools: echo (arguments.message back), slow (echo after arguments.ms
// milliseconds; it first creates the file arguments.arrived, when given: see Arrival), pid
// (its process id), roots (asks its client roots/list and answers with the client's answer
// as JSON).
func Server(t testing.TB) (string, []string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe, []string{childArg}
}

// Arrival returns the "arrived" argument of a slow call, and a function that waits until
// that call has reached the server (it is in flight there).
func Arrival(t testing.TB) (string, func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "arrived")
	return path, func() {
		t.Helper()
		waitfor.True(t, 10*time.Second, "the slow call at the server", func() bool {
			_, err := os.Stat(path)
			return err == nil
		})
	}
}

// Host is one tool host served in the test process.
type Host struct {
	t    testing.TB
	name string
	addr string

	mu     sync.Mutex
	lis    *trackingListener
	cancel context.CancelFunc
	done   chan struct{}
}

// Start serves a tool host named name on a free 127.0.0.1 port; it stops when the test ends.
func Start(t testing.TB, name string) *Host {
	t.Helper()
	h := &Host{t: t, name: name}
	h.listen("127.0.0.1:0")
	t.Cleanup(h.Stop)
	return h
}

func (h *Host) listen(addr string) {
	h.t.Helper()
	var l net.Listener
	// The port of a host killed a moment ago may take a few tries to bind again.
	waitfor.NoError(h.t, 5*time.Second, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	cfg := host.DefaultConfig()
	cfg.Name, cfg.StopGrace, cfg.Keys.Service = h.name, time.Second, Key
	cfg.ServerUID = "0" // no shim here, and the fixtures lie in root's private temporary directories
	th := host.New(cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	tl := &trackingListener{Listener: l, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() { defer close(done); _ = th.Serve(ctx, tl) }()
	h.mu.Lock()
	h.addr, h.lis, h.cancel, h.done = l.Addr().String(), tl, cancel, done
	h.mu.Unlock()
}

// Name is the tool host's name.
func (h *Host) Name() string { return h.name }

// Addr is its address.
func (h *Host) Addr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addr
}

// Kill closes the listener and every connection at once, as the death of the process does
// (its clients see their connections drop), and returns; the tool host's children are
// stopped in the background (Restart and the test's end wait for that).
func (h *Host) Kill() {
	h.mu.Lock()
	lis, cancel := h.lis, h.cancel
	h.lis, h.cancel = nil, nil
	h.mu.Unlock()
	if lis == nil {
		return
	}
	lis.kill()
	cancel()
}

// Stop stops the tool host gracefully (health NOT_SERVING, then a drain).
func (h *Host) Stop() {
	h.mu.Lock()
	cancel, done := h.cancel, h.done
	h.lis, h.cancel = nil, nil
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if done != nil {
		<-done
	}
}

// Restart serves the tool host again, at the same address, after a Kill or a Stop.
func (h *Host) Restart() {
	h.t.Helper()
	h.Stop() // a killed one's children are gone first
	h.listen(h.Addr())
}

// Client dials the tool host.
func (h *Host) Client() toolhostv1.ToolHostServiceClient {
	h.t.Helper()
	cc, err := grpcdial.Dial(h.Addr(), Key, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cc.Close() })
	return toolhostv1.NewToolHostServiceClient(cc)
}

// trackingListener keeps the connections it accepted, to close them all at once.
type trackingListener struct {
	net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	killed bool
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.killed {
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns[c] = struct{}{}
	return c, nil
}

func (l *trackingListener) kill() {
	l.mu.Lock()
	l.killed = true
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	l.Listener.Close()
	for c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as the kernel sends for a killed process's sockets
		}
		c.Close()
	}
}

// serve is the stdio MCP server: one JSON-RPC message per line, each request answered from
// a goroutine of its own (slow calls do not hold the others).
func serve() {
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	write := func(v any) {
		b, _ := json.Marshal(v)
		mu.Lock()
		defer mu.Unlock()
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	answer := func(id json.RawMessage, result any) {
		write(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	}
	text := func(s string) any { return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}} }
	schema := map[string]any{"type": "object"}
	var askMu sync.Mutex
	asked := map[string]chan json.RawMessage{}
	asks := 0
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Params struct {
				ProtocolVersion string         `json:"protocolVersion"`
				Name            string         `json:"name"`
				Arguments       map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue // a notification
		}
		if m.Method == "" { // the client's answer to a request of this server
			askMu.Lock()
			ch := asked[string(m.ID)]
			delete(asked, string(m.ID))
			askMu.Unlock()
			if ch != nil {
				ch <- m.Result
			}
			continue
		}
		go func() {
			switch m.Method {
			case "initialize":
				answer(m.ID, map[string]any{"protocolVersion": m.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
					"serverInfo": map[string]any{"name": "toolhoststest", "version": "1"}})
			case "ping":
				answer(m.ID, map[string]any{})
			case "tools/list":
				answer(m.ID, map[string]any{"tools": []any{
					map[string]any{"name": "echo", "inputSchema": schema},
					map[string]any{"name": "slow", "inputSchema": schema},
					map[string]any{"name": "pid", "inputSchema": schema},
					map[string]any{"name": "roots", "inputSchema": schema},
				}})
			case "tools/call":
				switch m.Params.Name {
				case "slow":
					if p, _ := m.Params.Arguments["arrived"].(string); p != "" {
						_ = os.WriteFile(p, nil, 0o644)
					}
					ms, _ := m.Params.Arguments["ms"].(float64)
					time.Sleep(time.Duration(ms) * time.Millisecond)
					answer(m.ID, text(fmt.Sprint(m.Params.Arguments["message"])))
				case "pid":
					answer(m.ID, text(strconv.Itoa(os.Getpid())))
				case "roots":
					askMu.Lock()
					asks++
					id := fmt.Sprintf(`"ask-%d"`, asks)
					ch := make(chan json.RawMessage, 1)
					asked[id] = ch
					askMu.Unlock()
					write(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": "roots/list"})
					answer(m.ID, text(string(<-ch)))
				default:
					answer(m.ID, text(fmt.Sprint(m.Params.Arguments["message"])))
				}
			default:
				write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
			}
		}()
	}
}
