package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/zestmcp/zest/lib/park"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/stdio"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Parked calls: a caller whose MCP client cannot hold a stream open while it answers (MCP
// 2026-07-28, where the answer comes in a new request, to any mcpgateway replica) asks for
// CallRequest.park_ms. The call then runs apart from its stream (package park): when the child
// asks the client something, the stream ends after that ServerRequest, and the call waits,
// parked, for Resume with the answer; Resume streams the rest of the call. A call whose park
// passes, or whose caller went away with nothing asked, is cancelled as any call whose caller
// left.

// MaxPark bounds CallRequest.park_ms: a longer park is cut to it. The call's own timeout
// bounds it further.
const MaxPark = 10 * time.Minute

// itemKind is what a CallStream item is to a parked call: the child's request parks it, the
// answer ends it.
func itemKind(item *toolhostv1.CallStreamResponse) park.Kind {
	switch {
	case item.GetRequest() != nil:
		return park.Request
	case item.GetAnswer() != nil:
		return park.Last
	}
	return park.Progress
}

// Parked counts the calls run apart from their streams (attached or parked).
func (h *Host) Parked() int { return h.parked.Len() }

// callParkable runs a CallStream with park_ms apart from its stream.
func (h *Host) callParkable(req *toolhostv1.CallStreamRequest, stream toolhostv1.ToolHostService_CallStreamServer) error {
	wait := min(time.Duration(req.GetCall().GetParkMs())*time.Millisecond, MaxPark)
	rl := req.GetCall().GetRelays()
	c := h.parked.Start(stream.Context(), wait, func(ctx context.Context, c *park.Call[*toolhostv1.CallStreamResponse]) (*toolhostv1.CallStreamResponse, error) {
		ids := h.relays.forCall()
		hooks := stdio.Hooks{
			OnProgress: func(n []byte) {
				c.Push(&toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Notification{Notification: n}})
			},
			Accepts: func(method string) bool {
				return method == stdio.MethodSampling && rl.GetSampling() || method == stdio.MethodElicitation && rl.GetElicitation() ||
					method == stdio.MethodRoots && rl.GetRoots()
			},
			OnRequest: func(method string, params json.RawMessage, reply stdio.Reply) {
				c.Push(&toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Request{Request: &toolhostv1.ServerRequest{
					RelayId: ids.add(reply), Method: method, Params: params, CallId: c.ID()}}})
			},
		}
		answer, err := h.call(ctx, req.GetCall(), hooks)
		ids.end() // the child's requests still waiting were answered by stdio with an error
		return &toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Answer{Answer: answer}}, err
	})
	return h.serveParkable(stream.Context(), c, stream.Send)
}

// serveParkable streams what the call produces until its answer, or until a request of the
// child for the client, after which the call is parked (a send of the request that fails
// leaves it parked until its park passes). A caller that goes away with nothing asked
// cancels the call.
func (h *Host) serveParkable(ctx context.Context, c *park.Call[*toolhostv1.CallStreamResponse], send func(*toolhostv1.CallStreamResponse) error) error {
	err := h.parked.Serve(ctx, c, send)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return status.FromContextError(err).Err()
	}
	return err
}

// Resume implements ToolHostService: the client's answers go to the parked call's waiting
// requests, then the rest of the call is streamed as CallStream streams it.
func (h *Host) Resume(req *toolhostv1.ResumeRequest, stream toolhostv1.ToolHostService_ResumeServer) error {
	c, err := h.parked.Resume(req.GetCallId())
	switch {
	case errors.Is(err, park.ErrUnknown):
		return status.Error(codes.NotFound, fmt.Sprintf("call_id %q: no parked call (it ended, its park time passed, or it was parked by another tool host)", req.GetCallId()))
	case err != nil:
		return status.Error(codes.FailedPrecondition, fmt.Sprintf("call_id %q was resumed already", req.GetCallId()))
	}
	for _, a := range req.GetAnswers() {
		if _, err := h.Answer(stream.Context(), a); err != nil && status.Code(err) != codes.NotFound {
			h.parked.Park(c)
			return err
		}
	}
	return h.serveParkable(stream.Context(), c, func(r *toolhostv1.CallStreamResponse) error {
		return stream.Send(&toolhostv1.ResumeResponse{Item: r})
	})
}
