package pipeserve

import (
	"context"
	"fmt"
	"github.com/zestmcp/zest/lib/grpctest"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/workpool"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// fake answers an exchange by its payload: "notification" sends nothing, "fail" fails,
// "notes" sends three notes first, "block" waits for its context; anything else is echoed.
type fake struct {
	started   chan struct{} // a "block" exchange began to wait
	cancelled chan struct{} // a "block" exchange's context ended
}

func (f *fake) ExchangeTo(ctx context.Context, req *mcpgatewayv1.ExchangeRequest, send func(*mcpgatewayv1.ExchangeResponse) error) error {
	switch string(req.GetPayload()) {
	case "notification":
		return nil
	case "fail":
		return fmt.Errorf("wrapped: %w", context.DeadlineExceeded) // not a status: Unknown
	case "block":
		f.started <- struct{}{}
		<-ctx.Done()
		f.cancelled <- struct{}{}
		return ctx.Err()
	case "notes":
		for i := range 3 {
			if err := send(&mcpgatewayv1.ExchangeResponse{Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: []byte(fmt.Sprint("note", i))}}); err != nil {
				return err
			}
		}
	}
	return send(&mcpgatewayv1.ExchangeResponse{Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: req.GetPayload()}, Final: true})
}

func start(t *testing.T, keys keyauth.Keys, drain <-chan struct{}) (mcpgatewayv1.PipeServiceClient, *fake) {
	t.Helper()
	f := &fake{started: make(chan struct{}, 16), cancelled: make(chan struct{}, 16)}
	guard := keyauth.Guard{Keys: keys, PerCall: func(m string) bool { return m == mcpgatewayv1.PipeService_Pipe_FullMethodName }}
	cc := grpctest.Loopback(t, func(g *grpc.Server) {
		mcpgatewayv1.RegisterPipeServiceServer(g, New(guard, f, workpool.New(8), drain))
	}, grpc.ChainStreamInterceptor(guard.Stream))
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

func exchange(id uint64, payload, auth string) *mcpgatewayv1.PipeRequest {
	return &mcpgatewayv1.PipeRequest{CallId: id, Authorization: auth, Kind: &mcpgatewayv1.PipeRequest_Exchange{Exchange: &mcpgatewayv1.ExchangeRequest{Payload: []byte(payload)}}}
}

func cancelReq(id uint64) *mcpgatewayv1.PipeRequest {
	return &mcpgatewayv1.PipeRequest{CallId: id, Kind: &mcpgatewayv1.PipeRequest_Cancel{Cancel: true}}
}

// Many exchanges in flight at once each get their own answer, named by their call id.
func TestConcurrentExchangesGetTheirOwnAnswers(t *testing.T) {
	c, _ := start(t, keyauth.Keys{}, nil)
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
			if err := st.Send(exchange(uint64(i+1), fmt.Sprint("body", i+1), "")); err != nil {
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
		want := fmt.Sprint("body", r.GetCallId())
		if got := string(r.GetExchange().GetMessage()); got != want || !r.GetLast() || seen[r.GetCallId()] {
			t.Fatalf("call %d: %q last=%v (want %q, once)", r.GetCallId(), got, r.GetLast(), want)
		}
		seen[r.GetCallId()] = true
	}
}

// Each exchange is authorized with its own key, by McpService's rule.
func TestEachExchangeIsAuthorized(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys keyauth.Keys
		auth string
		want codes.Code
	}{
		{"right API key", keyauth.Keys{API: "api"}, "Bearer api", codes.OK},
		{"the admin key serves too", keyauth.Keys{API: "api", Admin: "adm"}, "Bearer adm", codes.OK},
		{"wrong API key", keyauth.Keys{API: "api"}, "Bearer nope", codes.Unauthenticated},
		{"no key", keyauth.Keys{API: "api"}, "", codes.Unauthenticated},
		{"no key set", keyauth.Keys{}, "", codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := start(t, tc.keys, nil)
			st, cancel := open(t, c)
			defer cancel()
			if err := st.Send(exchange(1, "x", tc.auth)); err != nil {
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
	c, _ := start(t, keyauth.Keys{}, nil)
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

// A cancel request cancels the exchange's context, and nothing more is sent for it; closing
// the stream cancels the exchanges still in flight.
func TestCancelAndStreamEnd(t *testing.T) {
	c, f := start(t, keyauth.Keys{}, nil)
	st, cancel := open(t, c)
	st.Send(exchange(1, "block", ""))
	<-f.started
	st.Send(cancelReq(1))
	select {
	case <-f.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled exchange's context did not end")
	}
	st.Send(exchange(2, "after", ""))
	if r, err := st.Recv(); err != nil || r.GetCallId() != 2 {
		t.Fatalf("after the cancel: %v %v (nothing may come for call 1)", r, err)
	}

	st.Send(exchange(3, "block", ""))
	<-f.started
	cancel() // the client goes away
	select {
	case <-f.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("an exchange in flight outlived its stream")
	}
}

// Draining ends the stream once the exchanges in flight have answered.
func TestDrainEndsTheStream(t *testing.T) {
	drain := make(chan struct{})
	c, _ := start(t, keyauth.Keys{}, drain)
	st, cancel := open(t, c)
	defer cancel()
	st.Send(exchange(1, "x", ""))
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	close(drain)
	done := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the stream went on after the drain")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a drained pipe stayed open")
	}
}
