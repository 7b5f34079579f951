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
		{"audit", "list", "--limit", "1001"}, {"audit", "export", "--kind", "admins"}, {"audit", "list", "--kind", "trims"},
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

// input runs add's (or, with edit, edit's) reading of the arguments and flags: the config and
// the mask it sends.
func input(t *testing.T, edit bool, args ...string) (*mcpgatewayv1.ServerConfig, []string, error) {
	t.Helper()
	f := &serverFlags{}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	a := &app{}
	return a.serverInput(fs, f, fs.Args(), edit)
}

// TestEditSendsTheGivenFields: edit sends the fields whose flags are given and names them, and
// only them, in its mask (UpdateServer keeps the rest); a --transport clears the other
// transport's fields not given; --sandbox on edit changes the sandbox's fields given.
func TestEditSendsTheGivenFields(t *testing.T) {
	for _, c := range []struct {
		args []string
		mask string
		want *mcpgatewayv1.ServerConfig
	}{
		{[]string{"e", "--timeout-ms", "5000", "--arg", "b.mjs", "--arg", "--flag"}, "args,id,timeout_ms",
			&mcpgatewayv1.ServerConfig{Id: "e", TimeoutMs: proto.Int32(5000), Args: []string{"b.mjs", "--flag"}}},
		{[]string{"e", "--rate-limit", "", "--max-concurrency", "0", "--tools-deny", ""}, "id,max_concurrency,rate_limit,tools_deny",
			&mcpgatewayv1.ServerConfig{Id: "e", RateLimit: proto.String(""), MaxConcurrency: proto.Int32(0)}},
		{[]string{"e", "--approval", "required", "--approval-tools", "rm", "--approval-tools", "del*", "--approval-by", "client", "--expose=false"},
			"approval,approval_by,approval_tools,expose,id", &mcpgatewayv1.ServerConfig{Id: "e", Approval: proto.String("required"),
				ApprovalTools: []string{"rm", "del*"}, ApprovalBy: proto.String("client"), Expose: proto.Bool(false)}},
		{[]string{"e", "--transport", "streamable-http", "--url", "http://127.0.0.1:9/mcp"}, "args,command,env,id,sandbox,tool_host,transport,url,working_dir",
			&mcpgatewayv1.ServerConfig{Id: "e", Transport: "streamable-http", Url: "http://127.0.0.1:9/mcp"}},
		{[]string{"e", "--transport", "stdio", "--command", "node"}, "allow_insecure_http,bearer_token,command,id,oauth,transport,url",
			&mcpgatewayv1.ServerConfig{Id: "e", Transport: "stdio", Command: "node"}},
		{[]string{"e", "--sandbox", `{"network":"host"}`, "--tool-host", "th-1", "--max-output-bytes", "2048"}, "id,max_output_bytes,sandbox.network,tool_host",
			&mcpgatewayv1.ServerConfig{Id: "e", Sandbox: &mcpgatewayv1.Sandbox{Network: proto.String("host")}, ToolHost: proto.String("th-1"), MaxOutputBytes: proto.Int32(2048)}},
		{[]string{"e", "--json", `{"rate_limit":null,"env":{"K":"${K}"}}`, "--name", "E"}, "env,id,name,rate_limit",
			&mcpgatewayv1.ServerConfig{Id: "e", Name: "E", Env: map[string]string{"K": "${K}"}}},
	} {
		in, mask, err := input(t, true, c.args...)
		slices.Sort(mask)
		if err != nil || strings.Join(mask, ",") != c.mask || !proto.Equal(in, c.want) {
			t.Errorf("edit %q:\n%v %v %v\nwant %v %s", c.args, in, mask, err, c.want, c.mask)
		}
	}
	for args, msg := range map[string][]string{
		"give the fields to change":    {"e"},
		`and --id "f" differ`:          {"e", "--id", "f"},
		"id is the server's":           {"e", "--json", `{"id":"e"}`},
		"--env \"K\": want KEY=${VAR}": {"e", "--env", "K"},
		"--sandbox":                    {"e", "--sandbox", "yes"},
	} {
		if _, _, err := input(t, true, msg...); ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), args) {
			t.Errorf("edit %q: %v, want a usage error with %q", msg, err, args)
		}
	}
}

// TestAddSendsItsConfig: add sends the config its flags (and --json) give, and names those
// fields so that an empty list given clears the stored one; --sandbox replaces the sandbox.
func TestAddSendsItsConfig(t *testing.T) {
	in, mask, err := input(t, false, "e", "--command", "node", "--sandbox", "false", "--json", `{"tools_deny":[],"enabled":false}`)
	slices.Sort(mask)
	want := &mcpgatewayv1.ServerConfig{Id: "e", Command: "node", Enabled: proto.Bool(false), Sandbox: &mcpgatewayv1.Sandbox{Enabled: proto.Bool(false)}}
	if err != nil || !proto.Equal(in, want) || strings.Join(mask, ",") != "command,enabled,id,sandbox,tools_deny" {
		t.Fatalf("add: %v %v %v", in, mask, err)
	}
}

// TestEveryConfigFieldHasAFlag: add, edit and test set every field of a server config with a
// flag of its own (its name in kebab case), which names it in the mask.
func TestEveryConfigFieldHasAFlag(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	(&serverFlags{}).register(fs)
	fields := (&mcpgatewayv1.ServerConfig{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fs.Lookup(flagOf(fd)) == nil {
			t.Errorf("%s has no flag --%s: add one to serverFlags.register", fd.Name(), flagOf(fd))
		}
	}
}

// TestPlacement: the placement shows where a server runs, marked when pinned there.
func TestPlacement(t *testing.T) {
	for s, want := range map[*mcpgatewayv1.ServerState]string{
		{Config: &mcpgatewayv1.ServerConfig{Transport: "stdio", ToolHost: proto.String("th-1")}, Placement: "th-1"}: "th-1 (pinned)",
		{Config: &mcpgatewayv1.ServerConfig{Transport: "stdio"}, Placement: "th-2"}:                                 "th-2",
		{Config: &mcpgatewayv1.ServerConfig{Transport: "streamable-http"}}:                                          "-",
	} {
		if got := placement(s); got != want {
			t.Errorf("placement(%v) = %q, want %q", s, got, want)
		}
	}
}

// TestOAuthFlag: --oauth takes the API's JSON of the oauth block, and names it in the mask.
func TestOAuthFlag(t *testing.T) {
	in, mask, err := input(t, false, "h", "--url", "https://h.example/mcp", "--oauth", `{"client_id":"zest","scopes":["read"]}`)
	slices.Sort(mask)
	if err != nil || in.GetOauth().GetClientId() != "zest" || len(in.GetOauth().GetScopes()) != 1 || !slices.Contains(mask, "oauth") {
		t.Fatalf("add --oauth: %v %v %v", in, mask, err)
	}
	if _, _, err := input(t, false, "h", "--url", "https://h.example/mcp", "--oauth", `{"secret":"x"}`); err == nil || !strings.Contains(err.Error(), `unknown field "secret" in oauth`) {
		t.Fatalf("an unknown member: %v", err)
	}
}
