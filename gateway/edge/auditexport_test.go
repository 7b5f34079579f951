package edge

import (
	"encoding/json"
	"strings"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ExportAudit of the fake: two batches, then the error the request's who names ("late":
// after them; "early": before any).
func (f *fakeAdmin) ExportAudit(req *mcpgatewayv1.ExportAuditRequest, s grpc.ServerStreamingServer[mcpgatewayv1.ExportAuditResponse]) error {
	f.record(s.Context())
	if req.GetWho() == "early" {
		return status.Error(codes.InvalidArgument, "before \"x\": want an entry id")
	}
	for i, ids := range [][]string{{"a", "b"}, {"c"}} {
		batch := &mcpgatewayv1.ExportAuditResponse{}
		for _, id := range ids {
			batch.Entries = append(batch.Entries, &mcpgatewayv1.AuditEntry{Id: id, Kind: req.GetKind(), ServerId: req.GetServer(), Changed: []string{"x"}, DurationMs: int32(i)})
		}
		if err := s.Send(batch); err != nil {
			return err
		}
	}
	if req.GetWho() == "late" {
		return status.Error(codes.Unavailable, "registry gone")
	}
	return nil
}

// TestAuditExportIsJSONLines: every entry of every batch is one JSON line, in order, with the
// filters passed on and the caller's key forwarded; an error before the first line is the
// admin error answer, one after it a last {"error":…} line; only GET, only the admin key.
func TestAuditExportIsJSONLines(t *testing.T) {
	te := startEdge(t, nil)
	auth := []string{"Authorization", "Bearer " + adminKey}
	a := do(t, "GET", te.url+"/internal/mcp/audit/export?kind=tool&server=fs&after=1&before=2", "", auth...)
	if a.status != 200 || a.header.Get("Content-Type") != "application/x-ndjson" || !strings.HasPrefix(a.header.Get("Content-Disposition"), `attachment; filename="zest-audit-`) {
		t.Fatalf("export: %d %v %q", a.status, a.header, a.body)
	}
	lines := strings.Split(strings.TrimSuffix(a.body, "\n"), "\n")
	var ids []string
	for _, l := range lines {
		var e struct {
			ID, Kind string
			Server   string `json:"server_id"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Kind != "tool" || e.Server != "fs" {
			t.Fatalf("line %q: %v", l, err)
		}
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "a,b,c" || !strings.HasSuffix(a.body, "}\n") {
		t.Fatalf("lines %q", a.body)
	}
	if calls := te.admin.calls(); len(calls) == 0 || strings.Join(calls[len(calls)-1].Get("authorization"), "") != "Bearer "+adminKey {
		t.Fatalf("the key was not forwarded: %v", calls)
	}

	early := do(t, "GET", te.url+"/internal/mcp/audit/export?who=early", "", auth...)
	if early.status != 400 || shape(t, early) != "admin" {
		t.Fatalf("an error before the first line: %d %s", early.status, early.body)
	}
	late := do(t, "GET", te.url+"/internal/mcp/audit/export?who=late", "", auth...)
	lines = strings.Split(strings.TrimSuffix(late.body, "\n"), "\n")
	if late.status != 200 || len(lines) != 4 || lines[3] != `{"error":{"message":"registry gone","type":"mcp_client_error"}}` {
		t.Fatalf("an error after the first line: %d %q", late.status, late.body)
	}
	if a := do(t, "POST", te.url+"/internal/mcp/audit/export", "", auth...); a.status != 405 || shape(t, a) != "admin" {
		t.Fatalf("POST: %d %s", a.status, a.body)
	}
	if a := do(t, "GET", te.url+"/internal/mcp/audit/export", ""); a.status != 401 {
		t.Fatalf("no key: %d %s", a.status, a.body)
	}
}
