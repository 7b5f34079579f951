package toolchat

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/keyauth"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
)

func TestCutUTF8NeverSplitsACharacter(t *testing.T) {
	s := "x" + strings.Repeat("é", 100) + "€𝄞"
	for n := 0; n <= len(s)+1; n++ {
		got := CutUTF8(s, n)
		if len(got) > n || !utf8.ValidString(got) || !strings.HasPrefix(s, got) || (n >= len(s) && got != s) {
			t.Fatalf("CutUTF8(%d) = %q", n, got)
		}
		if n < len(s) && len(got) < n-3 { // cuts back at most one character
			t.Fatalf("CutUTF8(%d) cut %d bytes", n, n-len(got))
		}
	}
}

// TestAPanickingToolFailsAlone: a built-in tool that panics gives an isError result with an
// incident id, and the process lives on.
func TestAPanickingToolFailsAlone(t *testing.T) {
	srv := server.NewMCPServer("test", "1")
	srv.AddTool(mcp.NewTool("boom"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		panic("boom")
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := &Loop{builtin: srv, log: log, pipeline: toolcall.New(toolcall.Config{}, nil, nil, keyauth.Keys{}, toolcall.WithBuiltin(mcpserve.NewBuiltin(srv)), toolcall.WithLogger(log))}
	call := &inferencev1.ToolCall{Id: "c1", Function: &inferencev1.FunctionCall{Name: "boom", Arguments: "{}"}}
	r := l.safeCall(t.Context(), &tool{chatName: "boom", name: "boom"}, call, &mcpgatewayv1.ToolCallRecord{}, nil, false, "")
	if !r.isErr || !strings.Contains(r.text, "incident ") {
		t.Fatalf("%+v", r)
	}
}
