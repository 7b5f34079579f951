package e2e

import (
	"path"
	"slices"
	"strings"
	"testing"
)

// TestToolFilters: a server's tools_allow and tools_deny decide which of its tools the admin
// API lists, which tools/call runs and which a chat is offered and runs; changing them
// (an upsert) changes all of that at once, on the same connection and the same process.
func TestToolFilters(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	everything := serverEverything(t)
	// upsert names both filters: an upsert keeps a Zest field it leaves out, and an empty list
	// clears one.
	upsert := func(filters map[string]any) {
		t.Helper()
		cfg := map[string]any{"id": "everything", "command": "node", "args": []string{everything}, "tools_allow": []string{}, "tools_deny": []string{}}
		for k, v := range filters {
			delete(cfg, map[string]string{"toolsAllow": "tools_allow", "toolsDeny": "tools_deny"}[k])
			cfg[k] = v
		}
		if r := admin(t, s, "POST", "/servers", jsonBody(t, cfg)); r.Status != 200 {
			t.Fatalf("upsert %v: %d %s", filters, r.Status, r.Body)
		}
	}
	toolNames := func(entries any) []string {
		var out []string
		for _, e := range asSlice(entries) {
			out = append(out, e.(map[string]any)["name"].(string))
		}
		slices.Sort(out)
		return out
	}
	// listed checks GET /tools and the server's state; it returns the child's pid.
	listed := func(want []string) float64 {
		t.Helper()
		if got := toolNames(admin(t, s, "GET", "/tools", "").JSON(t)["tools"]); !slices.Equal(got, want) {
			t.Fatalf("GET /tools lists %q, want %q", got, want)
		}
		st := admin(t, s, "GET", "/servers/everything", "").JSON(t)["server"].(map[string]any)
		if got := toolNames(st["tools"]); st["connected"] != true || !slices.Equal(got, want) {
			t.Fatalf("the server's state lists %q (connected %v), want %q", got, st["connected"], want)
		}
		return st["process"].(map[string]any)["pid"].(float64)
	}
	matching := func(all []string, allow, deny []string) []string {
		var out []string
		for _, n := range all {
			ok := len(allow) == 0
			for _, p := range allow {
				if m, _ := path.Match(p, n); m {
					ok = true
				}
			}
			for _, p := range deny {
				if m, _ := path.Match(p, n); m {
					ok = false
				}
			}
			if ok {
				out = append(out, n)
			}
		}
		return out
	}
	call := func(tool string, args map[string]any) Response {
		return admin(t, s, "POST", "/servers/everything/tools/call", jsonBody(t, map[string]any{"name": tool, "arguments": args}))
	}

	upsert(nil)
	r := admin(t, s, "POST", "/servers/everything/connect", "")
	if r.Status != 200 {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	all := toolNames(r.JSON(t)["server"].(map[string]any)["tools"])
	// 16: its 13, and the three it adds for a client declaring sampling, elicitation and roots
	// (the tool host does).
	if len(all) != 16 || !slices.Contains(all, "echo") || !slices.Contains(all, "get-env") || !slices.Contains(all, "get-sum") {
		t.Fatalf("server-everything lists %q, want its 16 tools", all)
	}
	pid := listed(all)

	allow := []string{"echo", "get-*"}
	t.Run("tools_allow shows only matching tools", func(t *testing.T) {
		upsert(map[string]any{"tools_allow": allow})
		want := matching(all, allow, nil)
		if len(want) < 3 || len(want) == len(all) {
			t.Fatalf("the filter should keep some tools and drop others: %q", want)
		}
		if got := listed(want); got != pid {
			t.Fatalf("the child changed (pid %v, then %v): a filter change reconnected", pid, got)
		}
		st := admin(t, s, "GET", "/servers/everything", "").JSON(t)["server"].(map[string]any)
		if got := asSlice(st["tools_allow"]); len(got) != 2 || got[1] != "get-*" || len(asSlice(st["tools_deny"])) != 0 {
			t.Fatalf("the state shows tools_allow %v, tools_deny %v", st["tools_allow"], st["tools_deny"])
		}
	})
	t.Run("tools_deny removes one; deny wins", func(t *testing.T) {
		upsert(map[string]any{"toolsAllow": allow, "toolsDeny": []string{"get-env"}}) // the camelCase spellings
		want := matching(all, allow, []string{"get-env"})
		if slices.Contains(want, "get-env") || !slices.Contains(want, "get-sum") {
			t.Fatalf("want %q", want)
		}
		if got := listed(want); got != pid {
			t.Fatalf("the child changed (pid %v, then %v)", pid, got)
		}
	})
	t.Run("tools/call of a filtered tool is refused", func(t *testing.T) {
		for tool, msg := range map[string]string{
			"get-env":                  `tool "get-env" of server "everything" is filtered out: it matches tools_deny pattern "get-env"`,
			"toggle-simulated-logging": `tool "toggle-simulated-logging" of server "everything" is filtered out: it matches no tools_allow pattern ("echo", "get-*")`,
			"Echo":                     `tool "Echo" of server "everything" is filtered out: it matches no tools_allow pattern`,
		} {
			if r := call(tool, map[string]any{}); r.Status != 400 || !strings.Contains(errMessage(t, r), msg) {
				t.Fatalf("call %s: %d %s", tool, r.Status, r.Body)
			}
		}
		r := call("get-sum", map[string]any{"a": 40, "b": 2})
		if r.Status != 200 || !strings.Contains(string(r.Body), "42") {
			t.Fatalf("an exposed tool: %d %s", r.Status, r.Body)
		}
	})
	t.Run("a chat is not offered a filtered tool and cannot run it", func(t *testing.T) {
		_, r := chatJSON(t, s, `{"model":"builtin-llm","mcp_server_ids":["everything"],"tool_choice":{"type":"function","function":{"name":"mcp_everything__get-env"}},
			"messages":[{"role":"user","content":"{}"}]}`)
		// A tool_choice naming a tool the chat does not offer is refused before the model is
		// asked (builtin-llm would call it, and the call came back as finish_reason tool_calls).
		wantError(t, r, 400, "tool_choice", `tool_choice names function "mcp_everything__get-env", which this chat does not offer: it offers mcp_everything__echo, mcp_everything__get-`)
		a, r := chatJSON(t, s, `{"model":"builtin-llm","mcp_server_ids":["everything"],"tool_choice":{"type":"function","function":{"name":"mcp_everything__get-sum"}},
			"messages":[{"role":"user","content":"add {\"a\":40,\"b\":2}"}]}`)
		if r.Status != 200 || len(a.ZestToolCalls) != 1 || !strings.Contains(a.Choices[0].Message.Content, "42") {
			t.Fatalf("an exposed tool in a chat: %d %s", r.Status, r.Body)
		}
	})
	t.Run("a malformed pattern is refused, naming the field and the pattern", func(t *testing.T) {
		body := jsonBody(t, map[string]any{"id": "everything", "command": "node", "args": []string{everything}, "tools_deny": []string{"get-env", "[a"}})
		r := admin(t, s, "POST", "/servers", body)
		if r.Status != 400 || !strings.Contains(errMessage(t, r), `tools_deny[1] "[a" is not a valid glob pattern: `) {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		body = jsonBody(t, map[string]any{"id": "everything", "command": "node", "tools_allow": slices.Repeat([]string{"x"}, 65)})
		if r := admin(t, s, "POST", "/servers", body); r.Status != 400 || !strings.Contains(errMessage(t, r), "tools_allow holds 65 patterns; at most 64 are allowed") {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		listed(matching(all, allow, []string{"get-env"})) // the stored config is unchanged
	})
	t.Run("a test connection applies the filters", func(t *testing.T) {
		r := admin(t, s, "POST", "/servers/test", jsonBody(t, map[string]any{"command": "node", "args": []string{everything}, "tools_allow": []string{"echo"}}))
		if got := toolNames(r.JSON(t)["server"].(map[string]any)["tools"]); r.Status != 200 || !slices.Equal(got, []string{"echo"}) {
			t.Fatalf("%d %q %.300s", r.Status, got, r.Body)
		}
	})
	t.Run("without filters every tool is back", func(t *testing.T) {
		upsert(nil)
		if got := listed(all); got != pid {
			t.Fatalf("the child changed (pid %v, then %v)", pid, got)
		}
		if r := call("get-env", map[string]any{}); r.Status != 200 {
			t.Fatalf("get-env once exposed again: %d %s", r.Status, r.Body)
		}
	})
}
