package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/grpctest"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Within a call made for an MCP client, a server request of a kind the client accepts is
// relayed and answered through Manager.Answer; other kinds get no roots or an error that says
// why; an answer nobody waits for is ErrRelayUnknown.
func TestAnswerServerRequestWithinACall(t *testing.T) {
	m := New(nil, nil, nil)
	relayed := make(chan ServerRequest, 1)
	hooks := Hooks{Relays: Relays{Sampling: true}, OnRequest: func(r ServerRequest) { relayed <- r }}
	ctx := context.WithValue(t.Context(), httpRelayKey{}, &httpRelay{hooks: hooks, waiting: m.waiting})
	ask := func(ctx context.Context, method string) string {
		req := transport.JSONRPCRequest{JSONRPC: "2.0", Method: method, Params: map[string]any{"maxTokens": 5}}
		req.ID = mcp.NewRequestId("srv-1")
		resp, err := answerServerRequest(ctx, req)
		if err != nil || resp == nil {
			t.Fatalf("answer: %v, %v", resp, err)
		}
		b, _ := json.Marshal(resp)
		return string(b)
	}
	if got := ask(ctx, MethodRoots); got != `{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}` {
		t.Fatalf("roots/list not accepted: %s", got)
	}
	if got := ask(ctx, MethodElicitation); !strings.Contains(got, `"code":-32603`) || !strings.Contains(got, "does not accept elicitation/create") {
		t.Fatalf("elicitation not accepted: %s", got)
	}
	done := make(chan string, 1)
	go func() { done <- ask(ctx, MethodSampling) }()
	r := <-relayed
	if r.Method != MethodSampling || !strings.HasPrefix(r.Ref, "h:") || string(r.Params) != `{"maxTokens":5}` {
		t.Fatalf("relayed %+v", r)
	}
	if err := m.Answer(t.Context(), r.Ref, json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"ok"}}`), nil); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != `{"jsonrpc":"2.0","id":"srv-1","result":{"role":"assistant","content":{"type":"text","text":"ok"}}}` {
		t.Fatalf("the server got %s", got)
	}
	// Spent, unknown, or not a reference at all: nothing waits.
	for _, ref := range []string{r.Ref, "h:0123", "x"} {
		if err := m.Answer(t.Context(), ref, json.RawMessage(`{}`), nil); !errors.Is(err, ErrRelayUnknown) {
			t.Fatalf("answer to %q: %v, want ErrRelayUnknown", ref, err)
		}
	}
	// The client's error reaches the server; a call that ends stops the wait.
	go func() { done <- ask(ctx, MethodSampling) }()
	r = <-relayed
	if err := m.Answer(t.Context(), r.Ref, nil, &RPCError{Code: -1, Message: "User rejected sampling request"}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !strings.Contains(got, `"code":-1,"message":"User rejected sampling request"`) {
		t.Fatalf("the server got %s", got)
	}
	ended, cancel := context.WithCancel(ctx)
	go func() { done <- ask(ended, MethodSampling) }()
	r = <-relayed
	cancel()
	if got := <-done; !strings.Contains(got, "the call that caused this request ended before its client answered") {
		t.Fatalf("the server got %s", got)
	}
	if err := m.Answer(t.Context(), r.Ref, json.RawMessage(`{}`), nil); !errors.Is(err, ErrRelayUnknown) {
		t.Fatalf("answer after the call ended: %v", err)
	}
}

// relayHost is fakeHost whose CallStream relays one sampling request (relay id "r1") and
// answers the call with what Answer was given for it.
type relayHost struct {
	*fakeHost
	relays  chan *toolhostv1.Relays
	answers chan *toolhostv1.AnswerRequest
}

func (h *relayHost) CallStream(req *toolhostv1.CallStreamRequest, stream toolhostv1.ToolHostService_CallStreamServer) error {
	h.relays <- req.GetCall().GetRelays()
	if err := stream.Send(&toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Request{Request: &toolhostv1.ServerRequest{
		RelayId: "r1", Method: MethodSampling, Params: []byte(`{"maxTokens":1}`)}}}); err != nil {
		return err
	}
	select {
	case a := <-h.answers:
		return stream.Send(&toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Answer{Answer: &toolhostv1.CallResponse{
			Answer: &toolhostv1.CallResponse_Result{Result: a.GetResult()}}}})
	case <-stream.Context().Done():
		return stream.Context().Err()
	}
}

func (h *relayHost) Answer(_ context.Context, req *toolhostv1.AnswerRequest) (*toolhostv1.AnswerResponse, error) {
	if req.GetRelayId() != "r1" {
		return nil, status.Error(codes.NotFound, "unknown relay id")
	}
	h.answers <- req
	return &toolhostv1.AnswerResponse{}, nil
}

// A stdio server's request comes through the tool host's CallStream to OnRequest as "t:<relay
// id>", and Answer takes the client's answer back through the tool host's Answer; a call
// without relays or progress stays a unary Call.
func TestStdioRelaysThroughTheToolHost(t *testing.T) {
	f, _ := newFakeHost(t)
	h := &relayHost{fakeHost: f, relays: make(chan *toolhostv1.Relays, 1), answers: make(chan *toolhostv1.AnswerRequest, 1)}
	cc := grpctest.Loopback(t, func(g *grpc.Server) { toolhostv1.RegisterToolHostServiceServer(g, h) })
	m := New(toolhostv1.NewToolHostServiceClient(cc), nil, nil)
	cfg := stdioConfig("fx")
	var got ServerRequest
	answered := make(chan error, 1)
	hooks := Hooks{Relays: Relays{Sampling: true, Roots: true}, OnRequest: func(r ServerRequest) {
		got = r
		go func() { answered <- m.Answer(t.Context(), r.Ref, json.RawMessage(`{"text":"from the client"}`), nil) }()
	}}
	res, err := m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"ask"}`), 0, hooks)
	if err != nil || string(res) != `{"text":"from the client"}` {
		t.Fatalf("CallWith = %s, %v", res, err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if rl := <-h.relays; !rl.GetSampling() || rl.GetElicitation() || !rl.GetRoots() {
		t.Fatalf("relays sent to the tool host: %v", rl)
	}
	if got.Ref != "t:r1" || got.Method != MethodSampling || string(got.Params) != `{"maxTokens":1}` {
		t.Fatalf("OnRequest got %+v", got)
	}
	if err := m.Answer(t.Context(), "t:gone", json.RawMessage(`{}`), nil); !errors.Is(err, ErrRelayUnknown) {
		t.Fatalf("answer to an unknown relay id: %v", err)
	}
	// No relays accepted and no progress: the unary Call of the fake host answers.
	res, err = m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"ok"}`), 0, Hooks{OnRequest: hooks.OnRequest})
	if err != nil || len(h.relays) != 0 {
		t.Fatalf("a call relaying nothing: %s, %v (CallStream used: %d)", res, err, len(h.relays))
	}
}
