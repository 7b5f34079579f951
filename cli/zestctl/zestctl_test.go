package zestctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{usagef("bad"), ExitUsage},
		{errors.New("unknown command \"x\" for \"zestctl\""), ExitUsage},
		{status.Error(codes.InvalidArgument, "x"), ExitServer},
		{status.Error(codes.FailedPrecondition, "x"), ExitServer},
		{status.Error(codes.NotFound, "x"), ExitNotFound},
		{status.Error(codes.Unauthenticated, "x"), ExitAuth},
		{status.Error(codes.PermissionDenied, "x"), ExitAuth},
		{status.Error(codes.Unavailable, "x"), ExitUnavailable},
		{status.Error(codes.DeadlineExceeded, "x"), ExitUnavailable},
		{exitError{code: ExitToolIsError}, ExitToolIsError},
	} {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestMainUsageErrors(t *testing.T) {
	env := func(string) string { return "" }
	for _, args := range [][]string{
		{"servers", "list", "--bogus"}, {"bogus"}, {"servers", "get"}, {"-o", "xml", "servers", "list"},
		{"--timeout", "1ms", "status"}, {"call", "s", "t", "--arg", "novalue"}, {"call", "s", "t", "--json", "[1]"},
		{"config", "emacs"}, {"config", "claude", "--server", "a", "--preset", "b"}, {"activity", "--limit", "10001"},
		{"audit", "list", "--limit", "1001"}, {"audit", "export", "--kind", "admins"},
		{"chat", "hi"}, {"servers", "add", "--env", "NOEQUALS", "--mcpgateway-addr", "127.0.0.1:1"},
		{"--mcpgateway-addr", "127.0.0.1:1,", "status"}, {"--inference-addr", "dns:///inference", "status"},
	} {
		var out, errb bytes.Buffer
		if code := Main(args, strings.NewReader(""), &out, &errb, env); code != ExitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, ExitUsage, errb.String())
		}
	}
}

func TestParseArgs(t *testing.T) {
	s, err := parseArgs(`{"a":1,"b":"x"}`, []string{"n=5", "t=hello", "o={\"k\":true}", "b=2 3", "e="})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(s.AsMap())
	if string(got) != `{"a":1,"b":"2 3","e":"","n":5,"o":{"k":true},"t":"hello"}` {
		t.Fatalf("args = %s", got)
	}
	if _, err := parseArgs(`{"a":1} {}`, nil); ExitCode(err) != ExitUsage {
		t.Fatalf("two objects: %v", err)
	}
	if _, err := parseArgs(strings.Repeat(" ", maxInputBytes+1), nil); ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("too large: %v", err)
	}
}

func TestClientConfigShapes(t *testing.T) {
	c, _ := ClientConfig("claude", "http://h/mcp", true)
	var claude struct {
		McpServers map[string]struct {
			Command string
			Args    []string
			Env     map[string]string
		}
	}
	if err := json.Unmarshal([]byte(c), &claude); err != nil {
		t.Fatal(err)
	}
	z := claude.McpServers["zest"]
	if z.Command != "npx" || strings.Join(z.Args, " ") != "-y mcp-remote http://h/mcp --header Authorization:${AUTH_HEADER}" ||
		z.Env["AUTH_HEADER"] != "Bearer <your LEMONADE_API_KEY>" {
		t.Fatalf("claude = %s", c)
	}
	c, _ = ClientConfig("cursor", "http://h/mcp", false)
	if strings.Contains(c, "headers") || !strings.Contains(c, `"url": "http://h/mcp"`) {
		t.Fatalf("cursor without a key = %s", c)
	}
	c, _ = ClientConfig("vscode", "http://h/mcp", true)
	if !strings.Contains(c, `"Bearer ${input:zest-key}"`) || !strings.Contains(c, `"promptString"`) {
		t.Fatalf("vscode = %s", c)
	}
	c, _ = ClientConfig("inspector", "http://h/mcp", false)
	if c != "npx @modelcontextprotocol/inspector --cli http://h/mcp --transport http --method tools/list\n" {
		t.Fatalf("inspector = %q", c)
	}
}

// TestEditKeepsOtherFields: edit stores the server again with only the given flags changed,
// and a transport switch drops the other transport's fields.
func TestEditKeepsOtherFields(t *testing.T) {
	st := &mcpgatewayv1.ServerState{Config: &mcpgatewayv1.ServerConfig{Id: "e", Name: "E", Transport: "stdio", Command: "node", Args: []string{"a.mjs"},
		Env: map[string]string{"K": "${K}"}, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(30000), ToolsDeny: []string{"x*"},
		ToolHost: proto.String("th-1"), Sandbox: &mcpgatewayv1.Sandbox{Enabled: proto.Bool(true), WritablePaths: []string{"/var/lib/e"}}}, Placement: "th-1"}
	f := &serverFlags{}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--timeout-ms", "5000", "--arg", "b.mjs", "--arg", "--flag"}); err != nil {
		t.Fatal(err)
	}
	in := inputOf(st)
	if err := f.apply(fs, in); err != nil {
		t.Fatal(err)
	}
	want := &mcpgatewayv1.ServerConfig{Id: "e", Name: "E", Transport: "stdio", Command: "node",
		Args: []string{"b.mjs", "--flag"}, Env: map[string]string{"K": "${K}"}, Enabled: proto.Bool(true), Expose: proto.Bool(true),
		TimeoutMs: proto.Int32(5000), ToolsDeny: []string{"x*"}, ToolHost: proto.String("th-1"),
		Sandbox: &mcpgatewayv1.Sandbox{Enabled: proto.Bool(true), WritablePaths: []string{"/var/lib/e"}}} // kept: an edit never unconfines
	if !proto.Equal(in, want) {
		t.Fatalf("edit input = %v\nwant %v", in, want)
	}
	fs2 := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f2 := &serverFlags{}
	f2.register(fs2)
	_ = fs2.Parse([]string{"--transport", "streamable-http", "--url", "http://127.0.0.1:9/mcp"})
	in = inputOf(st)
	_ = f2.apply(fs2, in)
	if in.Command != "" || in.Args != nil || in.Env != nil || in.ToolHost != nil || in.Sandbox != nil || in.GetUrl() != "http://127.0.0.1:9/mcp" {
		t.Fatalf("switched input = %v", in)
	}
}

// TestToolHostFlag: --tool-host pins, --tool-host "" unpins, and the placement shows where a
// server runs, marked when pinned there.
func TestToolHostFlag(t *testing.T) {
	st := &mcpgatewayv1.ServerState{Config: &mcpgatewayv1.ServerConfig{Id: "e", Transport: "stdio", Command: "node", ToolHost: proto.String("th-1")}, Placement: "th-1"}
	for _, tc := range []struct {
		args []string
		want *string
	}{{nil, proto.String("th-1")}, {[]string{"--tool-host", "th-2"}, proto.String("th-2")}, {[]string{"--tool-host", ""}, proto.String("")}} {
		f := &serverFlags{}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		in := inputOf(st)
		if err := f.apply(fs, in); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&mcpgatewayv1.ServerConfig{ToolHost: in.ToolHost}, &mcpgatewayv1.ServerConfig{ToolHost: tc.want}) {
			t.Errorf("%v: tool_host %v, want %v", tc.args, in.ToolHost, *tc.want)
		}
	}
	for s, want := range map[*mcpgatewayv1.ServerState]string{
		st: "th-1 (pinned)",
		{Config: &mcpgatewayv1.ServerConfig{Transport: "stdio"}, Placement: "th-2"}:                                 "th-2",
		{Config: &mcpgatewayv1.ServerConfig{Transport: "stdio", ToolHost: proto.String("th-1")}, Placement: "th-1"}: "th-1 (pinned)",
		{Config: &mcpgatewayv1.ServerConfig{Transport: "streamable-http"}}:                                          "-",
	} {
		if got := placement(s); got != want {
			t.Errorf("placement(%v) = %q, want %q", s, got, want)
		}
	}
}

// TestEditJSONKeepsOtherFields: edit --json sets the fields the JSON holds and keeps the rest.
func TestEditJSONKeepsOtherFields(t *testing.T) {
	in := inputOf(&mcpgatewayv1.ServerState{Config: &mcpgatewayv1.ServerConfig{Id: "e", Name: "E", Transport: "stdio", Command: "node", Args: []string{"a.mjs"}, Enabled: proto.Bool(true), TimeoutMs: proto.Int32(30000)}})
	if err := unmarshalInput([]byte(`{"server":{"timeout_ms":5000,"args":["b.mjs"]}}`), "server", in); err != nil {
		t.Fatal(err)
	}
	if in.GetCommand() != "node" || in.GetName() != "E" || in.GetTimeoutMs() != 5000 || strings.Join(in.GetArgs(), ",") != "b.mjs" {
		t.Fatalf("edit --json = %v", in)
	}
	if err := unmarshalInput([]byte(`{"comand":"x"}`), "server", in); ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "comand") {
		t.Fatalf("a misspelt field: %v", err)
	}
}

func TestToolhostAddrs(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:13312":        "[127.0.0.1:13312] ",
		"a:1, b:2":               "[a:1 b:2] ",
		"dns:///toolhost.ns:133": "[] toolhost.ns",
	} {
		addrs, name, err := toolhostAddrs(in)
		if got := fmt.Sprint(addrs, " ", name); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"a", "a:1,", "dns:///a", ""} {
		if _, _, err := toolhostAddrs(bad); err == nil || !strings.Contains(err.Error(), "dns:///name:port") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	got, err := resolveToolhosts(t.Context(), "dns:///localhost:9")
	if err != nil || !slices.Contains(got, "127.0.0.1:9") {
		t.Errorf("localhost: %v %v", got, err)
	}
}

// TestApprovalFlags: --approval and --approval-tools set their fields; edit keeps them.
func TestApprovalFlags(t *testing.T) {
	st := &mcpgatewayv1.ServerState{Config: &mcpgatewayv1.ServerConfig{Id: "e", Transport: "stdio", Command: "node", Approval: proto.String("required"), ApprovalTools: []string{"rm"}}}
	for _, tc := range []struct {
		args     []string
		approval string
		tools    []string
	}{{nil, "required", []string{"rm"}}, {[]string{"--approval", "none", "--approval-tools", "delete_*", "--approval-tools", "rm?"}, "none", []string{"delete_*", "rm?"}}} {
		f := &serverFlags{}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		in := inputOf(st)
		if err := f.apply(fs, in); err != nil {
			t.Fatal(err)
		}
		if in.GetApproval() != tc.approval || strings.Join(in.GetApprovalTools(), ",") != strings.Join(tc.tools, ",") {
			t.Errorf("%v: approval %q tools %q", tc.args, in.GetApproval(), in.GetApprovalTools())
		}
	}
}

// TestLimitFlags: edit keeps a server's limits unless their flags are given; --rate-limit ""
// and --max-concurrency 0 remove them.
func TestLimitFlags(t *testing.T) {
	st := &mcpgatewayv1.ServerState{Config: &mcpgatewayv1.ServerConfig{Id: "e", Transport: "stdio", Command: "node", RateLimit: proto.String("5/s"), MaxConcurrency: proto.Int32(2)}}
	parse := func(args ...string) *mcpgatewayv1.ServerConfig {
		f := &serverFlags{}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		in := inputOf(st)
		if err := f.apply(fs, in); err != nil {
			t.Fatal(err)
		}
		return in
	}
	if in := parse("--timeout-ms", "5000"); in.GetRateLimit() != "5/s" || in.GetMaxConcurrency() != 2 {
		t.Fatalf("kept: %v", in)
	}
	if in := parse("--rate-limit", "10/m:3", "--max-concurrency", "8"); in.GetRateLimit() != "10/m:3" || in.GetMaxConcurrency() != 8 {
		t.Fatalf("set: %v", in)
	}
	if in := parse("--rate-limit", "", "--max-concurrency", "0"); in.RateLimit == nil || in.GetRateLimit() != "" || in.GetMaxConcurrency() != 0 {
		t.Fatalf("removed: %v", in)
	}
}
