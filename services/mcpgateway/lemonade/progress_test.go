package lemonade

import (
	"fmt"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// noteSession is an MCP session that keeps the notifications sent to it.
type noteSession struct{ ch chan mcp.JSONRPCNotification }

func (s *noteSession) Initialize()                                         {}
func (s *noteSession) Initialized() bool                                   { return true }
func (s *noteSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.ch }
func (s *noteSession) SessionID() string                                   { return "progress-test" }

// progressOf is the progress values of the notifications sent, in order.
func (s *noteSession) progressOf(t *testing.T) []string {
	t.Helper()
	var out []string
	for {
		select {
		case n := <-s.ch:
			if n.Method == "notifications/progress" {
				p := n.Params.AdditionalFields
				if p["progressToken"] != "tok" {
					t.Errorf("progress without the caller's token: %v", p)
				}
				out = append(out, fmt.Sprintf("%v/%v", p["progress"], p["total"]))
			}
		default:
			return out
		}
	}
}

// TestChatProgressEveryChatProgressChunks: with a progress token, lemonade_chat reports when it
// starts, every ChatProgressChunks chunks, and when it is answered (total known then); without
// one it sends nothing.
func TestChatProgressEveryChatProgressChunks(t *testing.T) {
	a := &answering{models: models{list: []*inferencev1.Model{model("chat", llm, loaded)}}}
	tools := New(a, nil, Dirs{})
	srv := server.NewMCPServer("progress-test", "0")
	sess := &noteSession{ch: make(chan mcp.JSONRPCNotification, 64)}
	ctx := srv.WithContext(t.Context(), sess)

	n := 2*ChatProgressChunks + 6
	reply := func() []*inferencev1.ChatResponse {
		var r []*inferencev1.ChatResponse
		for range n {
			r = append(r, delta("w ", ""))
		}
		return r
	}
	tools.Register(srv)
	call := func(meta string) {
		t.Helper()
		a.reply = reply()
		resp := srv.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lemonade_chat",`+meta+
			`"arguments":{"messages":[{"role":"user","content":"x"}]}}}`))
		if r, ok := resp.(mcp.JSONRPCResponse); !ok || callToolResultOf(r).IsError {
			t.Fatalf("chat: %+v", resp)
		}
	}
	call("")
	if got := sess.progressOf(t); len(got) != 0 {
		t.Fatalf("progress without a token: %v", got)
	}
	call(`"_meta":{"progressToken":"tok"},`)
	want := []string{"0/<nil>", fmt.Sprintf("%d/<nil>", ChatProgressChunks), fmt.Sprintf("%d/<nil>", 2*ChatProgressChunks), fmt.Sprintf("%d/%d", n, n)}
	if got := sess.progressOf(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("progress %v, want %v", got, want)
	}
}

func callToolResultOf(r mcp.JSONRPCResponse) *mcp.CallToolResult {
	switch v := r.Result.(type) {
	case *mcp.CallToolResult:
		return v
	case mcp.CallToolResult:
		return &v
	}
	return &mcp.CallToolResult{IsError: true}
}
