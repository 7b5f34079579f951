package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestModernUpstreamWithoutSession: an HTTP server that answers server/discover with
// 2026-07-28 is driven without a session: no initialize, no Mcp-Session-Id, every request
// with the revision's _meta and Mcp-Method/Mcp-Name headers; a forwarded request keeps the
// client's own _meta members; an unknown method (HTTP 404) is -32601, not a lost session.
func TestModernUpstreamWithoutSession(t *testing.T) {
	srv := server.NewMCPServer("modern-up", "2.0.0", server.WithToolCapabilities(false), server.WithInstructions("be modern"))
	srv.AddTool(mcp.NewTool("who", mcp.WithString("x")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caps := "none"
		if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientCapabilities != nil && info.ClientCapabilities.Elicitation != nil {
			caps = "elicitation"
		}
		return mcp.NewToolResultText("caps " + caps), nil
	})
	var mu sync.Mutex
	var seen []string
	inner := server.NewStreamableHTTPServer(srv)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Mcp-Method")+" session="+r.Header.Get("Mcp-Session-Id")+" version="+r.Header.Get("MCP-Protocol-Version"))
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	m := New(nil, nil, nil)
	cfg := httpConfig("modern", hs.URL+"/mcp")
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Disconnect(context.Background(), "modern") })
	inf, err := m.Info(t.Context(), cfg)
	if err != nil || inf.ProtocolVersion != ModernVersion || inf.ServerInfo["name"] != "modern-up" || inf.Instructions != "be modern" || inf.Capabilities["tools"] == nil {
		t.Fatalf("info %+v, %v", inf, err)
	}
	res, err := m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"who","arguments":{}}`), 0, Hooks{})
	if err != nil || !strings.Contains(string(res), "caps none") || !strings.Contains(string(res), `"resultType":"complete"`) {
		t.Fatalf("call: %s, %v", res, err)
	}
	res, err = m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"who","arguments":{},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}`), 0, Hooks{})
	if err != nil || !strings.Contains(string(res), "caps elicitation") {
		t.Fatalf("a forwarded request lost the client's capabilities: %s, %v", res, err)
	}
	_, err = m.Call(t.Context(), cfg, "nope/nothing", nil, 0)
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != mcp.METHOD_NOT_FOUND {
		t.Fatalf("unknown method: %v", err)
	}
	if _, err := m.Call(t.Context(), cfg, "tools/list", nil, 0); err != nil {
		t.Fatalf("after a 404 the connection must still serve: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.Contains(s, "initialize") || !strings.HasSuffix(s, "version=2026-07-28") || !strings.Contains(s, "session= ") || !strings.HasPrefix(s, "POST ") {
			t.Errorf("the upstream saw %q: want POSTs of 2026-07-28 without a session", s)
		}
	}
	if len(seen) == 0 || !strings.HasPrefix(seen[0], "POST server/discover") {
		t.Errorf("first request %v, want the server/discover probe", seen)
	}
}

// TestModernUpstreamResourceSubscriptions: a session-era client's resources/subscribe of a
// server of 2026-07-28 (which has no such method) becomes a resourceSubscriptions entry of
// Zest's subscriptions/listen stream: the request is answered once the server acknowledged
// the stream that carries it, the server's notifications/resources/updated on that stream
// reach OnNotification, unsubscribe opens the stream again without it, and a resource the
// server refuses fails the request with the server's error and is left out.
func TestModernUpstreamResourceSubscriptions(t *testing.T) {
	srv := server.NewMCPServer("modern-sub", "1.0.0", server.WithToolCapabilities(false), server.WithResourceCapabilities(true, true))
	srv.AddResource(mcp.NewResource("test://watched", "watched"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: "test://watched", Text: "x"}}, nil
	})
	inner := server.NewStreamableHTTPServer(srv)
	var mu sync.Mutex
	var listens [][]string // the resourceSubscriptions of each listen request
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") != "subscriptions/listen" {
			inner.ServeHTTP(w, r)
			return
		}
		// The listen stream, played by hand: refuse test://refused, else acknowledge, then
		// tell of an update of every resource subscribed, and hold the stream open.
		var req struct {
			ID     any `json:"id"`
			Params struct {
				Notifications struct {
					ResourceSubscriptions []string `json:"resourceSubscriptions"`
				} `json:"notifications"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		uris := req.Params.Notifications.ResourceSubscriptions
		mu.Lock()
		listens = append(listens, uris)
		mu.Unlock()
		if slices.Contains(uris, "test://refused") {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32602, "message": `subscribing to "test://refused": no such resource`}})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(m map[string]any) {
			b, _ := json.Marshal(m)
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		send(map[string]any{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
			"params": map[string]any{"_meta": map[string]any{mcp.MetaKeySubscriptionID: req.ID}, "notifications": req.Params.Notifications}})
		for _, uri := range uris {
			send(map[string]any{"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": map[string]any{"uri": uri}})
		}
		<-r.Context().Done()
	}))
	t.Cleanup(hs.Close)

	m := New(nil, nil, nil)
	updated := make(chan string, 16)
	m.OnNotification(func(_ string, msg []byte) {
		var n struct {
			Method string
			Params struct{ URI string }
		}
		if json.Unmarshal(msg, &n) == nil && n.Method == "notifications/resources/updated" {
			select {
			case updated <- n.Params.URI:
			default: // the first is the one looked at
			}
		}
	})
	cfg := httpConfig("modern", hs.URL+"/mcp")
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Disconnect(context.Background(), "modern") })

	if res, err := m.Call(t.Context(), cfg, "resources/subscribe", json.RawMessage(`{"uri":"test://watched"}`), 0); err != nil || string(res) != "{}" {
		t.Fatalf("subscribe: %s, %v", res, err)
	}
	// Answered after the acknowledgement: a stream asking for it was acknowledged before the
	// subscribe returned. It need not be the latest to reach the server: the stream opened at
	// connect, asking for nothing, can arrive after it (the manager has cancelled it by then;
	// CI once saw [[test://watched] []]).
	mu.Lock()
	asked := slices.ContainsFunc(listens, func(u []string) bool { return slices.Equal(u, []string{"test://watched"}) })
	seen := slices.Clone(listens)
	mu.Unlock()
	if !asked {
		t.Fatalf("the listen streams asked for %v, none for test://watched", seen)
	}
	select {
	case uri := <-updated:
		if uri != "test://watched" {
			t.Fatalf("updated %q", uri)
		}
	case <-t.Context().Done():
		t.Fatal("no notifications/resources/updated")
	}

	_, err := m.Call(t.Context(), cfg, "resources/subscribe", json.RawMessage(`{"uri":"test://refused"}`), 0)
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != mcp.INVALID_PARAMS || !strings.Contains(rpc.Message, "no such resource") {
		t.Fatalf("a refused subscription: %v, want the server's -32602", err)
	}
	// The stream is opened again without it: a listen for test://watched alone after the one
	// refused (that one's answer is what makes the manager open it, so the server sees it
	// later; a stream the manager had already cancelled may still reach the server after
	// both, so the last one seen need not be it).
	waitfor.NoError(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		refused := slices.IndexFunc(listens, func(u []string) bool { return slices.Contains(u, "test://refused") })
		if refused < 0 || !slices.ContainsFunc(listens[refused+1:], func(u []string) bool { return slices.Equal(u, []string{"test://watched"}) }) {
			return fmt.Errorf("no stream without the refused resource after the refusal; the listens asked for %v", listens)
		}
		return nil
	})

	// since returns the listens the server saw from the nth on (a stream the manager had
	// cancelled may reach the server late: what counts is that the one asked for came).
	since := func(n int) [][]string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(listens[n:])
	}
	seenBefore := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(listens)
	}

	// Concurrent subscriptions each wait for a stream that has theirs.
	concurrent := seenBefore()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Call(t.Context(), cfg, "resources/subscribe", json.RawMessage(fmt.Sprintf(`{"uri":"test://r%d"}`, i)), 0); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a concurrent subscribe: %v", err)
	}
	if got := since(concurrent); !slices.ContainsFunc(got, func(u []string) bool { return len(u) == 9 }) {
		t.Fatalf("after 8 more subscriptions no listen stream asked for all 9: %v", got)
	}
	for i := range 8 {
		if _, err := m.Call(t.Context(), cfg, "resources/unsubscribe", json.RawMessage(fmt.Sprintf(`{"uri":"test://r%d"}`, i)), 0); err != nil {
			t.Fatal(err)
		}
	}

	unsubscribed := seenBefore()
	if res, err := m.Call(t.Context(), cfg, "resources/unsubscribe", json.RawMessage(`{"uri":"test://watched"}`), 0); err != nil || string(res) != "{}" {
		t.Fatalf("unsubscribe: %s, %v", res, err)
	}
	if got := since(unsubscribed); !slices.ContainsFunc(got, func(u []string) bool { return len(u) == 0 }) {
		t.Fatalf("after unsubscribe no listen stream asked for no resource: %v", got)
	}
	if _, err := m.Call(t.Context(), cfg, "resources/subscribe", json.RawMessage(`{}`), 0); !errors.As(err, &rpc) || rpc.Code != mcp.INVALID_PARAMS || !strings.Contains(rpc.Message, "params.uri") {
		t.Fatalf("subscribe without a uri: %v", err)
	}
}
