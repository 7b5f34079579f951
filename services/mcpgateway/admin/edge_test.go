package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/audit"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRecordEdgeChange: through the audit interceptor, an edge's settings change is one admin
// entry (set_edge_settings, the edge as target, the settings as changed); a request that names
// no edge or a setting that is no name is InvalidArgument and records nothing.
func TestRecordEdgeChange(t *testing.T) {
	reg, err := registry.Open(t.TempDir() + "/registry.db")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	trail := audit.New(reg, audit.Config{FlushEvery: time.Millisecond})
	s := newService(t, WithAudit(trail))
	intercept := trail.UnaryInterceptor()
	call := func(req *mcpgatewayv1.RecordEdgeChangeRequest) error {
		_, err := intercept(t.Context(), req, &grpc.UnaryServerInfo{FullMethod: mcpgatewayv1.AdminService_RecordEdgeChange_FullMethodName},
			func(ctx context.Context, req any) (any, error) {
				return s.RecordEdgeChange(ctx, req.(*mcpgatewayv1.RecordEdgeChangeRequest))
			})
		return err
	}
	if err := call(&mcpgatewayv1.RecordEdgeChangeRequest{Edge: "127.0.0.1:13305", Settings: []string{"log_level"}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []*mcpgatewayv1.RecordEdgeChangeRequest{
		{Settings: []string{"log_level"}},
		{Edge: "127.0.0.1:13305"},
		{Edge: "127.0.0.1:13305", Settings: []string{"Log Level"}},
		{Edge: strings.Repeat("e", maxEdgeName+1), Settings: []string{"log_level"}},
	} {
		if err := call(bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v; want InvalidArgument", bad, err)
		}
	}
	if err := trail.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []*mcpgatewayv1.AuditEntry
	if err := reg.ListAudit(t.Context(), registry.AuditQuery{Limit: 10}, func(e *mcpgatewayv1.AuditEntry) bool {
		got = append(got, e)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, e := range got {
		if e.GetOutcome() == "ok" {
			ok++
			if e.GetKind() != audit.KindAdmin || e.GetAction() != "set_edge_settings" || e.GetTarget() != "127.0.0.1:13305" ||
				strings.Join(e.GetChanged(), ",") != "log_level" {
				t.Errorf("the entry: %v", e)
			}
		}
	}
	if ok != 1 {
		t.Fatalf("%d entries recorded a change; want 1: %v", ok, got)
	}
}
