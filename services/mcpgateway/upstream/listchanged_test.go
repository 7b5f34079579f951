package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/waitfor"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
)

// hasTool reports whether the cached tools of id include name (no I/O: refresh false).
func hasTool(m *Manager, id, name string) bool {
	ts, err := m.Tools(context.Background(), id, false)
	if err != nil {
		return false
	}
	for _, raw := range ts {
		var tool struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &tool) == nil && tool.Name == name {
			return true
		}
	}
	return false
}

// A stdio server's list_changed reaches mcpgateway through the tool host's Watch stream,
// and the cached tools are read again; a broken stream is opened again, and tools that
// changed while it was down are read on reconnect.
func TestStdioToolsFollowWatch(t *testing.T) {
	f, th := newFakeHost(t)
	m := New(th, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	followed := make(chan struct{})
	go func() { m.FollowToolHost(ctx); close(followed) }()
	t.Cleanup(func() { cancel(); <-followed })

	cfg := stdioConfig("fx")
	f.setTools("fx", tools("a"))
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 5*time.Second, "a Watch stream", func() bool { return f.watchCount() == 1 })

	f.setTools("fx", tools("a", "b"))
	f.events <- &toolhostv1.WatchResponse{Id: "fx", Kind: &toolhostv1.WatchResponse_Notification{
		Notification: []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)}}
	d := waitfor.True(t, 5*time.Second, "tool b after list_changed", func() bool { return hasTool(m, "fx", "b") })
	t.Logf("new stdio tool seen %v after list_changed", d)

	// Other notifications, and events of servers not connected here, list nothing: of the
	// three events below only the last one makes a listing.
	lists := f.count(f.lists, "fx")
	f.events <- &toolhostv1.WatchResponse{Id: "fx", Kind: &toolhostv1.WatchResponse_Notification{
		Notification: []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)}}
	f.events <- &toolhostv1.WatchResponse{Id: "other", Kind: &toolhostv1.WatchResponse_Notification{
		Notification: []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)}}
	f.setTools("fx", tools("a", "b", "b2"))
	f.events <- &toolhostv1.WatchResponse{Id: "fx", Kind: &toolhostv1.WatchResponse_Notification{
		Notification: []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)}}
	waitfor.True(t, 5*time.Second, "tool b2 after list_changed", func() bool { return hasTool(m, "fx", "b2") })
	if got := f.count(f.lists, "fx") - lists; got != 1 {
		t.Fatalf("%d listings for one list_changed among other events, want 1", got)
	}
	if got := f.count(f.lists, "other"); got != 0 {
		t.Fatalf("a server not connected here was listed %d times", got)
	}

	// The stream breaks; what changes meanwhile is read when it opens again.
	f.setTools("fx", tools("a", "b", "c"))
	f.breakW <- struct{}{}
	waitfor.True(t, 5*time.Second, "the Watch stream opened again", func() bool { return f.watchCount() == 2 })
	waitfor.True(t, 5*time.Second, "tool c after the stream opened again", func() bool { return hasTool(m, "fx", "c") })

	// After the tool host has restarted (it no longer knows the server), the reopened stream
	// reads what it can, and starts nothing: the server starts again on its next use.
	f.lose("fx")
	lists = f.count(f.lists, "fx")
	f.breakW <- struct{}{}
	waitfor.True(t, 5*time.Second, "a resync after the stream opened again", func() bool { return f.count(f.lists, "fx") > lists })
	if got := f.count(f.started, "fx"); got != 1 {
		t.Fatalf("the resync started the server (%d starts, want 1)", got)
	}
	if !hasTool(m, "fx", "c") {
		t.Fatal("a failed resync dropped the cached tools")
	}
	if _, err := m.DispatchToolCall(t.Context(), cfg, []byte(`{"name":"ok"}`), time.Second, Hooks{}); err != nil || f.count(f.started, "fx") != 2 {
		t.Fatalf("the next use did not start the server again: %v", err)
	}

	// A child ready again after a restart is listed again.
	f.setTools("fx", tools("d"))
	f.events <- &toolhostv1.WatchResponse{Id: "fx", Kind: &toolhostv1.WatchResponse_Status{Status: &toolhostv1.ServerStatus{
		Id: "fx", State: toolhostv1.ServerState_SERVER_STATE_READY}}}
	waitfor.True(t, 5*time.Second, "tool d after a restart", func() bool { return hasTool(m, "fx", "d") && !hasTool(m, "fx", "a") })
}

// An HTTP server's list_changed (here mcp-go's own server adding a tool) makes mcpgateway
// list its tools again: sent on the GET stream by a session-era server, on the
// subscriptions/listen stream Zest keeps open by a server of 2026-07-28.
func TestHTTPToolsFollowListChanged(t *testing.T) {
	for _, era := range []struct {
		name    string
		opts    []server.StreamableHTTPOption
		version string
	}{
		{"2026-07-28", nil, ModernVersion},
		{"session era", []server.StreamableHTTPOption{server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...)}, ProtocolVersion},
	} {
		t.Run(era.name, func(t *testing.T) {
			srv := server.NewMCPServer("listchanging", "1.0.0", server.WithToolCapabilities(true))
			echo := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ok"), nil
			}
			srv.AddTool(mcp.NewTool("first"), echo)
			mcpHandler := server.NewStreamableHTTPServer(srv, era.opts...)
			// The session era's GET stream is the test's own: mcp-go's server can drop a
			// notification sent just after a POST of the session ends (that POST's forwarder,
			// not yet gone, takes it off the session's channel and discards it), which a
			// stress run met. The test writes list_changed on the stream Zest opened.
			getStream := make(chan chan<- string, 1)
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.Header.Get("Mcp-Session-Id") == "" {
					mcpHandler.ServeHTTP(w, r)
					return
				}
				send := make(chan string)
				select {
				case getStream <- send:
				default: // a second stream: not this test's
					w.WriteHeader(http.StatusMethodNotAllowed)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				for {
					select {
					case msg := <-send:
						fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
						w.(http.Flusher).Flush()
					case <-r.Context().Done():
						return
					}
				}
			}))
			t.Cleanup(hs.Close)

			m := New(nil, nil, nil)
			cfg := httpConfig("lc", hs.URL+"/mcp")
			if err := m.Connect(t.Context(), cfg); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Disconnect(context.Background(), "lc") })
			if inf, err := m.Info(t.Context(), cfg); err != nil || inf.ProtocolVersion != era.version {
				t.Fatalf("driven at %q (%v), want %s", inf.ProtocolVersion, err, era.version)
			}
			if !hasTool(m, "lc", "first") || hasTool(m, "lc", "second") {
				t.Fatal("tools after connect")
			}
			srv.AddTool(mcp.NewTool("second"), echo) // the 2026-07-28 era: on Zest's subscriptions/listen stream
			if era.version == ProtocolVersion {
				select {
				case send := <-getStream:
					select {
					case send <- `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`:
					case <-time.After(10 * time.Second):
						t.Fatal("Zest's GET stream ended before the notification was written")
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Zest opened no GET stream within 10 s of connecting")
				}
			}
			d := waitfor.True(t, 5*time.Second, "tool second after list_changed", func() bool { return hasTool(m, "lc", "second") })
			t.Logf("new HTTP tool seen %v after AddTool", d)
		})
	}
}
