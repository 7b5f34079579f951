package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOpenAINodeSDKHelpers: the OpenAI Node SDK's streaming helpers pass unchanged against
// Zest — responses.stream() of a text and of a function call (its accumulator needs a message
// item added with no content, then response.content_part.added), chat.completions.stream() on a chat whose tool loop Zest runs
// (finalChatCompletion carries no zest_event: the tool loop's events are sent only to a client
// that asks with zest_events), and runTools with a function the client runs; a chat honours
// stop, and audio.translations is served (it was 404).
func TestOpenAINodeSDKHelpers(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}})
	cmd := exec.Command("node", nodeScript(t, "openai-node-client.mjs"), s.URL+"/api/v1", "builtin-llm", "echo", "mcp_echo__echo", "builtin-transcribe")
	b, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("openai-node-client: %v\n%s\n%s", err, b, stderr)
	}
	var out struct {
		ResponsesStream     struct{ Text, Status, Deltas, Error string }    `json:"responses_stream"`
		ResponsesStreamCall struct{ Name, Arguments, Status, Error string } `json:"responses_stream_call"`
		ChatStream          struct {
			Text, Finish, Error string
			Keys                []string
		} `json:"chat_stream"`
		RunTools struct {
			Text, Error string
			Calls       [][]float64
		} `json:"run_tools"`
		ChatStop    struct{ Text, Finish, Error string } `json:"chat_stop"`
		Translation struct{ Text, Language, Task, Error string }
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("openai-node-client printed %s: %v", b, err)
	}
	const heard = "builtin-llm heard: hello from the node sdk"
	if r := out.ResponsesStream; r.Error != "" || r.Text != heard || r.Deltas != heard || r.Status != "completed" {
		t.Errorf("responses.stream(): %+v", r)
	}
	if c := out.ResponsesStreamCall; c.Error != "" || c.Name != "get_sum" || c.Arguments != `{"a":40,"b":2}` || c.Status != "completed" {
		t.Errorf("responses.stream() with a function call: %+v", c)
	}
	if c := out.ChatStream; c.Error != "" || c.Text != "The tool returned: through the node sdk" || c.Finish != "stop" || slices.Contains(c.Keys, "zest_event") {
		t.Errorf("chat.completions.stream(): %+v", c)
	}
	if r := out.RunTools; r.Error != "" || r.Text != "The tool returned: 42" || len(r.Calls) != 1 || r.Calls[0][0] != 40 || r.Calls[0][1] != 2 {
		t.Errorf("runTools: %+v", r)
	}
	if c := out.ChatStop; c.Error != "" || c.Text != "builtin-llm heard: one" || c.Finish != "stop" {
		t.Errorf("a chat with stop: %+v", c)
	}
	if tr := out.Translation; tr.Error != "" || tr.Task != "translate" || tr.Language != "en" || !strings.Contains(tr.Text, "0.25 s of 16000 Hz mono") {
		t.Errorf("audio.translations: %+v", tr)
	}
}
