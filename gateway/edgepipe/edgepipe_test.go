package edgepipe

import (
	"context"
	"errors"
	"fmt"
	"github.com/zestmcp/zest/lib/grpctest"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// server is a small PipeService: an exchange gets a note and a final item echoing its payload
// and authorization; "hang" waits to be cancelled, "fail" fails.
type server struct {
	mcpgatewayv1.UnimplementedPipeServiceServer
	cancels chan uint64
	hung    chan uint64 // a "hang" exchange arrived
	streams chan context.CancelFunc
}

// Pipe serves until the client leaves or the test ends the stream through s.streams.
func (s *server) Pipe(st mcpgatewayv1.PipeService_PipeServer) error {
	ctx, cancel := context.WithCancel(st.Context())
	s.streams <- cancel
	go s.loop(st)
	<-ctx.Done()
	return status.Error(codes.Unavailable, "gone")
}

func (s *server) loop(st mcpgatewayv1.PipeService_PipeServer) {
	var mu sync.Mutex
	send := func(r *mcpgatewayv1.PipeResponse) { mu.Lock(); st.Send(r); mu.Unlock() }
	item := func(id uint64, msg string, final bool) *mcpgatewayv1.PipeResponse {
		return &mcpgatewayv1.PipeResponse{CallId: id, Last: final, Kind: &mcpgatewayv1.PipeResponse_Exchange{Exchange: &mcpgatewayv1.ExchangeResponse{
			Final: final, Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: []byte(msg)}}}}
	}
	for {
		req, err := st.Recv()
		if err != nil {
			return
		}
		id := req.GetCallId()
		switch k := req.GetKind().(type) {
		case *mcpgatewayv1.PipeRequest_Cancel:
			s.cancels <- id
		case *mcpgatewayv1.PipeRequest_Exchange:
			switch p := string(k.Exchange.GetPayload()); p {
			case "hang":
				s.hung <- id
			case "fail":
				send(&mcpgatewayv1.PipeResponse{CallId: id, Last: true, Kind: &mcpgatewayv1.PipeResponse_Failure{Failure: &mcpgatewayv1.PipeStatus{Code: int32(codes.NotFound), Message: "no such session"}}})
			default:
				go func() {
					send(item(id, "note", false))
					send(item(id, p+" "+req.GetAuthorization(), true))
				}()
			}
		}
	}
}

func start(t *testing.T) (*Pipe, *server) {
	t.Helper()
	srv := &server{cancels: make(chan uint64, 16), hung: make(chan uint64, 16), streams: make(chan context.CancelFunc, 16)}
	cc := grpctest.Loopback(t, func(g *grpc.Server) { mcpgatewayv1.RegisterPipeServiceServer(g, srv) })
	p := New(mcpgatewayv1.NewPipeServiceClient(cc))
	t.Cleanup(p.Close)
	return p, srv
}

// items reads an exchange to its end.
func items(st grpc.ServerStreamingClient[mcpgatewayv1.ExchangeResponse]) ([]string, error) {
	var got []string
	for {
		it, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, fmt.Sprintf("%s/%v", it.GetMessage(), it.GetFinal()))
	}
}

// Concurrent exchanges each read like a server stream — their own items, then io.EOF — and
// carry their caller's Authorization.
func TestExchangesConcurrent(t *testing.T) {
	p, _ := start(t)
	client := MCP(nil, p)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			auth := fmt.Sprint("Bearer k", i%7)
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", auth)
			st, err := client.Exchange(ctx, &mcpgatewayv1.ExchangeRequest{Payload: []byte(fmt.Sprint("b", i))})
			if err != nil {
				t.Error(err)
				return
			}
			got, err := items(st)
			if want := fmt.Sprintf("[note/false b%d %s/true]", i, auth); err != nil || fmt.Sprint(got) != want {
				t.Errorf("got %v %v, want %s", got, err, want)
			}
		}()
	}
	wg.Wait()
	st, _ := client.Exchange(context.Background(), &mcpgatewayv1.ExchangeRequest{Payload: []byte("fail")})
	if _, err := items(st); status.Code(err) != codes.NotFound || status.Convert(err).Message() != "no such session" {
		t.Fatalf("a failure is its gRPC status: %v", err)
	}
}

// An exchange whose context ends is abandoned and the server told to cancel it, whether its
// reader waits in Recv or has stopped reading.
func TestEndedContextsAbandonExchanges(t *testing.T) {
	p, srv := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	st, err := p.Exchange(ctx, &mcpgatewayv1.ExchangeRequest{Payload: []byte("hang")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("past its deadline: %v", err)
	}
	select {
	case <-srv.cancels:
	case <-time.After(5 * time.Second):
		t.Fatal("the server was not told to cancel")
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	if _, err := p.Exchange(ctx2, &mcpgatewayv1.ExchangeRequest{Payload: []byte("hang")}); err != nil {
		t.Fatal(err)
	}
	cancel2() // the HTTP request ended without reading on
	select {
	case <-srv.cancels:
	case <-time.After(5 * time.Second):
		t.Fatal("an exchange left unread was not cancelled")
	}
}

// Exchanges in flight when the stream breaks fail with Unavailable; the next opens a new one.
func TestBrokenStream(t *testing.T) {
	p, srv := start(t)
	st, err := p.Exchange(context.Background(), &mcpgatewayv1.ExchangeRequest{Payload: []byte("hang")})
	if err != nil {
		t.Fatal(err)
	}
	<-srv.hung        // the exchange reached the server
	(<-srv.streams)() // the server ends the stream
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("in flight when the stream broke: %v", err)
	}
	st, err = p.Exchange(context.Background(), &mcpgatewayv1.ExchangeRequest{Payload: []byte("again")})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := items(st); err != nil || fmt.Sprint(got) != "[note/false again /true]" {
		t.Fatalf("after reopening: %v %v", got, err)
	}
}

// mcpOnly is an mcpgateway of an older build: McpService without PipeService.
type mcpOnly struct {
	mcpgatewayv1.UnimplementedMcpServiceServer
}

func (mcpOnly) Exchange(req *mcpgatewayv1.ExchangeRequest, st mcpgatewayv1.McpService_ExchangeServer) error {
	return st.Send(&mcpgatewayv1.ExchangeResponse{Final: true, Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: req.GetPayload()}})
}

// Against a server without the pipe, exchanges go as ordinary Exchange RPCs.
func TestServerWithoutThePipe(t *testing.T) {
	cc := grpctest.Loopback(t, func(g *grpc.Server) { mcpgatewayv1.RegisterMcpServiceServer(g, mcpOnly{}) })
	p := New(mcpgatewayv1.NewPipeServiceClient(cc))
	defer p.Close()
	client := MCP(mcpgatewayv1.NewMcpServiceClient(cc), p)
	for i := range 3 { // the first finds out, the next go straight
		st, err := client.Exchange(context.Background(), &mcpgatewayv1.ExchangeRequest{Payload: []byte(fmt.Sprint("old", i))})
		if err != nil {
			t.Fatal(err)
		}
		got, err := items(st)
		if err != nil || fmt.Sprint(got) != fmt.Sprintf("[old%d/true]", i) {
			t.Fatalf("exchange %d: %v %v", i, got, err)
		}
	}
	if !p.direct.Load() {
		t.Fatal("the pipe did not switch to ordinary RPCs")
	}
}
