package admin

import (
	"context"
	"errors"

	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// toStatus maps the admin service's errors to gRPC codes, in one place. The edge turns the
// codes into Lemonade's HTTP statuses per route.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var rpcErr *upstream.RPCError
	code := codes.Internal
	switch {
	case errors.Is(err, serverconfig.ErrInvalid), errors.Is(err, serverconfig.ErrInvalidPreset), errors.Is(err, errBadRequest):
		code = codes.InvalidArgument
	case errors.Is(err, registry.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, upstream.ErrDisabled), errors.Is(err, upstream.ErrNotConnected):
		code = codes.FailedPrecondition
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, upstream.ErrUpstream), errors.As(err, &rpcErr):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, err.Error())
}

var errBadRequest = errors.New("bad request")
