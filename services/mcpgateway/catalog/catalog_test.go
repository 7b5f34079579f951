package catalog

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

func hash(server, tool string) string {
	h := fnv.New64a()
	h.Write([]byte(server + "\n" + tool))
	return fmt.Sprintf("%016x", h.Sum64())
}

func TestChatName(t *testing.T) {
	long := strings.Repeat("a", 40)
	cases := []struct {
		name, server, tool, want string
	}{
		{"plain", "echo", "echo", "mcp_echo__echo"},
		{"dash and underscore kept", "my-server_1", "get_sum-2", "mcp_my-server_1__get_sum-2"},
		{"dot in server id", "files.v2", "read", "mcp_files_v2__read_" + hash("files.v2", "read")},
		{"space in tool", "s", "read file", "mcp_s__read_file_" + hash("s", "read file")},
		{"double underscore inside a part", "s", "a__b", "mcp_s__a__b_" + hash("s", "a__b")},
		{"edge underscores trimmed", "s", "_x_", "mcp_s__x_" + hash("s", "_x_")},
		{"empty after cleaning", "s", "???", "mcp_s__tool_" + hash("s", "???")},
		{"non-ASCII", "s", "café", "mcp_s__caf_" + hash("s", "café")},
		{"over 64 characters", long, long, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ChatName(c.server, c.tool)
			if c.name == "over 64 characters" {
				want := strings.TrimRight(("mcp_" + long + "__" + long)[:47], "_-") + "_" + hash(long, long)
				if got != want || len(got) != 64 {
					t.Fatalf("ChatName = %q (%d), want %q", got, len(got), want)
				}
				return
			}
			if got != c.want {
				t.Fatalf("ChatName(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
			}
			if len(got) > MaxChatName {
				t.Fatalf("%q is longer than 64", got)
			}
		})
	}
}

func TestChatNameTrimsBeforeSuffixWhenCut(t *testing.T) {
	// The cut at 47 lands right after a '-': it is trimmed before the suffix.
	server := strings.Repeat("b", 38) + "-" + strings.Repeat("c", 30)
	got := ChatName(server, "t")
	if strings.Contains(got, "-_") || len(got) > 64 || !strings.HasSuffix(got, "_"+hash(server, "t")) {
		t.Fatalf("got %q", got)
	}
}

func TestTwoServersSameToolDoNotCollide(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"alpha", "beta", "alpha.1", "alpha_1", "alpha-1"} {
		for _, tool := range []string{"search", "search!", "search?"} {
			n := ChatName(s, tool)
			if prev, ok := seen[n]; ok {
				t.Fatalf("%s/%s and %s share chat_name %q", s, tool, prev, n)
			}
			seen[n] = s + "/" + tool
			if strings.HasPrefix(n, "lemonade_") {
				t.Fatalf("%q could shadow a native tool", n)
			}
		}
	}
}

func TestEntry(t *testing.T) {
	raw := json.RawMessage(`{"name":"echo","description":"Echoes","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}},"annotations":{"title":"Echo it"}}`)
	e, err := Entry("every", "Everything", raw)
	if err != nil {
		t.Fatal(err)
	}
	fn := e.GetOpenaiTool().AsMap()["function"].(map[string]any)
	if e.GetChatName() != "mcp_every__echo" || e.GetTitle() != "Echo it" || fn["name"] != "mcp_every__echo" ||
		fn["description"] != "[Everything] Echoes" || fn["parameters"].(map[string]any)["properties"] == nil {
		t.Fatalf("entry = %v", e)
	}
	if e.GetTool().AsMap()["annotations"] == nil {
		t.Fatal("raw tool not kept")
	}
	if _, err := Entry("x", "x", json.RawMessage(`{"description":"no name"}`)); err == nil {
		t.Fatal("a tool without a name must be refused")
	}
}

// Entries keeps the server's order and leaves out what its filters hide and what is
// malformed (reported to skipped).
func TestEntriesFollowTheFilters(t *testing.T) {
	var raws []json.RawMessage
	for _, name := range []string{"echo", "get-sum", "get-env", "print-env", "Echo"} {
		raws = append(raws, json.RawMessage(`{"name":"`+name+`","inputSchema":{"type":"object"}}`))
	}
	raws = append(raws, json.RawMessage(`{"description":"no name"}`))
	for name, c := range map[string]struct {
		allow, deny []string
		want        string
	}{
		"no filters":              {nil, nil, "echo,get-sum,get-env,print-env,Echo"},
		"allow":                   {[]string{"echo", "get-*"}, nil, "echo,get-sum,get-env"},
		"allow and deny":          {[]string{"echo", "get-*"}, []string{"get-env"}, "echo,get-sum"},
		"deny alone":              {nil, []string{"*-env"}, "echo,get-sum,Echo"},
		"deny everything":         {nil, []string{"*"}, ""},
		"allow is case-sensitive": {[]string{"Echo"}, nil, "Echo"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := &mcpgatewayv1.ServerConfig{Id: "every", Name: "Everything", ToolsAllow: c.allow, ToolsDeny: c.deny}
			var skipped []error
			es := Entries(cfg, raws, func(err error) { skipped = append(skipped, err) })
			var names []string
			for _, e := range es {
				names = append(names, e.GetName())
				if e.GetServerId() != "every" || e.GetChatName() != ChatName("every", e.GetName()) {
					t.Fatalf("entry %v", e)
				}
			}
			if got := strings.Join(names, ","); got != c.want {
				t.Fatalf("entries %q, want %q", got, c.want)
			}
			if len(skipped) != 1 || !strings.Contains(skipped[0].Error(), "has no name") {
				t.Fatalf("skipped %v", skipped)
			}
		})
	}
	if es := Entries(&mcpgatewayv1.ServerConfig{Id: "x"}, nil, nil); es == nil || len(es) != 0 {
		t.Fatalf("no tools: %v, want an empty list", es)
	}
}
