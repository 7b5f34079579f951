// Package rpcmux carries the unary calls of Zest's gRPC services over one long-lived stream
// per connection (RpcMuxService.Pipe). A unary RPC in grpc-go costs an HTTP/2 stream: headers
// encoded and decoded, a trailer, a handler goroutine; on the small calls services make of each
// other (list the models, call a tool) that is most of their CPU. Over the pipe a call is one
// message each way, multiplexed with lib/muxstream.
//
// The server side runs every call through the same unary interceptors as an ordinary RPC
// (keys included: the call's authorization travels with it), so a method behaves the same
// either way. The client side is a grpc.ClientConnInterface: generated clients built on it
// send their unary methods through the pipe and their streaming methods over the connection
// as before.
package rpcmux

import (
	"context"
	"time"

	"github.com/zestmcp/zest/lib/muxstream"
	"github.com/zestmcp/zest/lib/workpool"
	rpcmuxv1 "github.com/zestmcp/zest/proto/gen/zest/rpcmux/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// PipeMethod is the full name of the pipe itself.
var PipeMethod = rpcmuxv1.RpcMuxService_Pipe_FullMethodName

type method struct {
	impl    any
	handler grpc.MethodHandler
}

// Server serves RpcMuxService for the services registered with it.
type Server struct {
	rpcmuxv1.UnimplementedRpcMuxServiceServer
	intercept grpc.UnaryServerInterceptor
	methods   map[string]method
	mux       muxstream.Server[*rpcmuxv1.PipeRequest, *rpcmuxv1.PipeResponse]
}

// NewServer returns a server whose calls pass through intercept (nil: none) and run on pool;
// its pipes end, once their calls have answered, when drain closes (the server's shutdown).
func NewServer(intercept grpc.UnaryServerInterceptor, pool *workpool.Pool, drain <-chan struct{}) *Server {
	s := &Server{intercept: intercept, methods: map[string]method{}}
	s.mux = muxstream.Server[*rpcmuxv1.PipeRequest, *rpcmuxv1.PipeResponse]{
		CallID:   (*rpcmuxv1.PipeRequest).GetCallId,
		IsCancel: (*rpcmuxv1.PipeRequest).GetCancel,
		Timeout: func(r *rpcmuxv1.PipeRequest) time.Duration {
			return time.Duration(r.GetTimeoutMs()) * time.Millisecond
		},
		Handle: func(ctx context.Context, req *rpcmuxv1.PipeRequest, send func(*rpcmuxv1.PipeResponse) error) {
			resp := s.call(ctx, req)
			if ctx.Err() == nil { // else the client gave up or the stream is gone
				resp.CallId = req.GetCallId()
				_ = send(resp)
			}
		},
		Duplicate: func(id uint64) *rpcmuxv1.PipeResponse {
			return &rpcmuxv1.PipeResponse{CallId: id, Code: int32(codes.InvalidArgument), Message: "rpcmux: call id already in flight"}
		},
		Pool:    pool,
		Drain:   drain,
		Drained: status.Error(codes.Unavailable, "rpcmux: the server is shutting down"),
	}
	return s
}

// Register makes desc's unary methods, served by impl, callable through the pipe. Register
// every service before serving.
func (s *Server) Register(desc *grpc.ServiceDesc, impl any) {
	for _, m := range desc.Methods {
		s.methods["/"+desc.ServiceName+"/"+m.MethodName] = method{impl: impl, handler: m.Handler}
	}
}

// Pipe serves one stream (lib/muxstream.Server).
func (s *Server) Pipe(stream rpcmuxv1.RpcMuxService_PipeServer) error { return s.mux.Serve(stream) }

// call runs one unary call as an ordinary RPC would run: interceptors, then the handler.
func (s *Server) call(ctx context.Context, req *rpcmuxv1.PipeRequest) *rpcmuxv1.PipeResponse {
	m, ok := s.methods[req.GetMethod()]
	if !ok {
		return &rpcmuxv1.PipeResponse{Code: int32(codes.Unimplemented), Message: "rpcmux: unknown method " + req.GetMethod()}
	}
	if a := req.GetAuthorization(); a != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", a))
	}
	ctx = grpc.NewContextWithServerTransportStream(ctx, serverStream{method: req.GetMethod()})
	dec := func(v any) error {
		msg, ok := v.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "rpcmux: %T is not a protobuf message", v)
		}
		if err := proto.Unmarshal(req.GetPayload(), msg); err != nil {
			return status.Errorf(codes.InvalidArgument, "rpcmux: request: %v", err)
		}
		return nil
	}
	out, err := m.handler(m.impl, ctx, dec, s.intercept)
	if err != nil {
		st := status.Convert(err)
		return &rpcmuxv1.PipeResponse{Code: int32(st.Code()), Message: st.Message()}
	}
	b, err := proto.Marshal(out.(proto.Message))
	if err != nil {
		return &rpcmuxv1.PipeResponse{Code: int32(codes.Internal), Message: "rpcmux: response: " + err.Error()}
	}
	return &rpcmuxv1.PipeResponse{Payload: b}
}

// serverStream lets handlers ask grpc.Method(ctx) and set headers, which the pipe does not
// carry (no Zest handler sets any).
type serverStream struct{ method string }

func (s serverStream) Method() string             { return s.method }
func (serverStream) SetHeader(metadata.MD) error  { return nil }
func (serverStream) SendHeader(metadata.MD) error { return nil }
func (serverStream) SetTrailer(metadata.MD) error { return nil }
