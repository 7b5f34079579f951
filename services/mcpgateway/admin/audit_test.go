package admin

import (
	"context"
	"fmt"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/audit"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// exportStream collects what ExportAudit sends.
type exportStream struct {
	grpc.ServerStreamingServer[mcpgatewayv1.ExportAuditResponse]
	ctx  context.Context
	sent []*mcpgatewayv1.ExportAuditResponse
}

func (s *exportStream) Context() context.Context { return s.ctx }
func (s *exportStream) Send(m *mcpgatewayv1.ExportAuditResponse) error {
	s.sent = append(s.sent, m)
	return nil
}

// TestAuditListAndExport on a bbolt registry of 250 entries: the list pages with
// next_before; the export sends them all, oldest first, exportBatch a message; bad filters
// and limits are InvalidArgument; with the trail off both are FailedPrecondition.
func TestAuditListAndExport(t *testing.T) {
	reg, err := registry.Open(t.TempDir() + "/registry.db")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	at := time.Now().Add(-time.Minute)
	var entries []*mcpgatewayv1.AuditEntry
	for i := range 250 {
		entries = append(entries, &mcpgatewayv1.AuditEntry{Time: at.Add(time.Duration(i) * time.Millisecond).UTC().Format(time.RFC3339Nano), Kind: audit.KindTool, Tool: fmt.Sprint(i)})
	}
	for i := 0; i < len(entries); i += 100 {
		if err := reg.AppendAudit(t.Context(), entries[i:min(i+100, len(entries))]); err != nil {
			t.Fatal(err)
		}
	}
	trail := audit.New(reg, audit.Config{})
	defer trail.Close(t.Context())
	s := newService(t, WithAudit(trail))

	r, err := s.ListAudit(t.Context(), &mcpgatewayv1.ListAuditRequest{Limit: 100})
	if err != nil || len(r.GetEntries()) != 100 || r.GetEntries()[0].GetTool() != "249" || r.GetNextBefore() != r.GetEntries()[99].GetId() {
		t.Fatalf("first page: %d entries, next %q, %v", len(r.GetEntries()), r.GetNextBefore(), err)
	}
	r, err = s.ListAudit(t.Context(), &mcpgatewayv1.ListAuditRequest{Limit: 200, Before: r.GetNextBefore()})
	if err != nil || len(r.GetEntries()) != 150 || r.GetEntries()[149].GetTool() != "0" || r.GetNextBefore() != "" {
		t.Fatalf("last page: %d entries, next %q, %v", len(r.GetEntries()), r.GetNextBefore(), err)
	}

	st := &exportStream{ctx: t.Context()}
	if err := s.ExportAudit(&mcpgatewayv1.ExportAuditRequest{}, st); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range st.sent {
		for _, e := range m.GetEntries() {
			if e.GetTool() != fmt.Sprint(n) {
				t.Fatalf("export entry %d is %s", n, e.GetTool())
			}
			n++
		}
	}
	if n != 250 || len(st.sent) != 3 {
		t.Fatalf("export: %d entries in %d messages, want 250 in 3", n, len(st.sent))
	}

	for _, req := range []*mcpgatewayv1.ListAuditRequest{{Limit: 1001}, {Kind: "x"}, {After: "soon"}} {
		if _, err := s.ListAudit(t.Context(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v", req, err)
		}
	}
	if err := s.ExportAudit(&mcpgatewayv1.ExportAuditRequest{Before: "x"}, st); status.Code(err) != codes.InvalidArgument {
		t.Errorf("export before=x: %v", err)
	}
	s = newService(t) // the trail off
	if _, err := s.ListAudit(t.Context(), &mcpgatewayv1.ListAuditRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("off: %v", err)
	}
	if err := s.ExportAudit(&mcpgatewayv1.ExportAuditRequest{}, st); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("export off: %v", err)
	}
}
