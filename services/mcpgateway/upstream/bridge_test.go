package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// mrtrUpstream is a server of 2026-07-28 alone (mcp-go over Streamable HTTP, initialize
// refused) whose tools ask for input with input_required results (mrtrServer).
func mrtrUpstream(t *testing.T) (*Manager, *mcpgatewayv1.ServerConfig, *atomic.Int64) {
	t.Helper()
	return mrtrServer(t, func(srv *server.MCPServer) http.Handler {
		return mcptest.ModernOnly(server.NewStreamableHTTPServer(srv, server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20260728)))
	})
}

// mrtrServer serves, through the handler serve makes of it, an mcp-go server whose tools ask
// for input with input_required results: sample (one sampling round; it reports the client
// capabilities it was told), two (an elicitation, then a sampling, then the answer), and
// forever (roots/list in every round; forevers counts its invocations); and legacy_sample,
// which asks the session era's way (a sampling/createMessage request, which mcp-go sends
// only in a session). Zest must drive it as 2026-07-28.
func mrtrServer(t *testing.T, serve func(*server.MCPServer) http.Handler) (*Manager, *mcpgatewayv1.ServerConfig, *atomic.Int64) {
	t.Helper()
	srv := server.NewMCPServer("mrtr-up", "1.0.0", server.WithToolCapabilities(false), server.WithElicitation())
	srv.EnableSampling()
	ask := mcp.CreateMessageParams{Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("say hi")}}, MaxTokens: 10}
	srv.AddTool(mcp.NewTool("sample"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r := server.SamplingResponse(req.Params.InputResponses, "s"); r != nil {
			return mcp.NewToolResultText("sampled " + sampledText(r) + " state " + req.Params.RequestState), nil
		}
		caps := server.RequestProtocolInfoFromContext(ctx)
		if caps == nil || caps.ClientCapabilities == nil || caps.ClientCapabilities.Sampling == nil {
			return mcp.NewToolResultError("told no sampling capability"), nil
		}
		return server.NewInputRequestBuilder("st-1").Sample("s", ask).ToolResult(), nil
	})
	srv.AddTool(mcp.NewTool("two"), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		switch st := req.Params.RequestState; {
		case st == "":
			return server.NewInputRequestBuilder("r1").Elicit("e", mcp.ElicitationParams{Message: "name?", RequestedSchema: map[string]any{"type": "object"}}).ToolResult(), nil
		case st == "r1":
			e := server.ElicitationResponse(req.Params.InputResponses, "e")
			if e == nil {
				return mcp.NewToolResultError("round 2 without the elicitation"), nil
			}
			content, _ := e.Content.(map[string]any)
			return server.NewInputRequestBuilder(fmt.Sprintf("r2:%v", content["name"])).Sample("s", ask).ToolResult(), nil
		default:
			r := server.SamplingResponse(req.Params.InputResponses, "s")
			if r == nil {
				return mcp.NewToolResultError("round 3 without the sampling"), nil
			}
			return mcp.NewToolResultText(st + " " + sampledText(r)), nil
		}
	})
	srv.AddTool(mcp.NewTool("legacy_sample"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r, err := srv.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: ask}) //nolint:staticcheck // the session era's sampling, which this test bridges
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText("legacy sampled " + sampledText(r)), nil
	})
	forevers := &atomic.Int64{}
	srv.AddTool(mcp.NewTool("forever"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := forevers.Add(1)
		return server.NewInputRequestBuilder(fmt.Sprint(n)).Roots("r").ToolResult(), nil
	})
	hs := httptest.NewServer(serve(srv))
	t.Cleanup(hs.Close)
	m := New(nil, nil, nil)
	cfg := httpConfig("mrtr", hs.URL+"/mcp")
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Disconnect(context.Background(), "mrtr") })
	if inf, err := m.Info(t.Context(), cfg); err != nil || inf.ProtocolVersion != ModernVersion {
		t.Fatalf("the upstream must be driven as 2026-07-28: %+v, %v", inf, err)
	}
	return m, cfg, forevers
}

// fakeClient answers the requests relayed to it as a session-era client would, through
// Manager.Answer, and records their methods.
type fakeClient struct {
	m      *Manager
	mu     sync.Mutex
	asked  []string
	answer func(method string) (json.RawMessage, *RPCError)
}

func (c *fakeClient) hooks(r Relays) Hooks {
	return Hooks{Relays: r, Bridge: true, OnRequest: func(req ServerRequest) {
		c.mu.Lock()
		c.asked = append(c.asked, req.Method)
		c.mu.Unlock()
		res, rpcErr := c.answer(req.Method)
		go func() { _ = c.m.Answer(context.Background(), req.Ref, res, rpcErr) }()
	}}
}

func answers(method string) (json.RawMessage, *RPCError) {
	switch method {
	case MethodSampling:
		return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`), nil
	case MethodElicitation:
		return json.RawMessage(`{"action":"accept","content":{"name":"ada"}}`), nil
	}
	return json.RawMessage(`{"roots":[{"uri":"file:///tmp","name":"tmp"}]}`), nil
}

var allRelays = Relays{Sampling: true, Elicitation: true, Roots: true}

// TestBridgeInputRequired: a session-era client's call to a server of 2026-07-28 declares
// the client's capabilities; each input_required result's requests reach the client through
// OnRequest, and the request is retried with its answers and the requestState, over as many
// rounds as the server needs.
func TestBridgeInputRequired(t *testing.T) {
	m, cfg, _ := mrtrUpstream(t)
	c := &fakeClient{m: m, answer: answers}
	res, err := m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"sample","arguments":{}}`), 0, c.hooks(allRelays))
	if err != nil || !strings.Contains(string(res), "sampled hi state st-1") || strings.Contains(string(res), "input_required") {
		t.Fatalf("one round: %s, %v", res, err)
	}
	res, err = m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"two","arguments":{}}`), 0, c.hooks(allRelays))
	if err != nil || !strings.Contains(string(res), "r2:ada hi") {
		t.Fatalf("two rounds: %s, %v", res, err)
	}
	if got := strings.Join(c.asked, ","); got != "sampling/createMessage,elicitation/create,sampling/createMessage" {
		t.Errorf("the client was asked %s", got)
	}
	// Without the capability declared, the server is told so (here it answers with a tool error).
	res, err = m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"sample","arguments":{}}`), 0, c.hooks(Relays{Roots: true}))
	if err != nil || !strings.Contains(string(res), "told no sampling capability") {
		t.Fatalf("capabilities not declared: %s, %v", res, err)
	}
}

// TestBridgeInputRequiredErrors: a request for a capability the client did not declare is
// -32021 with the capability named; a client's error answer fails the request with its
// code; a server that keeps asking fails the request after MaxInputRounds answered rounds;
// a caller that does not bridge (a modern client's) gets input_required as it is.
func TestBridgeInputRequiredErrors(t *testing.T) {
	m, cfg, forevers := mrtrUpstream(t)
	c := &fakeClient{m: m, answer: answers}
	_, err := m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"two","arguments":{}}`), 0, c.hooks(Relays{Sampling: true}))
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != mcp.MISSING_REQUIRED_CLIENT_CAPABILITY || string(rpc.Data) != `{"capability":"elicitation"}` {
		t.Fatalf("undeclared capability: %v", err)
	}
	refusing := &fakeClient{m: m, answer: func(string) (json.RawMessage, *RPCError) {
		return nil, &RPCError{Code: -1, Message: "User rejected sampling request"}
	}}
	_, err = m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"sample","arguments":{}}`), 0, refusing.hooks(allRelays))
	if !errors.As(err, &rpc) || rpc.Code != -1 || !strings.Contains(rpc.Message, "User rejected sampling request") {
		t.Fatalf("client's error answer: %v", err)
	}
	_, err = m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"forever","arguments":{}}`), 0, c.hooks(allRelays))
	if !errors.As(err, &rpc) || !strings.Contains(rpc.Message, fmt.Sprintf("after %d rounds", MaxInputRounds)) {
		t.Fatalf("endless rounds: %v", err)
	}
	if n := forevers.Load(); n != MaxInputRounds+1 {
		t.Errorf("the server was asked %d times, want %d (the first request and %d retries)", n, MaxInputRounds+1, MaxInputRounds)
	}
	h := c.hooks(allRelays)
	h.Bridge = false
	res, err := m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"forever","arguments":{}}`), 0, h)
	if err != nil || !strings.Contains(string(res), `"resultType":"input_required"`) || !strings.Contains(string(res), `"roots/list"`) {
		t.Fatalf("without Bridge the result is the client's to answer: %s, %v", res, err)
	}
}

// countInitialize counts the initialize requests h receives.
func countInitialize(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"method":"initialize"`) {
			n.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// TestFollowClientEra: a server that serves both eras is driven as 2026-07-28, but the calls
// of session-era clients that may be asked something go through one session of Zest's own,
// so that the server asks in the client's era: a tool that sends sampling/createMessage as a
// request (refused by mcp-go in 2026-07-28; sent on the GET stream in a session, so attributed
// only while one call is in flight) reaches the client, as does one that answers
// input_required (turned into requests by the server's SDK in a session). A modern client's
// call stays in 2026-07-28 and gets the server's own answer for that era.
func TestFollowClientEra(t *testing.T) {
	var inits atomic.Int64
	held, release := make(chan struct{}), make(chan struct{})
	m, cfg, _ := mrtrServer(t, func(srv *server.MCPServer) http.Handler {
		srv.AddTool(mcp.NewTool("hold"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			close(held)
			<-release
			return mcp.NewToolResultText("released"), nil
		})
		return countInitialize(server.NewStreamableHTTPServer(srv), &inits)
	})
	c := &fakeClient{m: m, answer: answers}
	// mcp-go sends sampling/createMessage on the GET stream, not on the call's: with another
	// call in flight on the session, Zest cannot tell whose it is and refuses it.
	holding := make(chan error, 1)
	go func() {
		_, err := m.DispatchToolCall(context.Background(), cfg, json.RawMessage(`{"name":"hold","arguments":{}}`), 0, c.hooks(allRelays))
		holding <- err
	}()
	<-held
	res, err := m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"legacy_sample","arguments":{}}`), 0, c.hooks(allRelays))
	if err != nil || !strings.Contains(string(res), "2 calls are in flight") || len(c.asked) != 0 {
		t.Fatalf("a request outside a call's stream with 2 calls in flight: %s, %v, asked %v", res, err, c.asked)
	}
	close(release)
	if err := <-holding; err != nil {
		t.Fatal(err)
	}
	res, err = m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"legacy_sample","arguments":{}}`), 0, c.hooks(allRelays))
	if err != nil || !strings.Contains(string(res), "legacy sampled hi") {
		t.Fatalf("a session-era request of the server: %s, %v", res, err)
	}
	res, err = m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"two","arguments":{}}`), 0, c.hooks(allRelays))
	if err != nil || !strings.Contains(string(res), "r2:ada hi") {
		t.Fatalf("input_required in a session: %s, %v", res, err)
	}
	if got := strings.Join(c.asked, ","); got != "sampling/createMessage,elicitation/create,sampling/createMessage" {
		t.Errorf("the client was asked %s", got)
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("%d initialize requests, want 1 (one session for every session-era call)", n)
	}
	h := c.hooks(allRelays)
	h.Bridge = false
	res, err = m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"legacy_sample","arguments":{}}`), 0, h)
	if err != nil || !strings.Contains(string(res), `"isError":true`) || !strings.Contains(string(res), "2026-07-28") {
		t.Fatalf("a modern client's call stays in 2026-07-28: %s, %v", res, err)
	}
	if inf, err := m.Info(t.Context(), cfg); err != nil || inf.ProtocolVersion != ModernVersion {
		t.Fatalf("the server's own connection stays 2026-07-28: %+v, %v", inf, err)
	}
}

// TestFollowClientEraRefused: a server whose server/discover lists a session-era version but
// that refuses initialize gets the session-era clients' calls bridged (input_required rounds),
// and is asked for a session once only.
func TestFollowClientEraRefused(t *testing.T) {
	var inits atomic.Int64
	m, cfg, _ := mrtrServer(t, func(srv *server.MCPServer) http.Handler {
		return countInitialize(mcptest.ModernOnly(server.NewStreamableHTTPServer(srv)), &inits)
	})
	c := &fakeClient{m: m, answer: answers}
	for range 2 {
		res, err := m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"sample","arguments":{}}`), 0, c.hooks(allRelays))
		if err != nil || !strings.Contains(string(res), "sampled hi state st-1") {
			t.Fatalf("bridged: %s, %v", res, err)
		}
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("%d initialize requests, want 1 (refused once, not asked again)", n)
	}
}

// sampledText is the text of a sampling result, however mcp-go decoded its content.
func sampledText(r *mcp.CreateMessageResult) string {
	b, _ := json.Marshal(r.Content)
	var c struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(b, &c)
	return c.Text
}
