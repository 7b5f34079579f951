package edgepipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// server is a small PipeService: tool calls answer "<id> <authorization>", exchanges send a
// note and a final item, "hang" waits to be cancelled, "fail" fails.
type server struct {
	mcpgatewayv1.UnimplementedPipeServiceServer
	cancels chan uint64
	hung    chan uint64 // a "hang" tool call arrived
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
	for {
		req, err := st.Recv()
		if err != nil {
			return
		}
		id := req.GetCallId()
		switch k := req.GetKind().(type) {
		case *mcpgatewayv1.PipeRequest_Cancel:
			s.cancels <- id
		case *mcpgatewayv1.PipeRequest_CallTool:
			switch k.CallTool.GetId() {
			case "hang":
				s.hung <- id
			case "fail":
				send(&mcpgatewayv1.PipeResponse{CallId: id, Last: true, Kind: &mcpgatewayv1.PipeResponse_Failure{Failure: &mcpgatewayv1.PipeStatus{Code: int32(codes.NotFound), Message: "no such server"}}})
			default:
				go send(&mcpgatewayv1.PipeResponse{CallId: id, Last: true, Kind: &mcpgatewayv1.PipeResponse_CallTool{CallTool: &mcpgatewayv1.CallToolResponse{
					Body: &httpbody.HttpBody{Data: []byte(k.CallTool.GetId() + " " + req.GetAuthorization())}}}})
			}
		case *mcpgatewayv1.PipeRequest_Exchange:
			if string(k.Exchange.GetPayload()) == "hang" {
				continue
			}
			send(&mcpgatewayv1.PipeResponse{CallId: id, Kind: &mcpgatewayv1.PipeResponse_Exchange{Exchange: &mcpgatewayv1.ExchangeResponse{Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: []byte("note")}}}})
			send(&mcpgatewayv1.PipeResponse{CallId: id, Last: true, Kind: &mcpgatewayv1.PipeResponse_Exchange{Exchange: &mcpgatewayv1.ExchangeResponse{Final: true,
				Kind: &mcpgatewayv1.ExchangeResponse_Message{Message: k.Exchange.GetPayload()}}}})
		}
	}
}

func start(t *testing.T) (*Pipe, *server) {
	t.Helper()
	srv := &server{cancels: make(chan uint64, 16), hung: make(chan uint64, 16), streams: make(chan context.CancelFunc, 16)}
	g := grpc.NewServer()
	mcpgatewayv1.RegisterPipeServiceServer(g, srv)
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
	p := New(mcpgatewayv1.NewPipeServiceClient(cc))
	t.Cleanup(p.Close)
	return p, srv
}

func withAuth(a string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", a)
}

// Concurrent tool calls each get their own answer and carry their caller's Authorization.
func TestCallToolConcurrent(t *testing.T) {
	p, _ := start(t)
	admin := Admin(nil, p)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			auth := fmt.Sprint("Bearer k", i%7)
			resp, err := admin.CallTool(withAuth(auth), &mcpgatewayv1.CallToolRequest{Id: fmt.Sprint("s", i)})
			if err != nil {
				t.Error(err)
				return
			}
			if got, want := string(resp.GetBody().GetData()), fmt.Sprint("s", i, " ", auth); got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		}()
	}
	wg.Wait()
	_, err := admin.CallTool(context.Background(), &mcpgatewayv1.CallToolRequest{Id: "fail"})
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != "no such server" {
		t.Fatalf("a failure is its gRPC status: %v", err)
	}
}

// An exchange reads like a server stream: its items, then io.EOF.
func TestExchangeReadsLikeAStream(t *testing.T) {
	p, _ := start(t)
	st, err := MCP(nil, p).Exchange(context.Background(), &mcpgatewayv1.ExchangeRequest{Payload: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		it, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s/%v", it.GetMessage(), it.GetFinal()))
	}
	if fmt.Sprint(got) != "[note/false hello/true]" {
		t.Fatalf("items %v", got)
	}
}

// A caller whose context ends abandons its call, and the server is told to cancel it; an
// exchange abandoned by a handler that stopped reading is cancelled when its context ends.
func TestCancelledCallsAreAbandoned(t *testing.T) {
	p, srv := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "hang"}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a call past its deadline: %v", err)
	}
	select {
	case <-srv.cancels:
	case <-time.After(5 * time.Second):
		t.Fatal("the server was not told to cancel the call")
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

// Calls in flight when the stream breaks fail with Unavailable; the next call opens a new one.
func TestBrokenStream(t *testing.T) {
	p, srv := start(t)
	if _, err := p.CallTool(context.Background(), &mcpgatewayv1.CallToolRequest{Id: "a"}); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := p.CallTool(context.Background(), &mcpgatewayv1.CallToolRequest{Id: "hang"})
		errc <- err
	}()
	<-srv.hung        // the call reached the server
	(<-srv.streams)() // the server ends the stream
	select {
	case err := <-errc:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("in flight when the stream broke: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a call in flight on a broken stream hung")
	}
	resp, err := p.CallTool(context.Background(), &mcpgatewayv1.CallToolRequest{Id: "b"})
	if err != nil || string(resp.GetBody().GetData()) != "b " {
		t.Fatalf("after reopening: %v %v", resp, err)
	}
}
