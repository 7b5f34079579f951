package e2e

import (
	"strings"
	"testing"
)

// TestChatShapedTools: issue 25's acceptance through the chat loop with the built-in engine —
// a chat of a preset that renames server-everything's get-sum to "add" and fixes its a runs
// "add" as get-sum with the arguments merged, and names the call "add"; the old name is not
// offered; a fixed argument the model sends with another value comes back to it as an error,
// not a call. Before, "add" was not offered (400 tool_choice).
func TestChatShapedTools(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	putShapedPreset(t, s)
	for _, c := range []struct{ content, want string }{
		{`add {}`, "42"},
		{`add {\"b\":5}`, "45"},
	} {
		a, r := chatJSON(t, s, `{"preset":"shaped","tool_choice":{"type":"function","function":{"name":"add"}},"messages":[{"role":"user","content":"`+c.content+`"}]}`)
		if r.Status != 200 || !strings.Contains(a.Choices[0].Message.Content, c.want) || len(a.ZestToolCalls) != 1 || a.ZestToolCalls[0].Name != "add" || a.ZestToolCalls[0].ServerID != "everything" {
			t.Fatalf("%s: %d %s", c.content, r.Status, r.Body)
		}
	}
	a, r := chatJSON(t, s, `{"preset":"shaped","tool_choice":{"type":"function","function":{"name":"add"}},"messages":[{"role":"user","content":"add {\"a\":1,\"b\":1}"}]}`)
	if r.Status != 200 || !a.ZestToolCalls[0].IsError || !strings.Contains(a.Choices[0].Message.Content, `argument \"a\" of tool \"add\" is set by this preset`) && !strings.Contains(a.Choices[0].Message.Content, `argument "a" of tool "add" is set by this preset`) {
		t.Fatalf("a fixed argument sent: %d %s", r.Status, r.Body)
	}
	_, r = chatJSON(t, s, `{"preset":"shaped","tool_choice":{"type":"function","function":{"name":"mcp_everything__get-sum"}},"messages":[{"role":"user","content":"add {}"}]}`)
	wantError(t, r, 400, "tool_choice", `tool_choice names function "mcp_everything__get-sum", which this chat does not offer`)
}
