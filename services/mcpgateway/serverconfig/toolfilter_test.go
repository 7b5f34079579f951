package serverconfig

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/adminjson"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

// patterns returns a JSON array of n patterns "p0", "p1", ….
func patterns(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = `"p` + strings.Repeat("x", i%3) + `"`
	}
	return "[" + strings.Join(items, ",") + "]"
}

func TestParseToolFilters(t *testing.T) {
	valid := []struct {
		name, body  string
		allow, deny []string
	}{
		{"none", `{"id":"e","command":"node"}`, nil, nil},
		{"snake_case", `{"id":"e","command":"node","tools_allow":["echo","get-*"],"tools_deny":["get-env"]}`, []string{"echo", "get-*"}, []string{"get-env"}},
		{"camelCase aliases", `{"id":"e","command":"node","toolsAllow":["echo"],"toolsDeny":["*-env"]}`, []string{"echo"}, []string{"*-env"}},
		{"every glob form", `{"id":"e","command":"node","tools_allow":["*","?cho","[a-c]*","[^x]*","\\*literal","a\\?b"]}`, []string{"*", "?cho", "[a-c]*", "[^x]*", `\*literal`, `a\?b`}, nil},
		{"on a streamable-http server", `{"id":"h","transport":"http","url":"https://h/mcp","tools_deny":["delete_*"]}`, nil, []string{"delete_*"}},
		{"64 patterns", `{"id":"e","command":"node","tools_deny":` + patterns(64) + `}`, nil, nil},
		{"128 characters", `{"id":"e","command":"node","tools_allow":["` + strings.Repeat("é", 128) + `"]}`, []string{strings.Repeat("é", 128)}, nil},
	}
	for _, tc := range valid {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parse(tc.body, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.allow != nil && !slices.Equal(cfg.GetToolsAllow(), tc.allow) || tc.deny != nil && !slices.Equal(cfg.GetToolsDeny(), tc.deny) {
				t.Fatalf("allow %q deny %q", cfg.GetToolsAllow(), cfg.GetToolsDeny())
			}
			if tc.name == "64 patterns" && len(cfg.GetToolsDeny()) != MaxToolPatterns {
				t.Fatalf("%d patterns stored", len(cfg.GetToolsDeny()))
			}
		})
	}
	invalid := []struct{ name, body, msg string }{
		{"unclosed class in tools_deny", `{"id":"e","command":"node","tools_deny":["echo","[a"]}`,
			`tools_deny[1] "[a" is not a valid glob pattern: syntax error in pattern; use * (any characters but /)`},
		{"unclosed class through the alias", `{"id":"e","command":"node","toolsAllow":["get-[a-"]}`, `tools_allow[0] "get-[a-" is not a valid glob pattern`},
		{"trailing backslash", `{"id":"e","command":"node","tools_allow":["echo\\"]}`, `tools_allow[0] "echo\\" is not a valid glob pattern`},
		{"empty class", `{"id":"e","command":"node","tools_deny":["[]"]}`, `tools_deny[0] "[]" is not a valid glob pattern`},
		{"empty pattern", `{"id":"e","command":"node","tools_allow":["echo",""]}`, `tools_allow[1] is empty: a pattern matches tool names, e.g. "get-*"`},
		{"65 patterns", `{"id":"e","command":"node","tools_allow":` + patterns(65) + `}`, "tools_allow holds 65 patterns; at most 64 are allowed"},
		{"129 characters", `{"id":"e","command":"node","tools_deny":["` + strings.Repeat("é", 129) + `"]}`, "tools_deny[0] is 129 characters long; a pattern has at most 128"},
		{"not an array", `{"id":"e","command":"node","tools_deny":"echo"}`, "tools_deny must be an array of strings, not a string"},
		{"not strings", `{"id":"e","command":"node","toolsAllow":[1]}`, "tools_allow[0] must be a string, not a number"},
		{"both spellings", `{"id":"e","command":"node","tools_allow":["a"],"toolsAllow":["a"]}`, "tools_allow and toolsAllow are the same field"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parse(tc.body, nil)
			if (!errors.Is(err, ErrInvalid) && !errors.Is(err, adminjson.ErrServer)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want one containing %q", err, tc.msg)
			}
			if cfg != nil {
				t.Fatalf("config %v with an error", cfg)
			}
		})
	}
}

func TestCheckTool(t *testing.T) {
	cfg := func(allow, deny []string) *mcpgatewayv1.ServerConfig {
		return &mcpgatewayv1.ServerConfig{Id: "every", ToolsAllow: allow, ToolsDeny: deny}
	}
	cases := []struct {
		name        string
		allow, deny []string
		tool        string
		exposed     bool
		msg         string // of the error when not exposed
	}{
		{"no filters expose everything", nil, nil, "anything", true, ""},
		{"an allow pattern matches", []string{"echo", "get-*"}, nil, "get-sum", true, ""},
		{"an exact allow name", []string{"echo", "get-*"}, nil, "echo", true, ""},
		{"no allow pattern matches", []string{"echo", "get-*"}, nil, "print-env",
			false, `tool "print-env" of server "every" is filtered out: it matches no tools_allow pattern ("echo", "get-*"); add one to the server's tools_allow to expose it`},
		{"matching is case-sensitive", []string{"echo"}, nil, "Echo", false, "matches no tools_allow pattern"},
		{"a deny pattern hides", nil, []string{"get-env"}, "get-env",
			false, `tool "get-env" of server "every" is filtered out: it matches tools_deny pattern "get-env"; change the server's tools_deny to expose it`},
		{"deny wins over allow", []string{"get-*"}, []string{"*-env"}, "get-env", false, `tools_deny pattern "*-env"`},
		{"deny leaves the others", []string{"get-*"}, []string{"*-env"}, "get-sum", true, ""},
		{"? is one character", []string{"ech?"}, nil, "echoo", false, "no tools_allow pattern"},
		{"a class", nil, []string{"[gp]et-*"}, "pet-x", false, `tools_deny pattern "[gp]et-*"`},
		{"a negated class", nil, []string{"[^g]*"}, "get-sum", true, ""},
		{"an escaped star is literal", []string{`a\*`}, nil, "ab", false, "no tools_allow pattern"},
		{"* does not cross /", []string{"a*"}, nil, "a/b", false, "no tools_allow pattern"},
		{"a malformed deny pattern from elsewhere hides everything", nil, []string{"[a"}, "echo", false, `tools_deny pattern "[a"`},
		{"a malformed allow pattern from elsewhere matches nothing", []string{"[a"}, nil, "[a", false, "no tools_allow pattern"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg(tc.allow, tc.deny)
			err := CheckTool(c, tc.tool)
			if Exposed(c, tc.tool) != tc.exposed || (err == nil) != tc.exposed {
				t.Fatalf("CheckTool(%q) = %v, want exposed %v", tc.tool, err, tc.exposed)
			}
			if tc.exposed {
				return
			}
			var f *ToolFilteredError
			if !errors.As(err, &f) || f.ServerID != "every" || f.Tool != tc.tool || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want a ToolFilteredError containing %q", err, tc.msg)
			}
			if wantField := map[bool]string{true: FieldToolsDeny, false: FieldToolsAllow}[strings.Contains(tc.msg, "tools_deny")]; f.Field != wantField {
				t.Fatalf("field = %q, want %q", f.Field, wantField)
			}
		})
	}
}

func TestSameConnection(t *testing.T) {
	base := &mcpgatewayv1.ServerConfig{Id: "e", Command: "node", Args: []string{"a.js"}, Enabled: proto.Bool(true), TimeoutMs: proto.Int32(30000)}
	with := func(f func(c *mcpgatewayv1.ServerConfig)) *mcpgatewayv1.ServerConfig {
		c := proto.CloneOf(base)
		f(c)
		return c
	}
	filtered := with(func(c *mcpgatewayv1.ServerConfig) { c.ToolsAllow, c.ToolsDeny = []string{"echo"}, []string{"x"} })
	for name, c := range map[string]struct {
		a, b *mcpgatewayv1.ServerConfig
		same bool
	}{
		"equal":                    {base, proto.CloneOf(base), true},
		"filters added":            {base, filtered, true},
		"filters changed":          {filtered, with(func(c *mcpgatewayv1.ServerConfig) { c.ToolsDeny = []string{"y", "z"} }), true},
		"args changed":             {base, with(func(c *mcpgatewayv1.ServerConfig) { c.Args = []string{"b.js"} }), false},
		"filters and args changed": {filtered, with(func(c *mcpgatewayv1.ServerConfig) { c.Args, c.ToolsAllow = nil, []string{"a"} }), false},
		"timeout changed":          {base, with(func(c *mcpgatewayv1.ServerConfig) { c.TimeoutMs = proto.Int32(1000) }), false},
		"disabled":                 {filtered, with(func(c *mcpgatewayv1.ServerConfig) { c.Enabled, c.ToolsAllow = proto.Bool(false), []string{"echo"} }), false},
		"nil against a config":     {nil, base, false},
		"approval set": {base, with(func(c *mcpgatewayv1.ServerConfig) {
			c.Approval, c.ApprovalTools = proto.String(ApprovalRequired), []string{"rm"}
		}), true},
		"approval and args": {base, with(func(c *mcpgatewayv1.ServerConfig) { c.Approval, c.Args = proto.String(ApprovalRequired), nil }), false},
	} {
		t.Run(name, func(t *testing.T) {
			before := proto.CloneOf(c.a)
			if got := SameConnection(c.a, c.b); got != c.same {
				t.Fatalf("SameConnection = %v, want %v", got, c.same)
			}
			if c.a != nil && !proto.Equal(before, c.a) {
				t.Fatal("SameConnection modified its argument")
			}
		})
	}
}
