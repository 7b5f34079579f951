package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// testService answers the four kinds of call; a payload of "fail" fails the call with NotFound
// (a stream after its first message), and a server stream of "hold" waits for its caller to
// cancel after one message.
type testService struct {
	testpb.UnimplementedTestServiceServer
}

func failing(p *testpb.Payload) bool { return string(p.GetBody()) == "fail" }

func (testService) UnaryCall(_ context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if failing(in.GetPayload()) {
		return nil, status.Error(codes.NotFound, "no such thing")
	}
	return &testpb.SimpleResponse{Payload: in.GetPayload()}, nil
}

func (testService) StreamingOutputCall(in *testpb.StreamingOutputCallRequest, ss testpb.TestService_StreamingOutputCallServer) error {
	if string(in.GetPayload().GetBody()) == "hold" {
		if err := ss.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
		<-ss.Context().Done()
		return ss.Context().Err() // a context error, not a status: counted as Canceled
	}
	for range 3 {
		if err := ss.Send(&testpb.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
			return err
		}
		if failing(in.GetPayload()) {
			return status.Error(codes.NotFound, "no such thing")
		}
	}
	return nil
}

func (testService) StreamingInputCall(ss testpb.TestService_StreamingInputCallServer) error {
	n := 0
	for {
		_, err := ss.Recv()
		if errors.Is(err, io.EOF) {
			return ss.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(n)})
		}
		if err != nil {
			return err
		}
		n++
	}
}

func (testService) FullDuplexCall(ss testpb.TestService_FullDuplexCallServer) error {
	for {
		in, err := ss.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if failing(in.GetPayload()) {
			return status.Error(codes.NotFound, "no such thing")
		}
		if err := ss.Send(&testpb.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
			return err
		}
	}
}

// interceptors is one set of gRPC metrics under test.
type interceptors struct {
	initialize   func(*grpc.Server)
	unaryServer  grpc.UnaryServerInterceptor
	streamServer grpc.StreamServerInterceptor
	unaryClient  grpc.UnaryClientInterceptor
	streamClient grpc.StreamClientInterceptor
}

// runCalls serves testService with in's interceptors on 127.0.0.1, makes every kind of call
// through them, ending well and failing, and stops the server once every handler returned.
func runCalls(t *testing.T, in interceptors) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(in.unaryServer), grpc.StreamInterceptor(in.streamServer))
	testpb.RegisterTestServiceServer(srv, testService{})
	in.initialize(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(in.unaryClient), grpc.WithStreamInterceptor(in.streamClient))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c := testpb.NewTestServiceClient(cc)
	ok, fail := &testpb.Payload{Body: []byte("ok")}, &testpb.Payload{Body: []byte("fail")}
	for _, p := range []*testpb.Payload{ok, ok, fail} {
		_, _ = c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: p})
	}
	_, _ = c.EmptyCall(ctx, &testpb.Empty{}) // Unimplemented
	for _, p := range []*testpb.Payload{ok, fail} {
		out, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{Payload: p})
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = out.Recv()
		}
	}
	in2, err := c.StreamingInputCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := in2.Send(&testpb.StreamingInputCallRequest{Payload: ok}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in2.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	for _, last := range []*testpb.Payload{ok, fail} {
		bidi, err := c.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []*testpb.Payload{ok, last} {
			if err := bidi.Send(&testpb.StreamingOutputCallRequest{Payload: p}); err != nil {
				t.Fatal(err)
			}
		}
		if err := bidi.CloseSend(); err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = bidi.Recv()
		}
	}
	// A stream the client cancels before its end.
	cctx, cancel := context.WithCancel(ctx)
	out, err := c.StreamingOutputCall(cctx, &testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("hold")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	for err == nil {
		_, err = out.Recv()
	}
	// A call that cannot start: its context has ended.
	_, _ = c.FullDuplexCall(cctx)
	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
	srv.GracefulStop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// exposition lists every series of r: name, type, help, labels and value (a histogram's count:
// its sum and buckets are times).
func exposition(t *testing.T, r *prometheus.Registry) []string {
	t.Helper()
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			v := m.GetCounter().GetValue()
			if h := m.GetHistogram(); h != nil {
				v = float64(h.GetSampleCount())
				if len(h.GetBucket()) != len(LatencyBuckets) {
					t.Errorf("%s has %d buckets, want %d", mf.GetName(), len(h.GetBucket()), len(LatencyBuckets))
				}
			}
			out = append(out, fmt.Sprintf("%s %s %q %v %v", mf.GetName(), mf.GetType(), mf.GetHelp(), labels, v))
		}
	}
	slices.Sort(out)
	return out
}

// TestGRPCMetricsAsGoGRPCMiddleware runs the same calls through go-grpc-middleware's
// interceptors (what the services used before) and through ours, and compares what a scrape
// shows: the same names, help, types, labels and counts.
func TestGRPCMetricsAsGoGRPCMiddleware(t *testing.T) {
	refServer := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(LatencyBuckets)))
	refClient := grpcprom.NewClientMetrics(grpcprom.WithClientHandlingTimeHistogram(grpcprom.WithHistogramBuckets(LatencyBuckets)))
	ref := prometheus.NewRegistry()
	ref.MustRegister(refServer, refClient)
	runCalls(t, interceptors{
		initialize:   func(s *grpc.Server) { refServer.InitializeMetrics(s) },
		unaryServer:  refServer.UnaryServerInterceptor(),
		streamServer: refServer.StreamServerInterceptor(),
		unaryClient:  refClient.UnaryClientInterceptor(),
		streamClient: refClient.StreamClientInterceptor(),
	})

	server, client := newTestGRPCMetrics()
	ours := prometheus.NewRegistry()
	ours.MustRegister(server, client)
	runCalls(t, interceptors{
		initialize:   server.initialize,
		unaryServer:  server.unaryServer(),
		streamServer: server.streamServer(),
		unaryClient:  client.unaryClient(),
		streamClient: client.streamClient(),
	})

	want, got := exposition(t, ref), exposition(t, ours)
	if !slices.Equal(got, want) {
		for _, s := range got {
			if !slices.Contains(want, s) {
				t.Errorf("ours only: %s", s)
			}
		}
		for _, s := range want {
			if !slices.Contains(got, s) {
				t.Errorf("go-grpc-middleware only: %s", s)
			}
		}
	}
	if len(want) < 100 {
		t.Fatalf("the scrape has %d series: the calls did not run", len(want))
	}
}

// newTestGRPCMetrics builds a server's and a client's metrics as GRPCServer and GRPCClient,
// for a registry of a test's own.
func newTestGRPCMetrics() (server, client *grpcMetrics) {
	server = newGRPCMetrics("server", GRPCServer.help)
	server.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "in_flight"}, []string{"grpc_service", "grpc_method"})
	return server, newGRPCMetrics("client", GRPCClient.help)
}
