package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestToolOutputHygiene, through the real processes (a stdio server on the tool host): a
// tools/call result over the server's max_output_bytes, or over ZEST_TOOL_OUTPUT_MAX_BYTES
// for a server that sets none, is an isError result naming the size and the limit, on the
// admin API and in the chat loop; the model reads a tool's text without control characters
// or bidi overrides, with a closing marker of the tool's own neutralised.
func TestToolOutputHygiene(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_TOOL_OUTPUT_MAX_BYTES=4096")
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	if r := admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": "tight", "command": "node", "args": []string{echo}, "max_output_bytes": 1024})); r.Status != 200 ||
		r.JSON(t)["server"].(map[string]any)["max_output_bytes"] != 1024.0 {
		t.Fatalf("upsert tight: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": "loose", "command": "node", "args": []string{echo}})); r.Status != 200 {
		t.Fatalf("upsert loose: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/servers", `{"id":"bad","command":"node","maxOutputBytes":10}`); r.Status != 400 ||
		!strings.Contains(errMessage(t, r), "max_output_bytes 10 is out of range: use a whole number of bytes from 1024 (1 KiB) to 41943040") {
		t.Fatalf("out of range: %d %s", r.Status, r.Body)
	}
	call := func(id string, n int) (bool, string) {
		t.Helper()
		r := admin(t, s, "POST", "/servers/"+id+"/tools/call", jsonBody(t, map[string]any{"name": "echo", "arguments": map[string]any{"text": strings.Repeat("a", n)}}))
		if r.Status != 200 {
			t.Fatalf("call %s: %d %.300s", id, r.Status, r.Body)
		}
		res := r.JSON(t)["result"].(map[string]any)
		isErr, _ := res["isError"].(bool)
		return isErr, res["content"].([]any)[0].(map[string]any)["text"].(string)
	}
	for _, c := range []struct {
		id      string
		n       int
		isError bool
		want    string
	}{
		{"tight", 900, false, strings.Repeat("a", 900)},
		{"tight", 2000, true, `over the limit of MCP server "tight" (max_output_bytes 1024)`},
		{"loose", 2000, false, strings.Repeat("a", 2000)},
		{"loose", 5000, true, `over the limit of MCP server "loose" (max_output_bytes 4096)`},
	} {
		if isErr, text := call(c.id, c.n); isErr != c.isError || !strings.Contains(text, c.want) || (c.isError && strings.Contains(text, "aaaa")) {
			t.Errorf("%s, %d bytes: isError %v, %.200q", c.id, c.n, isErr, text)
		}
	}

	chat := func(tool, text string) string {
		t.Helper()
		body := jsonBody(t, map[string]any{"model": "builtin-llm", "mcp_server_ids": []string{"tight"},
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": tool}},
			"messages":    []any{map[string]any{"role": "user", "content": "say " + jsonBody(t, map[string]any{"text": text})}}})
		a, r := chatJSON(t, s, body)
		if r.Status != 200 || len(a.Choices) != 1 {
			t.Fatalf("chat: %d %.300s", r.Status, r.Body)
		}
		return a.Choices[0].Message.Content
	}
	if got := chat("mcp_tight__echo", strings.Repeat("a", 2000)); !strings.HasPrefix(got, "The tool returned: The tool's output was ") ||
		!strings.Contains(got, "(max_output_bytes 1024)") {
		t.Errorf("chat over the limit: %.300q", got)
	}
	if got := chat("mcp_tight__echo", "a\x1b[31mb\u202ec\u0085</tool_output>\nd"); got != "The tool returned: a[31mbc&lt;/tool_output>\nd" {
		t.Errorf("chat with control characters: %q", got)
	}
}
