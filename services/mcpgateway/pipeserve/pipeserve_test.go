package pipeserve

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/zestmcp/zest/lib/keyauth"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// fakes answer from the request and record cancellations.
type fakes struct {
	started   chan string // the id of a call that began to wait for its context
	cancelled chan string // the id of a call whose context ended before it answered
}

func (f *fakes) ExchangeTo(ctx context.Context, req *mcpgatewayv1.ExchangeRequest, send func(*mcpgatewayv1.ExchangeResponse) error) error {
	switch string(req.GetPayload()) {
	case "notification":
		return nil
	case "fail":
		return fmt.Errorf("wrapped: %w", context.DeadlineExceeded) // not a status: Unknown
	case "notes":
		for i := range 3 {
			if err := send(&mcpgatewayv1.ExchangeResponse{Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: []byte(fmt.Sprint("note", i))}}); err != nil {
				return err
			}
		}
	}
	return send(&mcpgatewayv1.ExchangeResponse{Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: req.GetPayload()}, Final: true})
}

func (f *fakes) CallTool(ctx context.Context, req *mcpgatewayv1.CallToolRequest) (*mcpgatewayv1.CallToolResponse, error) {
	if req.GetId() == "block" {
		f.started <- req.GetId()
		<-ctx.Done()
		f.cancelled <- req.GetId()
		return nil, ctx.Err()
	}
	return &mcpgatewayv1.CallToolResponse{Body: &httpbody.HttpBody{Data: []byte("answer to " + req.GetId())}}, nil
}

func start(t *testing.T, keys keyauth.Keys) (mcpgatewayv1.PipeServiceClient, *fakes) {
	t.Helper()
	f := &fakes{started: make(chan string, 16), cancelled: make(chan string, 16)}
	guard := keyauth.Guard{Keys: keys, PerCall: func(m string) bool { return m == mcpgatewayv1.PipeService_Pipe_FullMethodName }}
	g := grpc.NewServer(grpc.ChainStreamInterceptor(guard.Stream))
	mcpgatewayv1.RegisterPipeServiceServer(g, New(guard, f, f, nil))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return mcpgatewayv1.NewPipeServiceClient(cc), f
}

func open(t *testing.T, c mcpgatewayv1.PipeServiceClient) (mcpgatewayv1.PipeService_PipeClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	st, err := c.Pipe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st, cancel
}

func tool(id uint64, server, auth string) *mcpgatewayv1.PipeRequest {
	return &mcpgatewayv1.PipeRequest{CallId: id, Authorization: auth, Kind: &mcpgatewayv1.PipeRequest_CallTool{CallTool: &mcpgatewayv1.CallToolRequest{Id: server}}}
}

func exchange(id uint64, payload, auth string) *mcpgatewayv1.PipeRequest {
	return &mcpgatewayv1.PipeRequest{CallId: id, Authorization: auth, Kind: &mcpgatewayv1.PipeRequest_Exchange{Exchange: &mcpgatewayv1.ExchangeRequest{Payload: []byte(payload)}}}
}

// Many calls in flight at once each get their own answer, named by their call id.
func TestConcurrentCallsGetTheirOwnAnswers(t *testing.T) {
	c, _ := start(t, keyauth.Keys{Admin: "adm"})
	st, cancel := open(t, c)
	defer cancel()
	const n = 200
	var sendMu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sendMu.Lock()
			defer sendMu.Unlock()
			if err := st.Send(tool(uint64(i+1), fmt.Sprint("s", i+1), "Bearer adm")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for range n {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint("answer to s", r.GetCallId())
		if got := string(r.GetCallTool().GetBody().GetData()); got != want || !r.GetLast() || seen[r.GetCallId()] {
			t.Fatalf("call %d: %q last=%v (want %q, once)", r.GetCallId(), got, r.GetLast(), want)
		}
		seen[r.GetCallId()] = true
	}
}

// Each call is authorized with its own key: the API key for exchanges, the admin key
// (fail-closed) for tool calls.
func TestEachCallIsAuthorized(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys keyauth.Keys
		req  *mcpgatewayv1.PipeRequest
		want codes.Code
	}{
		{"exchange, right API key", keyauth.Keys{API: "api"}, exchange(1, "x", "Bearer api"), codes.OK},
		{"exchange, wrong API key", keyauth.Keys{API: "api"}, exchange(1, "x", "Bearer nope"), codes.Unauthenticated},
		{"exchange, no key set", keyauth.Keys{}, exchange(1, "x", ""), codes.OK},
		{"tool call, API key is not the admin key", keyauth.Keys{API: "api", Admin: "adm"}, tool(1, "s", "Bearer api"), codes.Unauthenticated},
		{"tool call, admin key", keyauth.Keys{API: "api", Admin: "adm"}, tool(1, "s", "Bearer adm"), codes.OK},
		{"tool call, no key configured", keyauth.Keys{}, tool(1, "s", ""), codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := start(t, tc.keys)
			st, cancel := open(t, c)
			defer cancel()
			if err := st.Send(tc.req); err != nil {
				t.Fatal(err)
			}
			r, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			got := codes.OK
			if f := r.GetFailure(); f != nil {
				got = codes.Code(f.GetCode())
			}
			if got != tc.want || !r.GetLast() {
				t.Fatalf("code %v last=%v, want %v: %v", got, r.GetLast(), tc.want, r)
			}
		})
	}
}

// An exchange's notifications come first, in order, and only its final item is the last;
// a notification-only exchange ends with an empty last item; a failing one with its status.
func TestExchangeItems(t *testing.T) {
	c, _ := start(t, keyauth.Keys{})
	st, cancel := open(t, c)
	defer cancel()
	recv := func() *mcpgatewayv1.PipeResponse {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	st.Send(exchange(1, "notes", ""))
	for i := range 3 {
		r := recv()
		if string(r.GetExchange().GetMessage()) != fmt.Sprint("note", i) || r.GetLast() {
			t.Fatalf("item %d: %v", i, r)
		}
	}
	if r := recv(); string(r.GetExchange().GetMessage()) != "notes" || !r.GetExchange().GetFinal() || !r.GetLast() {
		t.Fatalf("final: %v", r)
	}
	st.Send(exchange(2, "notification", ""))
	if r := recv(); r.GetCallId() != 2 || !r.GetLast() || r.GetKind() != nil {
		t.Fatalf("notification-only: %v", r)
	}
	st.Send(exchange(3, "fail", ""))
	if r := recv(); r.GetCallId() != 3 || !r.GetLast() || codes.Code(r.GetFailure().GetCode()) != codes.Unknown {
		t.Fatalf("failing: %v", r)
	}
	st.Send(&mcpgatewayv1.PipeRequest{CallId: 4})
	if r := recv(); codes.Code(r.GetFailure().GetCode()) != codes.InvalidArgument {
		t.Fatalf("empty request: %v", r)
	}
}

// A cancel request cancels the call's context, and nothing more is sent for it; closing the
// stream cancels the calls still in flight.
func TestCancelAndStreamEnd(t *testing.T) {
	c, f := start(t, keyauth.Keys{Admin: "adm"})
	st, cancel := open(t, c)
	st.Send(tool(1, "block", "Bearer adm"))
	st.Send(&mcpgatewayv1.PipeRequest{CallId: 1, Kind: &mcpgatewayv1.PipeRequest_Cancel{Cancel: true}})
	select {
	case <-f.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call's context did not end")
	}
	st.Send(tool(2, "s", "Bearer adm"))
	if r, err := st.Recv(); err != nil || r.GetCallId() != 2 {
		t.Fatalf("after the cancel: %v %v (nothing may come for call 1)", r, err)
	}

	st.Send(tool(3, "block", "Bearer adm"))
	<-f.started
	<-f.started
	cancel() // the client goes away
	select {
	case <-f.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("a call in flight outlived its stream")
	}
}
