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
	"sync"
	"time"

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
	pool      *workpool.Pool
	drain     <-chan struct{}
}

// NewServer returns a server whose calls pass through intercept (nil: none).
func NewServer(intercept grpc.UnaryServerInterceptor, workers int) *Server {
	return &Server{intercept: intercept, methods: map[string]method{}, pool: workpool.New(workers)}
}

// Register makes desc's unary methods, served by impl, callable through the pipe. Register
// every service before serving.
func (s *Server) Register(desc *grpc.ServiceDesc, impl any) {
	for _, m := range desc.Methods {
		s.methods["/"+desc.ServiceName+"/"+m.MethodName] = method{impl: impl, handler: m.Handler}
	}
}

type pipe struct {
	stream rpcmuxv1.RpcMuxService_PipeServer
	sendMu sync.Mutex

	mu       sync.Mutex
	calls    map[uint64]context.CancelFunc
	draining bool
	wg       sync.WaitGroup
}

func (p *pipe) send(r *rpcmuxv1.PipeResponse) {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	_ = p.stream.Send(r)
}

// Drain makes every pipe end once its calls in flight have answered, from when ch closes
// (the server's shutdown): a gRPC server's graceful stop waits for its streams, and a pipe's
// client would otherwise keep it open.
func (s *Server) Drain(ch <-chan struct{}) { s.drain = ch }

// Pipe serves one stream until the client closes it, it breaks, or the server drains; calls
// in flight when the stream breaks have their contexts cancelled, and Pipe returns once
// every call has ended.
func (s *Server) Pipe(stream rpcmuxv1.RpcMuxService_PipeServer) error {
	p := &pipe{stream: stream, calls: map[uint64]context.CancelFunc{}}
	recvDone := make(chan error, 1)
	go func() { recvDone <- s.recvLoop(stream.Context(), p) }()
	select {
	case err := <-recvDone:
		return err
	case <-s.drain: // nil when never set: blocks forever
		p.mu.Lock()
		p.draining = true // calls that arrive now are refused
		p.mu.Unlock()
		p.wg.Wait()
		return status.Error(codes.Unavailable, "rpcmux: the server is shutting down")
	}
}

func (s *Server) recvLoop(ctx context.Context, p *pipe) error {
	defer func() {
		p.mu.Lock()
		for _, cancel := range p.calls {
			cancel()
		}
		p.mu.Unlock()
		p.wg.Wait()
	}()
	for {
		req, err := p.stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return nil
		}
		id := req.GetCallId()
		if req.GetCancel() {
			p.mu.Lock()
			if cancel := p.calls[id]; cancel != nil {
				cancel()
			}
			p.mu.Unlock()
			continue
		}
		var callCtx context.Context
		var cancel context.CancelFunc
		if t := req.GetTimeoutMs(); t > 0 {
			callCtx, cancel = context.WithTimeout(ctx, time.Duration(t)*time.Millisecond)
		} else {
			callCtx, cancel = context.WithCancel(ctx)
		}
		p.mu.Lock()
		if p.draining {
			// Pipe is returning (or has returned): nothing may be sent on the stream any
			// more. The client fails this call with Unavailable when the stream ends.
			p.mu.Unlock()
			cancel()
			continue
		}
		if _, dup := p.calls[id]; dup {
			p.mu.Unlock()
			cancel()
			p.send(&rpcmuxv1.PipeResponse{CallId: id, Code: int32(codes.InvalidArgument), Message: "rpcmux: call id already in flight"})
			continue
		}
		p.calls[id] = cancel
		p.wg.Add(1) // under p.mu, before draining is set: Wait never races an Add
		p.mu.Unlock()
		s.pool.Go(func() {
			defer p.wg.Done()
			resp := s.call(callCtx, req)
			p.mu.Lock()
			delete(p.calls, id)
			p.mu.Unlock()
			gone := ctx.Err() != nil // the stream is gone: nobody to answer
			cancel()
			if !gone {
				resp.CallId = id
				p.send(resp)
			}
		})
	}
}

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
