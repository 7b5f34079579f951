package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestChatWithMCPTools: the server-side tool loop with external and built-in providers.
func TestChatWithMCPTools(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	peers := peersDir(t)
	admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peers, "echo-server.mjs")}}))
	admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": "everything", "command": "node",
		"args": []string{filepath.Join(peers, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")}}))
	admin(t, s, "POST", "/servers", `{"id":"down","command":"/nonexistent/zest-down-server"}`)
	if r := admin(t, s, "POST", "/presets", `{"id":"helper","model":"builtin-llm","system_prompt":"Be brief.","mcp_server_ids":["echo","everything","lemonade"]}`); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}

	t.Run("echo through the tool host", func(t *testing.T) {
		a, r := chatJSON(t, s, `{"preset":"helper","tool_choice":{"type":"function","function":{"name":"mcp_echo__echo"}},
			"messages":[{"role":"user","content":"say {\"text\":\"hello-mcp\"}"}]}`)
		if r.Status != 200 || a.Choices[0].Message.Content != "The tool returned: hello-mcp" || len(a.ZestToolCalls) != 1 || a.ZestToolCalls[0].ServerID != "echo" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("server-everything get-sum", func(t *testing.T) {
		a, r := chatJSON(t, s, `{"model":"builtin-llm","mcp_server_ids":["everything"],"tool_choice":{"type":"function","function":{"name":"mcp_everything__get-sum"}},
			"messages":[{"role":"user","content":"add {\"a\":40,\"b\":2}"}]}`)
		if r.Status != 200 || !strings.Contains(a.Choices[0].Message.Content, "42") {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("a built-in tool", func(t *testing.T) {
		a, r := chatJSON(t, s, `{"preset":"helper","tool_choice":{"type":"function","function":{"name":"lemonade_list_models"}},"messages":[{"role":"user","content":"which models?"}]}`)
		if r.Status != 200 || !strings.Contains(a.Choices[0].Message.Content, "builtin-image") || a.ZestToolCalls[0].ServerID != "lemonade" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("a server that is down is left out, and the chat says so", func(t *testing.T) {
		body := `{"model":"builtin-llm","mcp_server_ids":["down","echo"],"tool_choice":{"type":"function","function":{"name":"mcp_echo__echo"}},
			"messages":[{"role":"user","content":"{\"text\":\"still works\"}"}]}`
		// An API user learns that the server was left out and an incident id, not what the
		// server's process said.
		a, r := chatJSON(t, s, body)
		if r.Status != 200 || a.Choices[0].Message.Content != "The tool returned: still works" || len(a.ZestWarnings) != 1 ||
			!strings.Contains(a.ZestWarnings[0], `"down" left out`) || !strings.Contains(a.ZestWarnings[0], "incident ") ||
			strings.Contains(a.ZestWarnings[0], "no such file or directory") || strings.Contains(a.ZestWarnings[0], "nonexistent") {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		// An administrator (the admin key is accepted on API routes) sees the cause.
		r = do(t, "POST", s.URL+"/api/v1/chat/completions", body, "Content-Type: application/json", "Authorization: Bearer "+adminKey)
		if r.Status != 200 || !strings.Contains(string(r.Body), "no such file or directory") {
			t.Fatalf("admin: %d %s", r.Status, r.Body)
		}
	})
	t.Run("four providers, not five", func(t *testing.T) {
		for _, id := range []string{"a", "b", "c", "d"} {
			admin(t, s, "POST", "/servers", `{"id":"`+id+`","command":"/nonexistent/zest-`+id+`"}`)
		}
		if r := admin(t, s, "POST", "/presets", `{"id":"four","mcp_server_ids":["a","b","c","lemonade"]}`); r.Status != 200 {
			t.Fatalf("four: %d %s", r.Status, r.Body)
		}
		r := admin(t, s, "POST", "/presets", `{"id":"five","mcp_server_ids":["a","b","c","d","lemonade"]}`)
		if r.Status != 400 || !strings.Contains(errMessage(t, r), "selects 5 providers; a preset selects at most 4") {
			t.Fatalf("five: %d %s", r.Status, r.Body)
		}
		_, r = chatJSON(t, s, `{"model":"builtin-llm","mcp_server_ids":["a","b","c","d","e"],"messages":[{"role":"user","content":"x"}]}`)
		if r.Status != 400 || !strings.Contains(string(r.Body), "at most 4") {
			t.Fatalf("five in a chat: %d %s", r.Status, r.Body)
		}
	})
	t.Run("a tool answering 60 KB of two-byte characters", func(t *testing.T) {
		// "x" first, so that the 16 KiB cut of "Echo: xéé…" falls inside an "é": it must not
		// split it, or the next model call cannot carry the conversation.
		msg := "x" + strings.Repeat("é", 30000)
		body := jsonBody(t, map[string]any{"model": "builtin-llm", "mcp_server_ids": []string{"everything"},
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "mcp_everything__echo"}},
			"messages":    []any{map[string]any{"role": "user", "content": jsonBody(t, map[string]any{"message": msg})}}})
		a, r := chatJSON(t, s, body)
		if r.Status != 200 || len(a.ZestToolCalls) != 1 || !strings.HasPrefix(a.Choices[0].Message.Content, "The tool returned: Echo: xéé") {
			t.Fatalf("%d %.300s", r.Status, r.Body)
		}
		if c := a.Choices[0].Message.Content; !strings.Contains(c, "Zest truncated this tool output") || strings.ContainsRune(c, utf8.RuneError) {
			t.Fatalf("the output was not cut whole: %.300s", r.Body)
		}
		// The streaming form carries the 512-byte preview, cut the same way.
		stream := do(t, "POST", s.URL+"/api/v1/chat/completions", strings.Replace(body, `"model"`, `"stream":true,"zest_events":true,"model"`, 1), "Content-Type: application/json")
		if stream.Status != 200 || !strings.Contains(string(stream.Body), "[DONE]") {
			t.Fatalf("stream: %d %.300s", stream.Status, stream.Body)
		}
		preview := ""
		for _, line := range strings.Split(string(stream.Body), "\n") {
			var ev struct {
				Event struct{ Type, Output string } `json:"zest_event"`
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil && ev.Event.Type == "tool_result" {
				preview = ev.Event.Output
			}
		}
		cut := strings.TrimSuffix(preview, "…")
		if !strings.HasPrefix(preview, "Echo: xéé") || cut == preview || len(cut) > 512 || !utf8.ValidString(preview) || strings.ContainsRune(preview, utf8.RuneError) {
			t.Fatalf("tool_result preview (%d bytes): %q", len(preview), preview)
		}
	})
	t.Run("mcp_server_ids narrow a preset, and cannot widen it", func(t *testing.T) {
		a, r := chatJSON(t, s, `{"preset":"helper","mcp_server_ids":["echo"],"tool_choice":{"type":"function","function":{"name":"mcp_echo__echo"}},
			"messages":[{"role":"user","content":"{\"text\":\"narrowed\"}"}]}`)
		if r.Status != 200 || a.Choices[0].Message.Content != "The tool returned: narrowed" {
			t.Fatalf("narrowed: %d %s", r.Status, r.Body)
		}
		// lemonade_list_models is not offered once the preset is narrowed to echo.
		_, r = chatJSON(t, s, `{"preset":"helper","mcp_server_ids":["echo"],"tool_choice":{"type":"function","function":{"name":"lemonade_list_models"}},
			"messages":[{"role":"user","content":"x"}]}`)
		wantError(t, r, 400, "tool_choice", `tool_choice names function "lemonade_list_models", which this chat does not offer: it offers mcp_echo__echo`)
		_, r = chatJSON(t, s, `{"preset":"helper","mcp_server_ids":["echo","a"],"messages":[{"role":"user","content":"x"}]}`)
		wantError(t, r, 400, "mcp_server_ids", `mcp_server_ids names "a", which preset "helper" does not select (it selects echo, everything, lemonade)`)
	})
	t.Run("a preset naming an unknown model is refused at save", func(t *testing.T) {
		r := admin(t, s, "POST", "/presets", `{"id":"ghostmodel","model":"nope-llm","mcp_server_ids":["lemonade"]}`)
		if r.Status != 400 || r.JSON(t)["error"].(map[string]any)["param"] != "model" ||
			!strings.Contains(errMessage(t, r), `model "nope-llm" is not known: GET /api/v1/models lists the models`) {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if r := admin(t, s, "GET", "/presets/ghostmodel", ""); r.Status != 404 {
			t.Fatalf("saved: %d %s", r.Status, r.Body)
		}
	})
	t.Run("a preset naming an unknown server is refused", func(t *testing.T) {
		r := admin(t, s, "POST", "/presets", `{"id":"ghostly","mcp_server_ids":["ghost","lemonade"]}`)
		if r.Status != 400 || !strings.Contains(errMessage(t, r), `"ghost", which is not a registered server`) {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("legacy tools_enabled reads back migrated", func(t *testing.T) {
		admin(t, s, "POST", "/presets", `{"id":"legacy","tools_enabled":true}`)
		r := admin(t, s, "GET", "/presets/legacy", "")
		p := r.JSON(t)["preset"].(map[string]any)
		if ids := asSlice(p["mcp_server_ids"]); len(ids) != 1 || ids[0] != "lemonade" || p["tools_enabled"] != true {
			t.Fatalf("legacy: %s", r.Body)
		}
	})
	t.Run("an unknown preset", func(t *testing.T) {
		if _, r := chatJSON(t, s, `{"preset":"nope","messages":[{"role":"user","content":"x"}]}`); r.Status != 400 || !strings.Contains(string(r.Body), `preset \"nope\" is not known`) {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("the OpenAI Go SDK, unchanged, with the extra field", func(t *testing.T) {
		client := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
		params := openai.ChatCompletionNewParams{Model: "builtin-llm", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`{"text":"via the sdk"}`)},
			ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "mcp_echo__echo"})}
		res, err := client.Chat.Completions.New(t.Context(), params, option.WithJSONSet("preset", "helper"))
		if err != nil || res.Choices[0].Message.Content != "The tool returned: via the sdk" {
			t.Fatalf("%v %+v", err, res)
		}
		// The tool loop's events come only to a client that asks with zest_events.
		for ask, want := range map[bool]int{false: 0, true: 2} {
			opts := []option.RequestOption{option.WithJSONSet("preset", "helper")}
			if ask {
				opts = append(opts, option.WithJSONSet("zest_events", true))
			}
			stream := client.Chat.Completions.NewStreaming(t.Context(), params, opts...)
			acc := openai.ChatCompletionAccumulator{}
			events := 0
			for stream.Next() {
				ch := stream.Current()
				if strings.Contains(ch.RawJSON(), `"zest_event"`) {
					events++
				}
				acc.AddChunk(ch)
			}
			if err := stream.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "The tool returned: via the sdk" || events != want {
				t.Fatalf("stream (zest_events %v): %v %+v, %d tool events", ask, err, acc.Choices, events)
			}
		}
	})
}

// TestChatRoundCap: a model still calling tools when the cap is reached stops with a clear
// finish reason.
func TestChatRoundCap(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_CHAT_MAX_ROUNDS=1")
	a, r := chatJSON(t, s, `{"model":"builtin-llm","mcp_server_ids":["lemonade"],"tool_choice":{"type":"function","function":{"name":"lemonade_list_models"}},"messages":[{"role":"user","content":"x"}]}`)
	if r.Status != 200 || a.Choices[0].FinishReason != "max_tool_rounds" || !strings.Contains(a.Choices[0].Message.Content, "after 1 rounds") {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
}

// TestToolOutputIsCapped: tool output is untrusted input, cut at the cap with a visible marker.
func TestToolOutputIsCapped(t *testing.T) {
	s := startSuite(t, "ZEST_CHAT_MAX_TOOL_OUTPUT=256")
	r := do(t, "POST", s.URL+"/api/v1/chat/completions", `{"model":"builtin-llm","mcp_server_ids":["lemonade"],
		"tool_choice":{"type":"function","function":{"name":"lemonade_list_models"}},"messages":[{"role":"user","content":"x"}]}`)
	body := string(r.Body)
	if r.Status != 200 || !strings.Contains(body, `"truncated":true`) || !strings.Contains(body, "Zest truncated this tool output: 256 of") {
		t.Fatalf("%d %s", r.Status, body)
	}
}
