package streamable

import (
	"context"
	"errors"
	"io"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// In calls srv (mcpserve.Routes) in-process as a client would over gRPC: the transport and
// the endpoints are in one process, so the messages are handed over, not encoded. The call's
// context is the request's (the exchange's, with its incoming metadata: the caller's key). A
// message is copied as it is sent, since a sender may reuse it, as gRPC lets it.
func In(srv mcpgatewayv1.McpServiceServer) mcpgatewayv1.McpServiceClient { return inproc{srv} }

type inproc struct{ srv mcpgatewayv1.McpServiceServer }

func (c inproc) Exchange(ctx context.Context, in *mcpgatewayv1.ExchangeRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[mcpgatewayv1.ExchangeResponse], error) {
	p := newPipe[mcpgatewayv1.ExchangeResponse](ctx)
	go func() { p.close(c.srv.Exchange(in, p)) }()
	return p, nil
}

func (c inproc) Listen(ctx context.Context, in *mcpgatewayv1.ListenRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[mcpgatewayv1.ListenResponse], error) {
	p := newPipe[mcpgatewayv1.ListenResponse](ctx)
	go func() { p.close(c.srv.Listen(in, p)) }()
	return p, nil
}

func (c inproc) EndSession(ctx context.Context, in *mcpgatewayv1.EndSessionRequest, _ ...grpc.CallOption) (*mcpgatewayv1.EndSessionResponse, error) {
	out, err := c.srv.EndSession(ctx, in)
	return out, statusOf(err)
}

// pipe is both ends of one server stream: the server's Send hands a copy to the client's
// Recv; the server's return ends it (io.EOF, or its error as a status).
type pipe[T any] struct {
	ctx  context.Context
	ch   chan *T
	done chan struct{}
	err  error
}

func newPipe[T any](ctx context.Context) *pipe[T] {
	return &pipe[T]{ctx: ctx, ch: make(chan *T), done: make(chan struct{})}
}

func (p *pipe[T]) close(err error) {
	p.err = statusOf(err)
	close(p.done)
}

// statusOf is the error a gRPC client would see: nil, a status, or the status of a context's
// error.
func statusOf(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unknown, err.Error())
}

// Send is the server's: it waits until the client takes the message or the call ends.
func (p *pipe[T]) Send(m *T) error {
	c := proto.Clone(any(m).(proto.Message)).(any).(*T)
	select {
	case p.ch <- c:
		return nil
	case <-p.ctx.Done():
		return statusOf(p.ctx.Err())
	}
}

// Recv is the client's. Every message sent was taken before close (Send waits), so a closed
// pipe has none left.
func (p *pipe[T]) Recv() (*T, error) {
	select {
	case m := <-p.ch:
		return m, nil
	case <-p.done:
		if p.err != nil {
			return nil, p.err
		}
		return nil, io.EOF
	case <-p.ctx.Done():
		return nil, statusOf(p.ctx.Err())
	}
}

// Context is the server's view of the call: the client's context.
func (p *pipe[T]) Context() context.Context { return p.ctx }

// The rest of grpc.ServerStream and grpc.ClientStream: headers and trailers are not used by
// the endpoints.
func (p *pipe[T]) SetHeader(metadata.MD) error  { return nil }
func (p *pipe[T]) SendHeader(metadata.MD) error { return nil }
func (p *pipe[T]) SetTrailer(metadata.MD)       {}
func (p *pipe[T]) Header() (metadata.MD, error) { return nil, nil }
func (p *pipe[T]) Trailer() metadata.MD         { return nil }
func (p *pipe[T]) CloseSend() error             { return nil }
func (p *pipe[T]) SendMsg(m any) error          { return p.Send(m.(*T)) }
func (p *pipe[T]) RecvMsg(m any) error {
	got, err := p.Recv()
	if err != nil {
		return err
	}
	proto.Merge(m.(proto.Message), any(got).(proto.Message))
	return nil
}
