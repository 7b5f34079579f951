package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// promptsOnly serves an mcp-go server that declares prompts and no tools: it answers
// tools/list with an error. modern false makes it refuse the server/discover probe (HTTP
// 400, as a session-era server does), so the manager initializes a session; it counts the
// tools/list requests it gets.
func promptsOnly(t *testing.T, modern bool) (string, *int) {
	t.Helper()
	srv := server.NewMCPServer("prompts-only", "1.0.0", server.WithPromptCapabilities(false))
	srv.AddPrompt(mcp.NewPrompt("greet"), func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return mcp.NewGetPromptResult("hello", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("hello"))}), nil
	})
	h := server.NewStreamableHTTPServer(srv)
	asked := new(int)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !modern && mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			http.Error(w, "no such protocol version", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/list"`)) {
			*asked++
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, asked
}

// TestServerWithoutTools: a server that declares no tools capability (prompts only) connects,
// in either era: it has no tools, is never asked for them, and its prompts are served; the
// admin API's test of it passes too.
func TestServerWithoutTools(t *testing.T) {
	for _, modern := range []bool{true, false} {
		name := map[bool]string{true: "2026-07-28", false: "session era"}[modern]
		t.Run(name, func(t *testing.T) {
			url, asked := promptsOnly(t, modern)
			m := New(nil, nil, nil)
			t.Cleanup(func() { m.Close(context.Background()) })
			cfg := httpConfig("prompts", url)
			if err := m.Connect(t.Context(), cfg); err != nil {
				t.Fatalf("connect: %v", err)
			}
			inf, err := m.Info(t.Context(), cfg)
			if err != nil || inf.Capabilities["prompts"] == nil || inf.Capabilities["tools"] != nil {
				t.Fatalf("info %+v %v", inf, err)
			}
			if got := inf.ProtocolVersion == ModernVersion; got != modern {
				t.Fatalf("protocol %s, want modern %v", inf.ProtocolVersion, modern)
			}
			tools, err := m.ListTools(t.Context(), cfg, true)
			if err != nil || tools == nil || len(tools) != 0 {
				t.Fatalf("tools %v %v: want an empty list", tools, err)
			}
			if listed, _, ok := m.Listed("prompts"); !ok || len(listed) != 0 {
				t.Fatalf("listed %v %v", listed, ok)
			}
			res, err := m.Call(t.Context(), cfg, "prompts/list", json.RawMessage(`{}`), 0)
			if err != nil || !strings.Contains(string(res), `"greet"`) {
				t.Fatalf("prompts/list: %s %v", res, err)
			}
			inf, tools, err = m.Test(t.Context(), httpConfig("probe", url))
			if err != nil || len(tools) != 0 || inf.Capabilities["prompts"] == nil {
				t.Fatalf("test: %+v %v %v", inf, tools, err)
			}
			if *asked != 0 {
				t.Errorf("the server was asked tools/list %d times: it declares no tools", *asked)
			}
		})
	}
}
