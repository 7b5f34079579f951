package admin

import (
	"context"
	"errors"
	"fmt"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/audit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// exportBatch is how many entries one ExportAudit message carries.
const exportBatch = 100

// ListAudit lists a page of the audit trail, newest first (the admin key guards every
// AdminService call: the trail is for administrators only).
func (s *Service) ListAudit(ctx context.Context, req *mcpgatewayv1.ListAuditRequest) (*mcpgatewayv1.ListAuditResponse, error) {
	if s.Audit == nil {
		return nil, status.Error(codes.FailedPrecondition, audit.ErrOff.Error())
	}
	limit, err := audit.Limit(req.GetLimit())
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: %v", errBadRequest, err))
	}
	q, err := audit.Filters{After: req.GetAfter(), Before: req.GetBefore(), Kind: req.GetKind(), Server: req.GetServer(), Who: req.GetWho()}.Query()
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: %v", errBadRequest, err))
	}
	dropped, failed := s.Audit.Stats()
	out := &mcpgatewayv1.ListAuditResponse{Entries: make([]*mcpgatewayv1.AuditEntry, 0, min(limit, 64)), Details: s.Audit.Details(),
		Retention: s.Audit.Retention().String(), MaxEntries: int32(s.Audit.MaxEntries()), Dropped: dropped, Failed: failed}
	more := false
	err = s.Audit.Store().ListAudit(ctx, q, func(e *mcpgatewayv1.AuditEntry) bool {
		if len(out.Entries) == limit {
			more = true
			return false
		}
		out.Entries = append(out.Entries, e)
		return true
	})
	if err != nil {
		return nil, toStatus(err)
	}
	if more {
		out.NextBefore = out.Entries[len(out.Entries)-1].GetId()
	}
	return out, nil
}

// ExportAudit streams every entry the filters select, oldest first, exportBatch a message.
func (s *Service) ExportAudit(req *mcpgatewayv1.ExportAuditRequest, stream grpc.ServerStreamingServer[mcpgatewayv1.ExportAuditResponse]) error {
	if s.Audit == nil {
		return status.Error(codes.FailedPrecondition, audit.ErrOff.Error())
	}
	q, err := audit.Filters{After: req.GetAfter(), Before: req.GetBefore(), Kind: req.GetKind(), Server: req.GetServer(), Who: req.GetWho()}.Query()
	if err != nil {
		return toStatus(fmt.Errorf("%w: %v", errBadRequest, err))
	}
	q.Ascending = true
	ctx := stream.Context()
	batch := make([]*mcpgatewayv1.AuditEntry, 0, exportBatch)
	var sendErr error
	send := func() bool {
		if len(batch) == 0 {
			return true
		}
		sendErr = stream.Send(&mcpgatewayv1.ExportAuditResponse{Entries: batch})
		batch = batch[:0]
		return sendErr == nil
	}
	// The store's read runs a page at a time (etcd) or in one read transaction (bbolt): a
	// slow reader holds bbolt's transaction open, which delays no writer (bbolt's readers do
	// not block its writer) but keeps its pages until the export ends.
	err = s.Audit.Store().ListAudit(ctx, q, func(e *mcpgatewayv1.AuditEntry) bool {
		batch = append(batch, e)
		return len(batch) < exportBatch || send()
	})
	if err == nil && sendErr == nil {
		send()
	}
	if sendErr != nil {
		return sendErr
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return status.FromContextError(err).Err()
		}
		return toStatus(err)
	}
	return nil
}
