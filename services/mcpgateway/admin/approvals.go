package admin

import (
	"context"
	"errors"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ListApprovals implements AdminService: the calls that wait for approval, on every replica.
func (s *Service) ListApprovals(ctx context.Context, _ *mcpgatewayv1.ListApprovalsRequest) (*mcpgatewayv1.ListApprovalsResponse, error) {
	if s.approvals == nil {
		return nil, status.Error(codes.Unimplemented, "this mcpgateway holds no approvals")
	}
	list, err := s.approvals.Pending(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpgatewayv1.ListApprovalsResponse{Approvals: list, TimeoutMs: s.approvals.Timeout().Milliseconds()}, nil
}

// ApproveToolCall implements AdminService.
func (s *Service) ApproveToolCall(ctx context.Context, req *mcpgatewayv1.ApproveToolCallRequest) (*mcpgatewayv1.ApproveToolCallResponse, error) {
	a, err := s.decide(ctx, req.GetId(), true, req.GetReason())
	if err != nil {
		return nil, err
	}
	return &mcpgatewayv1.ApproveToolCallResponse{Approval: a}, nil
}

// DenyToolCall implements AdminService.
func (s *Service) DenyToolCall(ctx context.Context, req *mcpgatewayv1.DenyToolCallRequest) (*mcpgatewayv1.DenyToolCallResponse, error) {
	a, err := s.decide(ctx, req.GetId(), false, req.GetReason())
	if err != nil {
		return nil, err
	}
	return &mcpgatewayv1.DenyToolCallResponse{Approval: a}, nil
}

func (s *Service) decide(ctx context.Context, id string, approve bool, reason string) (*mcpgatewayv1.Approval, error) {
	if s.approvals == nil {
		return nil, status.Error(codes.Unimplemented, "this mcpgateway holds no approvals")
	}
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "id is required: the approval's id, from GET /internal/mcp/approvals")
	}
	if len(reason) > approval.MaxReason {
		return nil, status.Errorf(codes.InvalidArgument, "reason is %d bytes; at most %d are kept: shorten it", len(reason), approval.MaxReason)
	}
	a, err := s.approvals.Decide(ctx, id, approve, reason)
	switch {
	case errors.Is(err, approval.ErrNotFound):
		return nil, status.Errorf(codes.NotFound, "approval %q is not pending: it was decided, expired or withdrawn, or never existed; GET /internal/mcp/approvals lists the pending ones", id)
	case errors.Is(err, approval.ErrDecided):
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	case err != nil:
		return nil, toStatus(err)
	}
	verb := "denied"
	if approve {
		verb = "approved"
	}
	s.log.InfoContext(ctx, "tool call "+verb, "approval", id, "server", a.GetServerId(), "tool", a.GetTool(), "by", a.GetDecidedBy())
	return a, nil
}
