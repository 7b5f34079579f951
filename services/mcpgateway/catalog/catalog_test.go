package catalog

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
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
