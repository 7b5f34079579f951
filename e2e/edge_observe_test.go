package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// TestRequestIDFollowsAnAdminCallThatFails: the client's X-Request-Id comes back on the error
// answer, on the edge's access line (with the route's pattern, not the id in the path), and on
// mcpgateway's line for the call that failed; an id the edge makes when the client sends none
// travels the same way.
func TestRequestIDFollowsAnAdminCallThatFails(t *testing.T) {
	s := startSuite(t, "ZEST_LOG_LEVEL=info", "LEMONADE_ADMIN_API_KEY="+adminKey)
	r := do(t, "DELETE", s.URL+"/internal/mcp/servers/no-such-server", "", adminAuth, "X-Request-Id: e2e-req.7f3a")
	if r.Status != http.StatusNotFound || r.Header.Get("X-Request-Id") != "e2e-req.7f3a" {
		t.Fatalf("DELETE: %d %v %s", r.Status, r.Header, r.Body)
	}
	r2 := do(t, "POST", s.URL+"/internal/mcp/servers/also-missing/disconnect", "", adminAuth)
	made := r2.Header.Get("X-Request-Id")
	if r2.Status != http.StatusNotFound || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(made) {
		t.Fatalf("disconnect: %d %q %s", r2.Status, made, r2.Body)
	}
	for id, serverID := range map[string]string{"e2e-req.7f3a": "no-such-server", made: "also-missing"} {
		waitfor.NoError(t, 10*time.Second, func() error {
			edge := logLine(s.Logs("zest-gateway"), `msg="http request"`, "request_id="+id)
			if edge == "" {
				return fmt.Errorf("no access line for %s in the edge's log:\n%s", id, s.Logs("zest-gateway"))
			}
			if !strings.Contains(edge, "status=404") || !strings.Contains(edge, "route=/internal/mcp/servers/{id}") || strings.Contains(edge, serverID) {
				return fmt.Errorf("access line: %s", edge)
			}
			if logLine(s.Logs("zest-mcpgateway"), `msg="rpc failed"`, "code=NotFound", "request_id="+id) == "" {
				return fmt.Errorf("no failed-call line for %s in mcpgateway's log:\n%s", id, s.Logs("zest-mcpgateway"))
			}
			return nil
		})
	}
	if strings.Contains(s.Logs("zest-gateway"), adminKey) || strings.Contains(s.Logs("zest-mcpgateway"), adminKey) {
		t.Fatal("a log holds the admin key")
	}
}
