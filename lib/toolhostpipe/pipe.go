// Package toolhostpipe is the client side of ToolHostService.Pipe: many concurrent calls
// multiplexed on one long-lived stream (see lib/muxstream), which costs far less per call
// than a unary RPC. Calls in flight when the stream breaks fail with codes.Unavailable.
package toolhostpipe

import (
	"context"
	"errors"

	"github.com/zestmcp/zest/lib/muxstream"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Pipe multiplexes calls to one tool host.
type Pipe struct {
	mux *muxstream.Client[*toolhostv1.PipeRequest, *toolhostv1.PipeResponse]
}

// New returns a pipe over client; Close ends it.
func New(client toolhostv1.ToolHostServiceClient) *Pipe {
	return &Pipe{mux: muxstream.New(muxstream.Config[*toolhostv1.PipeRequest, *toolhostv1.PipeResponse]{
		Open: func(ctx context.Context) (muxstream.Stream[*toolhostv1.PipeRequest, *toolhostv1.PipeResponse], error) {
			return client.Pipe(ctx)
		},
		CallID: (*toolhostv1.PipeResponse).GetCallId,
		Last:   func(r *toolhostv1.PipeResponse) bool { return r.GetNotification() == nil },
		Broken: func(err error) *toolhostv1.PipeResponse {
			return &toolhostv1.PipeResponse{Kind: &toolhostv1.PipeResponse_Failure{Failure: &toolhostv1.PipeFailure{
				Code: int32(codes.Unavailable), Message: "tool host pipe broke: " + status.Convert(err).Message()}}}
		},
		Cancel: func(id uint64) *toolhostv1.PipeRequest { return &toolhostv1.PipeRequest{CallId: id, Cancel: true} },
	})}
}

// Call runs one request. onProgress, when not nil, receives the call's progress
// notifications (dropped, never blocking, when it falls 16 behind). Errors are gRPC
// statuses, as Call's would be.
func (p *Pipe) Call(ctx context.Context, req *toolhostv1.CallRequest, onProgress func([]byte)) (*toolhostv1.CallResponse, error) {
	build := func(id uint64) *toolhostv1.PipeRequest {
		return &toolhostv1.PipeRequest{CallId: id, Call: req, Progress: onProgress != nil}
	}
	id, ch, err := p.mux.CallWhenOpen(ctx, build, 16)
	if err != nil {
		if errors.Is(err, muxstream.ErrClosed) {
			return nil, status.Error(codes.Canceled, "pipe closed")
		}
		return nil, status.Error(codes.Unavailable, "tool host pipe: "+status.Convert(err).Message())
	}
	for {
		select {
		case r := <-ch:
			switch k := r.GetKind().(type) {
			case *toolhostv1.PipeResponse_Notification:
				if onProgress != nil {
					onProgress(k.Notification)
				}
				continue
			case *toolhostv1.PipeResponse_Answer:
				return k.Answer, nil
			case *toolhostv1.PipeResponse_Failure:
				return nil, status.Error(codes.Code(k.Failure.GetCode()), k.Failure.GetMessage())
			}
			return nil, status.Error(codes.Internal, "tool host pipe: empty response")
		case <-ctx.Done():
			p.mux.Abandon(id)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, status.Error(codes.DeadlineExceeded, ctx.Err().Error())
			}
			return nil, status.Error(codes.Canceled, ctx.Err().Error())
		}
	}
}

// Close ends the stream; calls in flight fail.
func (p *Pipe) Close() { p.mux.Close() }
