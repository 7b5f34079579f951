package host

import (
	"context"
	"errors"

	"github.com/zestmcp/zest/lib/envref"
	"github.com/zestmcp/zest/services/toolhost/sandbox"
	"github.com/zestmcp/zest/services/toolhost/stdio"
	"github.com/zestmcp/zest/services/toolhost/supervisor"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// toStatus maps the tool host's errors to gRPC codes, in one place. The message is the
// error's own text, which names what failed and never a secret value.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, supervisor.ErrUnknownServer):
		code = codes.NotFound
	case errors.Is(err, supervisor.ErrBadSpec), errors.Is(err, supervisor.ErrReservedVariable),
		errors.Is(err, envref.ErrRawValue), errors.Is(err, envref.ErrBadName), errors.Is(err, stdio.ErrBadRequest):
		code = codes.InvalidArgument
	case errors.Is(err, envref.ErrNotSet), errors.Is(err, stdio.ErrLaunch), errors.Is(err, sandbox.ErrUnavailable):
		code = codes.FailedPrecondition
	case errors.Is(err, stdio.ErrBusy):
		code = codes.ResourceExhausted
	case errors.Is(err, supervisor.ErrMoving):
		code = codes.Aborted // refused before the child saw it: the caller may send it elsewhere
	case errors.Is(err, supervisor.ErrCrashLoop), errors.Is(err, supervisor.ErrHandshake),
		errors.Is(err, stdio.ErrExited), errors.Is(err, stdio.ErrProtocol), errors.Is(err, supervisor.ErrClosed),
		errors.Is(err, supervisor.ErrStopped):
		code = codes.Unavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, err.Error())
}
