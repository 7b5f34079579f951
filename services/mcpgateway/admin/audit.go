package admin

import (
	"context"
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
	if s.audit == nil {
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
	dropped, failed := s.audit.Stats()
	out := &mcpgatewayv1.ListAuditResponse{Entries: make([]*mcpgatewayv1.AuditEntry, 0, min(limit, 64)), Details: s.audit.Details(),
		Retention: s.audit.Retention().String(), MaxEntries: int32(s.audit.MaxEntries()), MaxAdminEntries: int32(s.audit.MaxAdminEntries()),
		Dropped: dropped, Failed: failed}
	more := false
	q.Limit = limit + 1
	err = s.audit.Store().ListAudit(ctx, q, func(e *mcpgatewayv1.AuditEntry) bool {
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
	if s.audit == nil {
		return status.Error(codes.FailedPrecondition, audit.ErrOff.Error())
	}
	q, err := audit.Filters{After: req.GetAfter(), Before: req.GetBefore(), Kind: req.GetKind(), Server: req.GetServer(), Who: req.GetWho()}.Query()
	if err != nil {
		return toStatus(fmt.Errorf("%w: %v", errBadRequest, err))
	}
	// A page at a time, each read on its own and sent after it: a slow reader holds no read
	// transaction open (bbolt's writer waits for open readers when its file grows).
	q.Ascending, q.Limit = true, exportBatch
	ctx := stream.Context()
	for {
		batch := make([]*mcpgatewayv1.AuditEntry, 0, exportBatch)
		err := s.audit.Store().ListAudit(ctx, q, func(e *mcpgatewayv1.AuditEntry) bool {
			batch = append(batch, e)
			return len(batch) < exportBatch
		})
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return toStatus(err)
		}
		if len(batch) == 0 {
			return nil
		}
		if err := stream.Send(&mcpgatewayv1.ExportAuditResponse{Entries: batch}); err != nil {
			return err
		}
		if len(batch) < exportBatch {
			return nil
		}
		q.After = batch[len(batch)-1].GetId()
	}
}
