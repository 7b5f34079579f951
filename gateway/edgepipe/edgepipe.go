// Package edgepipe is the edge's side of mcpgateway's PipeService.Pipe: POST /mcp exchanges
// (a server stream each) multiplexed on one long-lived stream (lib/muxstream) instead of one
// RPC each; unary calls travel on lib/rpcmux. It plugs in behind the generated client, so the
// /mcp handler does not change: MCP wraps McpServiceClient and sends Exchange through the
// pipe. Each exchange carries its caller's own Authorization value, which mcpgateway checks
// with McpService's rule. Exchanges in flight when the stream breaks fail with
// codes.Unavailable; one whose context ends is abandoned, and mcpgateway cancels it.
package edgepipe

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/zestmcp/zest/lib/muxstream"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// exchangeBuffer is how many items of one exchange may wait for the HTTP handler; a client
// that falls further behind (it stopped reading its SSE stream) has its call failed rather
// than stall the other calls on the pipe.
const exchangeBuffer = 64

// Pipe multiplexes calls to one mcpgateway.
type Pipe struct {
	mux *muxstream.Client[*mcpgatewayv1.PipeRequest, *mcpgatewayv1.PipeResponse]
	// direct is set when mcpgateway has no PipeService (an older build during a rolling
	// upgrade): MCP's exchanges then go as ordinary Exchange RPCs.
	direct atomic.Bool
}

// noPipeMessage marks the exchanges that failed because mcpgateway refused the pipe itself.
const noPipeMessage = "mcpgateway does not serve the pipe"

// New returns a pipe over client; Close ends it.
func New(client mcpgatewayv1.PipeServiceClient) *Pipe {
	p := &Pipe{}
	p.mux = muxstream.New(muxstream.Config[*mcpgatewayv1.PipeRequest, *mcpgatewayv1.PipeResponse]{
		Open: func(ctx context.Context) (muxstream.Stream[*mcpgatewayv1.PipeRequest, *mcpgatewayv1.PipeResponse], error) {
			return client.Pipe(ctx)
		},
		CallID: (*mcpgatewayv1.PipeResponse).GetCallId,
		Last:   (*mcpgatewayv1.PipeResponse).GetLast,
		Keep:   func(*mcpgatewayv1.PipeResponse) bool { return true }, // no MCP message may be lost
		Broken: func(err error) *mcpgatewayv1.PipeResponse {
			code, msg := codes.Unavailable, "mcpgateway pipe: "+status.Convert(err).Message()
			switch {
			case errors.Is(err, muxstream.ErrSlowCaller):
				code = codes.ResourceExhausted
			case status.Code(err) == codes.Unimplemented: // the stream was refused: nothing ran
				p.direct.Store(true)
				code, msg = codes.Unimplemented, noPipeMessage
			}
			return &mcpgatewayv1.PipeResponse{Last: true, Kind: &mcpgatewayv1.PipeResponse_Failure{Failure: &mcpgatewayv1.PipeStatus{
				Code: int32(code), Message: msg}}}
		},
		Cancel: func(id uint64) *mcpgatewayv1.PipeRequest {
			return &mcpgatewayv1.PipeRequest{CallId: id, Kind: &mcpgatewayv1.PipeRequest_Cancel{Cancel: true}}
		},
	})
	return p
}

// Close ends the stream; calls in flight fail.
func (p *Pipe) Close() { p.mux.Close() }

// authorization is the caller's Authorization value the edge put in ctx's outgoing metadata.
func authorization(ctx context.Context) string {
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// start sends a call, waiting while the stream cannot be opened (muxstream.CallWhenOpen).
func (p *Pipe) start(ctx context.Context, build func(id uint64) *mcpgatewayv1.PipeRequest, buf int) (uint64, <-chan *mcpgatewayv1.PipeResponse, error) {
	id, ch, err := p.mux.CallWhenOpen(ctx, build, buf)
	switch {
	case errors.Is(err, muxstream.ErrClosed):
		return 0, nil, status.Error(codes.Canceled, "mcpgateway pipe closed")
	case err != nil:
		return 0, nil, status.Error(codes.Unavailable, "mcpgateway pipe: "+status.Convert(err).Message())
	}
	return id, ch, nil
}

func ctxStatus(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, ctx.Err().Error())
	}
	return status.Error(codes.Canceled, ctx.Err().Error())
}

func failed(r *mcpgatewayv1.PipeResponse) error {
	f := r.GetFailure()
	return status.Error(codes.Code(f.GetCode()), f.GetMessage())
}

// Exchange is McpService.Exchange over the pipe.
func (p *Pipe) Exchange(ctx context.Context, req *mcpgatewayv1.ExchangeRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[mcpgatewayv1.ExchangeResponse], error) {
	return asStream(p.exchange(ctx, req, nil))
}

// asStream keeps a failed exchange a nil interface, not a nil *exchange inside one.
func asStream(x *exchange, err error) (grpc.ServerStreamingClient[mcpgatewayv1.ExchangeResponse], error) {
	if err != nil {
		return nil, err
	}
	return x, nil
}

// exchange sends an Exchange through the pipe; fallback, when not nil, opens it as an ordinary
// RPC instead should mcpgateway turn out not to serve the pipe.
func (p *Pipe) exchange(ctx context.Context, req *mcpgatewayv1.ExchangeRequest, fallback func() (grpc.ServerStreamingClient[mcpgatewayv1.ExchangeResponse], error)) (*exchange, error) {
	auth := authorization(ctx)
	id, ch, err := p.start(ctx, func(id uint64) *mcpgatewayv1.PipeRequest {
		return &mcpgatewayv1.PipeRequest{CallId: id, Authorization: auth, Kind: &mcpgatewayv1.PipeRequest_Exchange{Exchange: req}}
	}, exchangeBuffer)
	if err != nil {
		return nil, err
	}
	x := &exchange{ctx: ctx, ch: ch, fallback: fallback}
	// A handler that stops reading early (its client left) abandons the call when its
	// request's context ends; one that read the last item stops this first.
	x.stop = context.AfterFunc(ctx, func() { p.mux.Abandon(id) })
	return x, nil
}

// exchange is the items of one Exchange, read like a server stream.
type exchange struct {
	ctx  context.Context
	ch   <-chan *mcpgatewayv1.PipeResponse
	stop func() bool
	done bool
	// fallback opens the same exchange as an ordinary RPC, for a server without the pipe.
	fallback func() (grpc.ServerStreamingClient[mcpgatewayv1.ExchangeResponse], error)
	direct   grpc.ServerStreamingClient[mcpgatewayv1.ExchangeResponse]
}

// Recv returns the next item, io.EOF after the last, or the call's failure.
func (x *exchange) Recv() (*mcpgatewayv1.ExchangeResponse, error) {
	if x.direct != nil {
		return x.direct.Recv()
	}
	for !x.done {
		select {
		case r := <-x.ch:
			if r.GetLast() {
				x.done = true
				x.stop()
			}
			if f := r.GetFailure(); f != nil {
				if codes.Code(f.GetCode()) == codes.Unimplemented && f.GetMessage() == noPipeMessage && x.fallback != nil {
					st, err := x.fallback()
					if err != nil {
						return nil, err
					}
					x.direct = st
					return st.Recv()
				}
				return nil, failed(r)
			}
			if item := r.GetExchange(); item != nil {
				return item, nil
			}
		case <-x.ctx.Done():
			return nil, ctxStatus(x.ctx)
		}
	}
	return nil, io.EOF
}

func (x *exchange) Header() (metadata.MD, error) { return nil, nil }
func (x *exchange) Trailer() metadata.MD         { return nil }
func (x *exchange) CloseSend() error             { return nil }
func (x *exchange) Context() context.Context     { return x.ctx }
func (x *exchange) SendMsg(any) error {
	return status.Error(codes.Unimplemented, "an exchange takes no more messages")
}
func (x *exchange) RecvMsg(m any) error {
	out, ok := m.(*mcpgatewayv1.ExchangeResponse)
	if !ok {
		return status.Errorf(codes.Internal, "exchange: RecvMsg into %T", m)
	}
	item, err := x.Recv()
	if err != nil {
		return err
	}
	proto.Reset(out)
	proto.Merge(out, item)
	return nil
}

// MCP is an McpServiceClient whose Exchange goes through pipe.
func MCP(c mcpgatewayv1.McpServiceClient, pipe *Pipe) mcpgatewayv1.McpServiceClient {
	return mcpClient{McpServiceClient: c, pipe: pipe}
}

type mcpClient struct {
	mcpgatewayv1.McpServiceClient
	pipe *Pipe
}

func (m mcpClient) Exchange(ctx context.Context, req *mcpgatewayv1.ExchangeRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[mcpgatewayv1.ExchangeResponse], error) {
	if m.pipe.direct.Load() {
		return m.McpServiceClient.Exchange(ctx, req, opts...)
	}
	return asStream(m.pipe.exchange(ctx, req, func() (grpc.ServerStreamingClient[mcpgatewayv1.ExchangeResponse], error) {
		return m.McpServiceClient.Exchange(ctx, req, opts...)
	}))
}
