package upstream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestUpstreamErrSaysItsCauseOnce: a tool host's timeout or cancellation keeps its text and
// its cause (errors.Is), and says the cause once — it was "… timed out after 1s: context
// deadline exceeded: context deadline exceeded".
func TestUpstreamErrSaysItsCauseOnce(t *testing.T) {
	for _, c := range []struct {
		code  codes.Code
		msg   string
		cause error
	}{
		{codes.DeadlineExceeded, `tools/call on "slow" timed out after 1s: context deadline exceeded`, context.DeadlineExceeded},
		{codes.DeadlineExceeded, "the tool host gave up", context.DeadlineExceeded},
		{codes.Canceled, "context canceled", context.Canceled},
	} {
		err := upstreamErr("slow", status.Error(c.code, c.msg))
		if !errors.Is(err, c.cause) || !errors.Is(err, ErrUpstream) || strings.Count(err.Error(), c.cause.Error()) != 1 || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v %q: %v", c.code, c.msg, err)
		}
	}
}
