package serverconfig

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/adminjson"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

func TestParseApproval(t *testing.T) {
	valid := []struct {
		name, body, approval string
		tools                []string
	}{
		{"absent", `{"id":"e","command":"node"}`, "", nil},
		{"required", `{"id":"e","command":"node","approval":"required"}`, ApprovalRequired, nil},
		{"required in capitals", `{"id":"e","command":"node","approval":" Required "}`, ApprovalRequired, nil},
		{"none is stored as absent", `{"id":"e","command":"node","approval":"none","approval_tools":["delete_*"]}`, "", []string{"delete_*"}},
		{"camelCase alias", `{"id":"e","command":"node","approvalTools":["write_file","rm?"]}`, "", []string{"write_file", "rm?"}},
		{"on a streamable-http server", `{"id":"h","transport":"http","url":"https://h/mcp","approval":"required"}`, ApprovalRequired, nil},
	}
	for _, tc := range valid {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parse(tc.body, nil)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.GetApproval() != tc.approval || !slices.Equal(cfg.GetApprovalTools(), tc.tools) {
				t.Fatalf("approval %q tools %q, want %q %q", cfg.GetApproval(), cfg.GetApprovalTools(), tc.approval, tc.tools)
			}
		})
	}
	invalid := []struct{ name, body, msg string }{
		{"unknown value", `{"id":"e","command":"node","approval":"always"}`, `approval "always": use "required" (every tool of the server waits for a person's approval) or "none"`},
		{"not a string", `{"id":"e","command":"node","approval":true}`, "approval must be a string, not a boolean"},
		{"bad glob", `{"id":"e","command":"node","approval_tools":["[a"]}`, `approval_tools[0] "[a" is not a valid glob pattern`},
		{"empty glob", `{"id":"e","command":"node","approval_tools":[""]}`, `approval_tools[0] is empty`},
		{"65 globs", `{"id":"e","command":"node","approval_tools":` + patterns(65) + `}`, "approval_tools holds 65 patterns; at most 64 are allowed"},
		{"129 characters", `{"id":"e","command":"node","approval_tools":["` + strings.Repeat("a", 129) + `"]}`, "approval_tools[0] is 129 characters long; a pattern has at most 128"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parse(tc.body, nil)
			if (!errors.Is(err, ErrInvalid) && !errors.Is(err, adminjson.ErrServer)) || err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want one containing %q", err, tc.msg)
			}
			if cfg != nil {
				t.Fatalf("config %v with an error", cfg)
			}
		})
	}
}

func TestNeedsApproval(t *testing.T) {
	for _, tc := range []struct {
		cfg  *mcpgatewayv1.ServerConfig
		tool string
		want bool
	}{
		{&mcpgatewayv1.ServerConfig{}, "echo", false},
		{&mcpgatewayv1.ServerConfig{Approval: proto.String(ApprovalRequired)}, "echo", true},
		{&mcpgatewayv1.ServerConfig{ApprovalTools: []string{"delete_*", "rm"}}, "delete_file", true},
		{&mcpgatewayv1.ServerConfig{ApprovalTools: []string{"delete_*", "rm"}}, "rm", true},
		{&mcpgatewayv1.ServerConfig{ApprovalTools: []string{"delete_*", "rm"}}, "read_file", false},
		{nil, "echo", false},
	} {
		if got := NeedsApproval(tc.cfg, tc.tool); got != tc.want {
			t.Errorf("NeedsApproval(%v, %q) = %v, want %v", tc.cfg, tc.tool, got, tc.want)
		}
	}
}
