package e2e

import (
	"encoding/json"
	"errors"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// shapedPresetBody is preset "shaped" of server-everything ("everything") and the built-in
// tools: get-sum served as "add" with a fixed and b defaulted, echo as "say" with a new
// description, get-env hidden, lemonade_list_models as "models".
const shapedPresetBody = `{"id":"shaped","model":"builtin-llm","mcp_server_ids":["everything","lemonade"],"tools":[
	{"tool":"mcp_everything__get-sum","name":"add","description":"Add b to forty.","arguments":{"fixed":{"a":40},"defaults":{"b":2}}},
	{"tool":"mcp_everything__echo","name":"say","description":"Say it back."},
	{"tool":"mcp_everything__get-env","hidden":true},
	{"tool":"lemonade_list_models","name":"models"}]}`

func putShapedPreset(t *testing.T, s *Suite) {
	t.Helper()
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}})
	if r := admin(t, s, "POST", "/presets", shapedPresetBody); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}
}

// TestPresetShapedToolsTypeScriptSDK: issue 25's acceptance — renames and fixed arguments
// round-trip through the official TypeScript SDK on /mcp/presets/{id}: the SDK lists the
// shaped names and schemas (a fixed argument gone, a defaulted one marked), its calls of the
// new names reach server-everything's own tools with the arguments merged, the old names and
// the hidden tool are unknown, and a fixed argument sent with another value is a tool error
// naming it. The audit of the calls names the real tool. At save, a collision is refused
// naming the field. Before, the preset's tools field was refused as unknown.
func TestPresetShapedToolsTypeScriptSDK(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	putShapedPreset(t, s)

	calls := `[["add", {}], ["add", {"b": 5}], ["add", {"a": 1, "b": 1}], ["say", {"message": "shaped"}], ["models", {}],
		["mcp_everything__get-sum", {"a": 1, "b": 1}], ["mcp_everything__get-env", {}]]`
	cmd := exec.Command("node", nodeScript(t, "shaped-client.mjs"), presetURL(s, "shaped"), calls)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("shaped-client.mjs: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got struct {
		Tools []struct {
			Name, Description string
			InputSchema       struct {
				Properties map[string]map[string]any
				Required   []string
			}
		}
		Calls []struct {
			Tool, Text, Error string
			IsError           bool
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	names := map[string]int{}
	for i, tl := range got.Tools {
		names[tl.Name] = i
	}
	for _, want := range []string{"add", "say", "models", "mcp_everything__get-tiny-image"} {
		if _, ok := names[want]; !ok {
			t.Errorf("tools/list lacks %q: it lists %v", want, slices.Sorted(maps.Keys(names)))
		}
	}
	for _, gone := range []string{"mcp_everything__get-sum", "mcp_everything__echo", "mcp_everything__get-env", "lemonade_list_models"} {
		if _, ok := names[gone]; ok {
			t.Errorf("tools/list shows %q, which the preset renames or hides", gone)
		}
	}
	if i, ok := names["add"]; ok {
		add := got.Tools[i]
		if add.Description != "Add b to forty." || add.InputSchema.Properties["a"] != nil || add.InputSchema.Properties["b"]["default"] != float64(2) || len(add.InputSchema.Required) != 0 {
			t.Errorf("add = %+v: want the new description, a gone, b defaulted to 2 and required no more", add)
		}
	}
	want := []struct {
		text    string
		isError bool
		err     string
	}{
		{text: "42"},
		{text: "45"},
		{text: `argument "a" of tool "add" is set by this preset: leave it out of the call`, isError: true},
		{text: "Echo: shaped"},
		{text: "builtin-llm"},
		{err: `Unknown tool "mcp_everything__get-sum"`},
		{err: `Unknown tool "mcp_everything__get-env"`},
	}
	if len(got.Calls) != len(want) {
		t.Fatalf("calls = %+v", got.Calls)
	}
	for i, w := range want {
		c := got.Calls[i]
		if !strings.Contains(c.Text, w.text) || c.IsError != w.isError || (w.err == "") != (c.Error == "") || !strings.Contains(c.Error, w.err) {
			t.Errorf("call %s: %+v, want %+v", c.Tool, c, w)
		}
	}

	// The same tools in 2026-07-28, without a session.
	res, _ := modernPost(t, presetURL(s, "shaped"), "tools/call", "add", `{"name":"add","arguments":{"b":8}}`, `{}`)["result"].(map[string]any)
	if b, _ := json.Marshal(res["content"]); !strings.Contains(string(b), "48") {
		t.Errorf("2026-07-28 add: %v", res)
	}

	// The activity names the real tool, and the name the client used.
	r := admin(t, s, "GET", "/activity?limit=100", "")
	var act struct {
		Calls []struct {
			Tool     string `json:"tool"`
			ChatName string `json:"chat_name"`
			Preset   string `json:"preset_id"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(r.Body, &act); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	seen := 0
	for _, c := range act.Calls {
		if c.ChatName == "add" && c.Tool == "get-sum" && c.Preset == "shaped" {
			seen++
		}
	}
	if seen != 3 { // the fixed argument refused is no call
		t.Errorf("activity: %d calls of get-sum as add, want 3: %s", seen, r.Body)
	}

	// A client that knows only Lemonade's fields (GUI3's Save) keeps the shaping; "tools": []
	// clears it.
	if r := admin(t, s, "POST", "/presets", `{"id":"shaped","model":"builtin-llm","mcp_server_ids":["everything","lemonade"],"tools_enabled":true}`); r.Status != 200 || !strings.Contains(string(r.Body), `"name":"add"`) {
		t.Errorf("a Lemonade-shaped save: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/presets", `{"id":"cleared","mcp_server_ids":["everything"],"tools":[{"tool":"mcp_everything__echo","hidden":true}]}`); r.Status != 200 {
		t.Fatalf("cleared: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/presets", `{"id":"cleared","mcp_server_ids":["everything"],"tools":[]}`); r.Status != 200 || strings.Contains(string(r.Body), "mcp_everything__echo") {
		t.Errorf("tools [] did not clear: %d %s", r.Status, r.Body)
	}

	// At save: a name two tools would share is refused, naming the field and the fix.
	r = admin(t, s, "POST", "/presets", `{"id":"clash","mcp_server_ids":["everything"],"tools":[{"tool":"mcp_everything__echo","name":"x"},{"tool":"mcp_everything__get-sum","name":"x"}]}`)
	if r.Status != 400 || !strings.Contains(errMessage(t, r), `tools[1].name "x" is also the name of tools[0] (mcp_everything__echo): names are unique in a preset, choose another`) {
		t.Errorf("a collision: %d %s", r.Status, r.Body)
	}
}

// TestPresetShapedToolSearch: a preset with both tool_search and shaped tools, driven by
// mark3labs/mcp-go's client in both eras: search_tools answers get-sum by its new name "add",
// described anew, its fixed argument out of the schema, and never the hidden get-env;
// call_tool of "add" runs get-sum with a fixed and b defaulted; call_tool of the hidden tool
// and of get-sum's old name are unknown. The activity names get-sum, called as "add".
func TestPresetShapedToolSearch(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	putShapedPreset(t, s)
	body := strings.Replace(shapedPresetBody, `"id":"shaped"`, `"id":"shapedsearch","tool_search":true`, 1)
	if r := admin(t, s, "POST", "/presets", body); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}
	call := func(c *mcpclient.Client, tool string, args map[string]any) (string, bool) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = tool, args
		res, err := c.CallTool(t.Context(), req)
		if err != nil {
			return err.Error(), true
		}
		if len(res.Content) == 0 {
			t.Fatalf("%s %v: no content", tool, args)
		}
		return mcp.GetTextFromContent(res.Content[0]), res.IsError
	}
	session, _ := approvalClient(t, presetURL(s, "shapedsearch"), nil)
	for era, c := range map[string]*mcpclient.Client{"2025-11-25": session, "2026-07-28": modernClient(t, presetURL(s, "shapedsearch"), "zest-preset-shapedsearch")} {
		t.Run(era, func(t *testing.T) {
			text, isErr := call(c, "search_tools", map[string]any{"query": "the sum of two numbers", "limit": 20})
			var found struct {
				Tools []struct {
					Name, Description string
					InputSchema       struct{ Properties map[string]any }
				}
			}
			if err := json.Unmarshal([]byte(text), &found); isErr || err != nil {
				t.Fatalf("search_tools: %q (isError %v) %v", text, isErr, err)
			}
			var add bool
			for _, f := range found.Tools {
				switch f.Name {
				case "add":
					add = true
					if f.Description != "Add b to forty." || f.InputSchema.Properties["a"] != nil || f.InputSchema.Properties["b"] == nil {
						t.Errorf("add found as %+v: want the new description, a (fixed) out of the schema", f)
					}
				case "mcp_everything__get-sum":
					t.Errorf("search_tools found get-sum by its old name: %s", text)
				}
			}
			if !add {
				t.Errorf("search_tools did not find add (get-sum renamed): %s", text)
			}
			if text, _ := call(c, "search_tools", map[string]any{"query": "print the environment variables", "limit": 20}); strings.Contains(text, "get-env") {
				t.Errorf("search_tools found the hidden get-env: %s", text)
			}
			if text, isErr := call(c, "call_tool", map[string]any{"name": "add"}); isErr || !strings.Contains(text, "42") {
				t.Errorf("call_tool add: %q (isError %v), want 40 + 2", text, isErr)
			}
			if text, isErr := call(c, "call_tool", map[string]any{"name": "add", "arguments": map[string]any{"b": 5}}); isErr || !strings.Contains(text, "45") {
				t.Errorf("call_tool add b=5: %q (isError %v)", text, isErr)
			}
			for _, gone := range []string{"mcp_everything__get-env", "mcp_everything__get-sum"} {
				if text, isErr := call(c, "call_tool", map[string]any{"name": gone}); !isErr || !strings.Contains(text, `Unknown tool "`+gone+`"`) {
					t.Errorf("call_tool %s: %q (isError %v), want an unknown tool", gone, text, isErr)
				}
			}
		})
	}
	r := admin(t, s, "GET", "/activity?limit=100", "")
	var act struct {
		Calls []struct {
			Tool     string `json:"tool"`
			ChatName string `json:"chat_name"`
			Preset   string `json:"preset_id"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(r.Body, &act); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	seen := 0
	for _, c := range act.Calls {
		if c.ChatName == "add" && c.Tool == "get-sum" && c.Preset == "shapedsearch" {
			seen++
		}
	}
	if seen != 4 {
		t.Errorf("activity: %d calls of get-sum as add through call_tool, want 4: %s", seen, r.Body)
	}
}
