package admin

import (
	"context"
	"fmt"
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/pins"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A context's error decides the code even when an upstream failure wraps it too: a caller
// that gave up is Canceled, a call out of time DeadlineExceeded, never Unavailable.
func TestToStatusPutsTheContextFirst(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"connect abandoned", fmt.Errorf("%w: connecting %q: %w", upstream.ErrUpstream, "x", context.Canceled), codes.Canceled},
		{"connect out of time", fmt.Errorf("%w: connecting %q: %w", upstream.ErrUpstream, "x", context.DeadlineExceeded), codes.DeadlineExceeded},
		{"upstream failure", fmt.Errorf("%w: %q crashed", upstream.ErrUpstream, "x"), codes.Unavailable},
		{"rpc error", &upstream.RPCError{Code: -32602, Message: "Unknown tool"}, codes.Unavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := status.Code(toStatus(c.err)); got != c.want {
				t.Fatalf("toStatus(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

// A held tool's call is FailedPrecondition with the TOOL_HELD ErrorInfo (the edge's 409),
// naming the server, the tool and its state.
func TestToStatusToolHeld(t *testing.T) {
	st := status.Convert(toStatus(fmt.Errorf("call: %w", &pins.HeldError{Server: "rug", Tool: "echo", State: pins.StatePending})))
	if st.Code() != codes.FailedPrecondition || len(st.Details()) != 1 {
		t.Fatalf("toStatus = %v", st)
	}
	info, ok := st.Details()[0].(*errdetails.ErrorInfo)
	if !ok || info.GetReason() != "ADMIN_ERROR_REASON_TOOL_HELD" || info.GetMetadata()["server_id"] != "rug" || info.GetMetadata()["tool"] != "echo" || info.GetMetadata()["state"] != "pending" {
		t.Fatalf("details = %v", st.Details())
	}
}
