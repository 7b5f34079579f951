package rpcmux

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/zestmcp/zest/lib/muxstream"
	rpcmuxv1 "github.com/zestmcp/zest/proto/gen/zest/rpcmux/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Conn is a grpc.ClientConnInterface over cc whose unary calls go through the pipe; streams
// use cc itself. Build generated clients on it: NewXServiceClient(conn).
type Conn struct {
	cc  *grpc.ClientConn
	key string
	mux *muxstream.Client[*rpcmuxv1.PipeRequest, *rpcmuxv1.PipeResponse]
	// direct is set when the server has no RpcMuxService (an older build during a rolling
	// upgrade): calls then go as ordinary RPCs.
	direct atomic.Bool
}

// noMuxMessage marks the calls that failed because the server refused the pipe itself.
const noMuxMessage = "rpcmux: the server does not serve the pipe"

// NewConn returns a Conn over cc. key, when set, is sent as "Bearer <key>" with every call
// (the service key grpcdial gives the connection); otherwise a call carries the
// "authorization" of its context's outgoing metadata, as an ordinary RPC would.
func NewConn(cc *grpc.ClientConn, key string) *Conn {
	client := rpcmuxv1.NewRpcMuxServiceClient(cc)
	c := &Conn{cc: cc, key: key}
	c.mux = muxstream.New(muxstream.Config[*rpcmuxv1.PipeRequest, *rpcmuxv1.PipeResponse]{
		Open: func(ctx context.Context) (muxstream.Stream[*rpcmuxv1.PipeRequest, *rpcmuxv1.PipeResponse], error) {
			return client.Pipe(ctx)
		},
		CallID: (*rpcmuxv1.PipeResponse).GetCallId,
		Last:   func(*rpcmuxv1.PipeResponse) bool { return true },
		Broken: func(err error) *rpcmuxv1.PipeResponse {
			if status.Code(err) == codes.Unimplemented { // the stream was refused: no call ran
				c.direct.Store(true)
				return &rpcmuxv1.PipeResponse{Code: int32(codes.Unimplemented), Message: noMuxMessage}
			}
			return &rpcmuxv1.PipeResponse{Code: int32(codes.Unavailable), Message: "rpcmux pipe broke: " + status.Convert(err).Message()}
		},
		Cancel: func(id uint64) *rpcmuxv1.PipeRequest { return &rpcmuxv1.PipeRequest{CallId: id, Cancel: true} },
	})
	return c
}

// Close ends the pipe (not cc); calls in flight fail.
func (c *Conn) Close() { c.mux.Close() }

// Invoke sends one unary call through the pipe, or as an ordinary RPC to a server without
// the pipe.
func (c *Conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if c.direct.Load() {
		return c.cc.Invoke(ctx, method, args, reply, opts...)
	}
	in, ok := args.(proto.Message)
	out, ok2 := reply.(proto.Message)
	if !ok || !ok2 {
		return status.Errorf(codes.Internal, "rpcmux: %T or %T is not a protobuf message", args, reply)
	}
	payload, err := proto.Marshal(in)
	if err != nil {
		return status.Errorf(codes.Internal, "rpcmux: request: %v", err)
	}
	auth := ""
	if c.key != "" {
		auth = "Bearer " + c.key
	} else if md, ok := metadata.FromOutgoingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			auth = v[0]
		}
	}
	var timeout int64
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl).Milliseconds(); timeout < 1 {
			return status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())
		}
	}
	build := func(id uint64) *rpcmuxv1.PipeRequest {
		return &rpcmuxv1.PipeRequest{CallId: id, Method: method, Payload: payload, Authorization: auth, TimeoutMs: timeout}
	}
	id, ch, err := c.mux.CallWhenOpen(ctx, build, 2)
	switch {
	case errors.Is(err, muxstream.ErrClosed):
		return status.Error(codes.Canceled, "rpcmux pipe closed")
	case err != nil:
		return status.Error(codes.Unavailable, "rpcmux pipe: "+status.Convert(err).Message())
	}
	select {
	case r := <-ch:
		if code := codes.Code(r.GetCode()); code != codes.OK {
			if code == codes.Unimplemented && r.GetMessage() == noMuxMessage {
				return c.cc.Invoke(ctx, method, args, reply, opts...)
			}
			return status.Error(code, r.GetMessage())
		}
		if err := proto.Unmarshal(r.GetPayload(), out); err != nil {
			return status.Errorf(codes.Internal, "rpcmux: response: %v", err)
		}
		return nil
	case <-ctx.Done():
		c.mux.Abandon(id)
		return status.FromContextError(ctx.Err()).Err()
	}
}

// NewStream opens a stream on the connection itself.
func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.cc.NewStream(ctx, desc, method, opts...)
}
