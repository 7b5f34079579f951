package admin

import (
	"context"
	"errors"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/pins"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// toStatus maps the admin service's errors to gRPC codes, in one place. The edge turns the
// codes into Lemonade's HTTP statuses per route.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var rpcErr *upstream.RPCError
	var filtered *serverconfig.ToolFilteredError
	var limited *toolcall.LimitError
	var refused *toolcall.ApprovalError
	var held *pins.HeldError
	code := codes.Internal
	switch {
	case errors.As(err, &limited): // before RPCError, which a LimitError also is
		return resourceExhausted(limited)
	case errors.As(err, &refused):
		return approvalNotGiven(refused)
	// A caller that gave up, or a call out of time, is told so whatever failed on the way
	// (an upstream failure wraps the context's error too).
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.As(err, &filtered):
		return toolFiltered(filtered)
	case errors.As(err, &held):
		return toolHeld(held)
	case errors.Is(err, serverconfig.ErrInvalid), errors.Is(err, serverconfig.ErrInvalidPreset):
		// The field the error names goes with it (BadRequest), for a form to show it there.
		st := status.New(codes.InvalidArgument, err.Error())
		if f := serverconfig.Field(err); f != "" {
			if withField, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: f, Description: err.Error()}}}); derr == nil {
				st = withField
			}
		}
		return st.Err()
	case errors.Is(err, errBadRequest):
		code = codes.InvalidArgument
	case errors.Is(err, registry.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, upstream.ErrDisabled):
		return serverState(mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_SERVER_DISABLED, err)
	case errors.As(err, new(*upstream.HeldError)):
		return serverState(mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_SERVER_DISCONNECTED, err)
	case errors.Is(err, upstream.ErrNotConnected):
		code = codes.FailedPrecondition
	case errors.As(err, new(*oauthclient.OnBehalfError)):
		// The admin API's caller holds a key, never an access token to exchange.
		var ob *oauthclient.OnBehalfError
		errors.As(err, &ob)
		return status.Error(codes.FailedPrecondition, ob.Error())
	case errors.As(err, new(*oauthclient.NeedsSignInError)), errors.Is(err, oauthclient.ErrNoSecretKey):
		// A server that signs in by OAuth without a usable token: the fix alone.
		msg, _ := oauthclient.Fix(err)
		return status.Error(codes.FailedPrecondition, msg)
	case errors.Is(err, upstream.ErrUpstream), errors.As(err, &rpcErr):
		code = codes.Unavailable
	}
	return status.Error(code, err.Error())
}

var errBadRequest = errors.New("bad request")

// errorDomain is the domain of the ErrorInfo details of AdminService errors: its proto
// package, as admin.proto says.
var errorDomain = string(mcpgatewayv1.File_zest_mcpgateway_v1_admin_proto.Package())

// toolFiltered is FailedPrecondition — the call is refused by the server's config, not by
// the tool — with an ErrorInfo that programs (and the edge, which answers 400) tell apart
// from a disabled server's FailedPrecondition.
func toolFiltered(e *serverconfig.ToolFilteredError) error {
	st := status.New(codes.FailedPrecondition, e.Error())
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_TOOL_FILTERED.String(),
		Domain:   errorDomain,
		Metadata: map[string]string{"server_id": e.ServerID, "tool": e.Tool, "field": e.Field, "pattern": e.Pattern},
	})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// toolHeld is a call of a tool whose definition is held (pins): FailedPrecondition with an
// ErrorInfo (TOOL_HELD) that the edge answers 409 — a state an administrator decides, not a
// failure of the server.
func toolHeld(e *pins.HeldError) error {
	st := status.New(codes.FailedPrecondition, e.Error())
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_TOOL_HELD.String(),
		Domain:   errorDomain,
		Metadata: map[string]string{"server_id": e.Server, "tool": e.Tool, "state": e.State},
	})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// serverState is a connect or call of a server in a state an administrator set — disabled
// (SERVER_DISABLED), or disconnected (SERVER_DISCONNECTED): FailedPrecondition with an
// ErrorInfo that the edge answers 409, rather than a failure of the server (502).
func serverState(reason mcpgatewayv1.AdminErrorReason, err error) error {
	st := status.New(codes.FailedPrecondition, err.Error())
	md := map[string]string{}
	var d *upstream.DisabledError
	var h *upstream.HeldError
	switch {
	case errors.As(err, &d):
		md["server_id"] = d.ID
	case errors.As(err, &h):
		md["server_id"] = h.ID
	}
	withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   reason.String(),
		Domain:   errorDomain,
		Metadata: md,
	})
	if derr != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// resourceExhausted is a server over its rate_limit or max_concurrency: ResourceExhausted
// with RetryInfo, which the edge answers 429 with Retry-After.
func resourceExhausted(e *toolcall.LimitError) error {
	st := status.New(codes.ResourceExhausted, e.Error())
	withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(e.RetryAfter)})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// approvalNotGiven is a call that needs approval and was not run (denied, expired,
// withdrawn, or none could be asked): FailedPrecondition with an ErrorInfo that the edge
// answers 403, its message saying why, for a person to read (Lemonade's GUI shows it).
func approvalNotGiven(e *toolcall.ApprovalError) error {
	st := status.New(codes.FailedPrecondition, e.Error())
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_APPROVAL_NOT_GIVEN.String(),
		Domain:   errorDomain,
		Metadata: map[string]string{"approval_id": e.Approval, "state": e.State},
	})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}
