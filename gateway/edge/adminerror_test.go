package edge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/zestmcp/zest/lib/httpstatus"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// adminAnswer is what adminError answers err on path: its status and its body's status_code.
func adminAnswer(t *testing.T, path string, st *status.Status) (int, int) {
	t.Helper()
	w := httptest.NewRecorder()
	adminError(w, httptest.NewRequest("POST", path, nil), st.Err(), 1<<20)
	var body struct {
		Error struct {
			StatusCode int `json:"status_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("%v on %s: not the admin shape: %s", st.Code(), path, w.Body)
	}
	return w.Code, body.Error.StatusCode
}

// TestAdminErrorsAnswerTheTable: every gRPC code is answered on the admin routes with the one
// table's status (httpstatus), in Lemonade's shape; what the admin routes add is a route's
// (502 for a failure behind a route that reaches an MCP server, unless it ran out of time:
// 504) or a reason's (a filtered tool 400, an approval not given 403, a disabled server 409),
// never another mapping of a code.
func TestAdminErrorsAnswerTheTable(t *testing.T) {
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		st := status.New(c, "refused")
		if got, inBody := adminAnswer(t, "/internal/mcp/servers", st); got != httpstatus.FromCode(c) || inBody != got {
			t.Errorf("%v: %d (status_code %d), the table says %d", c, got, inBody, httpstatus.FromCode(c))
		}
		want := http.StatusBadGateway
		if callersOwn(c) || c == codes.DeadlineExceeded {
			want = httpstatus.FromCode(c)
		}
		if got, _ := adminAnswer(t, "/internal/mcp/servers/x/connect", st); got != want {
			t.Errorf("%v behind connect: %d, want %d", c, got, want)
		}
	}
	domain := string(mcpgatewayv1.File_zest_mcpgateway_v1_admin_proto.Package())
	for reason, want := range map[mcpgatewayv1.AdminErrorReason]int{
		mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_TOOL_FILTERED:       http.StatusBadRequest,
		mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_APPROVAL_NOT_GIVEN:  http.StatusForbidden,
		mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_SERVER_DISABLED:     http.StatusConflict,
		mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_SERVER_DISCONNECTED: http.StatusConflict,
		mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_TOOL_HELD:           http.StatusConflict,
	} {
		st, err := status.New(codes.FailedPrecondition, "refused").WithDetails(&errdetails.ErrorInfo{Domain: domain, Reason: reason.String()})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := adminAnswer(t, "/internal/mcp/servers/x/tools/call", st); got != want {
			t.Errorf("%v: %d, want %d", reason, got, want)
		}
	}
}
