package admin

import (
	"context"
	"fmt"
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/upstream"
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
