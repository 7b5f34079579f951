package admin

import (
	"context"
	"fmt"
	"regexp"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/audit"
)

// Bounds of RecordEdgeChange: an edge's address, and a few setting names.
const (
	maxEdgeName     = 256
	maxEdgeSettings = 16
)

// settingName is the form of a setting's name as /internal/config writes it.
var settingName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// RecordEdgeChange records an edge's settings change in the audit trail: the audit
// interceptor writes the entry (action set_edge_settings, the edge as its target, who from the
// caller's key); this checks the request and names the settings changed.
func (s *Service) RecordEdgeChange(ctx context.Context, req *mcpgatewayv1.RecordEdgeChangeRequest) (*mcpgatewayv1.RecordEdgeChangeResponse, error) {
	if n := len(req.GetEdge()); n == 0 || n > maxEdgeName {
		return nil, toStatus(fmt.Errorf("%w: edge must name the edge (its listen address), 1 to %d bytes", errBadRequest, maxEdgeName))
	}
	if n := len(req.GetSettings()); n == 0 || n > maxEdgeSettings {
		return nil, toStatus(fmt.Errorf("%w: settings must name 1 to %d settings, not %d", errBadRequest, maxEdgeSettings, n))
	}
	for i, name := range req.GetSettings() {
		if !settingName.MatchString(name) {
			return nil, toStatus(fmt.Errorf("%w: settings[%d] %.70q is not a setting's name (as /internal/config names it: lower case, digits, _)", errBadRequest, i, name))
		}
	}
	audit.NoteChanged(ctx, req.GetSettings())
	return &mcpgatewayv1.RecordEdgeChangeResponse{}, nil
}
