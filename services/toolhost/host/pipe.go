package host

import (
	"context"

	"github.com/zestmcp/zest/lib/muxstream"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pipeServer serves ToolHostService.Pipe on the shared multiplexing loop (lib/muxstream):
// calls run on the gRPC server's pool, answers are sent as they come, in any order, and a
// draining tool host ends its streams once their calls have answered.
func (h *Host) pipeServer() muxstream.Server[*toolhostv1.PipeRequest, *toolhostv1.PipeResponse] {
	return muxstream.Server[*toolhostv1.PipeRequest, *toolhostv1.PipeResponse]{
		CallID:   (*toolhostv1.PipeRequest).GetCallId,
		IsCancel: (*toolhostv1.PipeRequest).GetCancel,
		Handle:   h.pipeCall,
		Duplicate: func(id uint64) *toolhostv1.PipeResponse {
			return pipeFailure(id, status.Errorf(codes.InvalidArgument, "pipe: call id %d is already in flight", id))
		},
		Pool:  h.srv.Pool,
		Drain: h.srv.Draining(),
	}
}

// Pipe implements ToolHostService: calls multiplexed on one stream.
func (h *Host) Pipe(stream toolhostv1.ToolHostService_PipeServer) error { return h.pipe.Serve(stream) }

// pipeCall runs one call; a cancelled one is answered as cancelled (the client has forgotten
// it, so the answer is dropped there).
func (h *Host) pipeCall(ctx context.Context, req *toolhostv1.PipeRequest, send func(*toolhostv1.PipeResponse) error) {
	id := req.GetCallId()
	var onProgress func([]byte)
	if req.GetProgress() {
		onProgress = func(n []byte) {
			_ = send(&toolhostv1.PipeResponse{CallId: id, Kind: &toolhostv1.PipeResponse_Notification{Notification: n}})
		}
	}
	answer, err := h.call(ctx, req.GetCall(), onProgress)
	if err != nil {
		_ = send(pipeFailure(id, err))
		return
	}
	_ = send(&toolhostv1.PipeResponse{CallId: id, Kind: &toolhostv1.PipeResponse_Answer{Answer: answer}})
}

func pipeFailure(id uint64, err error) *toolhostv1.PipeResponse {
	st := status.Convert(err)
	return &toolhostv1.PipeResponse{CallId: id, Kind: &toolhostv1.PipeResponse_Failure{Failure: &toolhostv1.PipeFailure{Code: int32(st.Code()), Message: st.Message()}}}
}
