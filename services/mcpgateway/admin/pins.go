package admin

import (
	"context"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/pins"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Audit actions of the decisions on held tool definitions: one entry per tool, its target
// "<tool>@<sha256 of the definition decided>".
const (
	ActionAcceptToolPin = "accept_tool_pin"
	ActionRefuseToolPin = "refuse_tool_pin"
)

// WithPins lists and decides the held tool definitions (the pipeline's pins; without it, or
// nil, none are held).
func WithPins(gate *pins.Gate) Option { return func(s *Service) { s.pins = gate } }

// errNoPins answers the pins' routes of an mcpgateway that holds none.
var errNoPins = status.Error(codes.Unimplemented, "this mcpgateway pins no tool definitions (its registry keeps no pins)")

// ListToolPins implements AdminService.
func (s *Service) ListToolPins(ctx context.Context, req *mcpgatewayv1.ListToolPinsRequest) (*mcpgatewayv1.ListToolPinsResponse, error) {
	if s.pins == nil {
		return nil, errNoPins
	}
	list, err := s.pins.List(ctx, req.GetServerId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpgatewayv1.ListToolPinsResponse{Servers: list}, nil
}

// AcceptToolPins implements AdminService.
func (s *Service) AcceptToolPins(ctx context.Context, req *mcpgatewayv1.AcceptToolPinsRequest) (*mcpgatewayv1.AcceptToolPinsResponse, error) {
	p, decided, err := s.decidePins(ctx, req.GetServerId(), req.GetTools(), true)
	if err != nil {
		return nil, err
	}
	return &mcpgatewayv1.AcceptToolPinsResponse{Pins: p, Decided: decided}, nil
}

// RefuseToolPins implements AdminService.
func (s *Service) RefuseToolPins(ctx context.Context, req *mcpgatewayv1.RefuseToolPinsRequest) (*mcpgatewayv1.RefuseToolPinsResponse, error) {
	p, decided, err := s.decidePins(ctx, req.GetServerId(), req.GetTools(), false)
	if err != nil {
		return nil, err
	}
	return &mcpgatewayv1.RefuseToolPinsResponse{Pins: p, Decided: decided}, nil
}

// decidePins decides, and records each tool decided in the audit trail (who, the tool, the
// hash of the definition decided); a decision that fails is recorded once, for the server.
func (s *Service) decidePins(ctx context.Context, server string, tools []string, accept bool) (*mcpgatewayv1.ToolPins, []*mcpgatewayv1.HeldTool, error) {
	if s.pins == nil {
		return nil, nil, errNoPins
	}
	if server == "" {
		return nil, nil, status.Error(codes.InvalidArgument, "server_id is empty: name the server whose held tools you decide")
	}
	action := ActionRefuseToolPin
	if accept {
		action = ActionAcceptToolPin
	}
	began := time.Now()
	p, decided, err := s.pins.Decide(ctx, server, tools, accept)
	if err != nil {
		s.audit.Admin(ctx, action, server, server, toStatus(err), time.Since(began), nil)
		return nil, nil, toStatus(err)
	}
	for _, h := range decided {
		s.audit.Admin(ctx, action, h.GetName()+"@"+h.GetNewSha256(), server, nil, time.Since(began), nil)
	}
	return p, decided, nil
}
