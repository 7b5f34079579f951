package adminjson

import (
	"errors"
	"slices"
	"strings"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

func TestServerShapes(t *testing.T) {
	for name, body := range map[string]string{
		"bare":              `{"id":"e","command":"node","args":["a.js"],"timeoutMs":5000,"workingDir":"/tmp"}`,
		"wrapped":           `{"server":{"id":"e","command":"node","args":["a.js"],"timeout_ms":5000,"working_dir":"/tmp"}}`,
		"state sent back":   `{"id":"e","command":"node","args":["a.js"],"timeout_ms":5000,"working_dir":"/tmp","status":"connected","tools":[],"process":{}}`,
		"nulls mean absent": `{"id":"e","command":"node","args":["a.js"],"timeout_ms":5000,"working_dir":"/tmp","url":null,"enabled":null}`,
	} {
		t.Run(name, func(t *testing.T) {
			in, _, err := Server([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if in.GetId() != "e" || in.GetCommand() != "node" || in.GetTimeoutMs() != 5000 || in.GetWorkingDir() != "/tmp" ||
				len(in.GetArgs()) != 1 || in.GetUrl() != "" || in.Enabled != nil {
				t.Fatalf("%v", in)
			}
		})
	}
}

func TestServerRefusals(t *testing.T) {
	for name, c := range map[string]struct{ body, msg string }{
		"not JSON":             {`{"id":`, "the body must be a JSON object"},
		"an array":             {`[1]`, "the body must be a JSON object"},
		"empty":                {`{}`, "the body is empty"},
		"wrapped and bare":     {`{"server":{"id":"a"},"id":"b"}`, "not both"},
		"wrapper not object":   {`{"server":[1]}`, "server must be an object"},
		"both spellings":       {`{"timeout_ms":1000,"timeoutMs":1000}`, "timeout_ms and timeoutMs are the same field"},
		"unknown field":        {`{"id":"a","comand":"x"}`, `unknown field "comand"`},
		"string as number":     {`{"timeout_ms":"5000"}`, "timeout_ms must be a number of milliseconds, not a string"},
		"fraction":             {`{"timeout_ms":1.5}`, "timeout_ms 1.5 must be a whole number of milliseconds"},
		"too big for int32":    {`{"timeout_ms":1e12}`, "must be a whole number"},
		"bytes as string":      {`{"max_output_bytes":"1MB"}`, "max_output_bytes must be a number of bytes, not a string"},
		"both byte spellings":  {`{"max_output_bytes":2048,"maxOutputBytes":2048}`, "max_output_bytes and maxOutputBytes are the same field"},
		"args string":          {`{"args":"x"}`, "args must be an array of strings, not a string"},
		"args item number":     {`{"args":["x",2]}`, "args[1] must be a string, not a number"},
		"env array":            {`{"env":["A"]}`, "env must be an object"},
		"env value number":     {`{"env":{"A":1}}`, "env.A must be a string"},
		"enabled string":       {`{"enabled":"yes"}`, "enabled must be true or false, not a string"},
		"id number":            {`{"id":5}`, "id must be a string, not a number"},
		"bearer token boolean": {`{"bearer_token":true}`, "bearer_token must be a string, not a boolean"},
		"tools_allow a string": {`{"tools_allow":"echo"}`, "tools_allow must be an array of strings, not a string"},
		"tools_deny item null": {`{"toolsDeny":["a",null]}`, "tools_deny[1] must be a string, not null"},
		"both tools_allow":     {`{"tools_allow":["a"],"toolsAllow":["b"]}`, "tools_allow and toolsAllow are the same field"},
		"both tools_deny":      {`{"tools_deny":[],"toolsDeny":[]}`, "tools_deny and toolsDeny are the same field"},
		"tool_allow typo":      {`{"id":"a","tool_allow":["x"]}`, `unknown field "tool_allow": the fields are id, name, transport, command, args, working_dir, env, url, bearer_token, allow_insecure_http, enabled, timeout_ms, tools_allow, tools_deny`},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Server([]byte(c.body))
			if !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %q", err, c.msg)
			}
		})
	}
}

// The tool filters are read as arrays of strings under either spelling; what a pattern may
// be is mcpgateway's rule (serverconfig), so an empty or malformed one passes here.
func TestServerToolFilters(t *testing.T) {
	for name, c := range map[string]struct {
		body        string
		allow, deny []string
	}{
		"snake_case":           {`{"tools_allow":["echo","get-*"],"tools_deny":["get-env"]}`, []string{"echo", "get-*"}, []string{"get-env"}},
		"camelCase":            {`{"toolsAllow":["echo"],"toolsDeny":["[a"]}`, []string{"echo"}, []string{"[a"}},
		"wrapped, mixed":       {`{"server":{"toolsAllow":["e*"],"tools_deny":[""]}}`, []string{"e*"}, []string{""}},
		"absent":               {`{"id":"e"}`, nil, nil},
		"null is absent":       {`{"tools_allow":null,"toolsDeny":null}`, nil, nil},
		"empty arrays":         {`{"tools_allow":[],"tools_deny":[]}`, []string{}, []string{}},
		"state sent back":      {`{"id":"e","tools_allow":["a"],"tools":[{"name":"b"}],"status":"connected"}`, []string{"a"}, nil},
		"unicode kept as sent": {`{"tools_allow":["caf\u00e9*"]}`, []string{"café*"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			in, _, err := Server([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(in.GetToolsAllow(), c.allow) || !slices.Equal(in.GetToolsDeny(), c.deny) {
				t.Fatalf("allow %q deny %q, want %q %q", in.GetToolsAllow(), in.GetToolsDeny(), c.allow, c.deny)
			}
		})
	}
}

func TestPreset(t *testing.T) {
	p, _, err := Preset([]byte(`{"preset":{"id":"h","mcpServerIds":["lemonade"],"toolsEnabled":true,"systemPrompt":"Be brief."}}`))
	if err != nil || p.GetId() != "h" || p.GetSystemPrompt() != "Be brief." || len(p.GetMcpServerIds()) != 1 || !p.GetToolsEnabled() {
		t.Fatalf("%v %v", p, err)
	}
	if _, _, err := Preset([]byte(`{"id":"h","tool_list":[]}`)); !errors.Is(err, ErrPreset) || !strings.Contains(err.Error(), `unknown field "tool_list"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestPresetTools(t *testing.T) {
	p, mask, err := Preset([]byte(`{"id":"h","mcp_server_ids":["fs"],"tools":[{"tool":"mcp_fs__read","name":"read","description":"Read a file.","arguments":{"fixed":{"root":"/srv"},"defaults":{"limit":10}}},{"tool":"mcp_fs__rm","hidden":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ts := p.GetTools()
	if len(ts) != 2 || ts[0].GetName() != "read" || ts[0].GetArguments().GetFixed()["root"].GetStringValue() != "/srv" ||
		ts[0].GetArguments().GetDefaults()["limit"].GetNumberValue() != 10 || !ts[1].GetHidden() {
		t.Fatalf("tools = %v", ts)
	}
	for body, want := range map[string]string{
		`{"id":"h","tools":{}}`:                              "tools must be an array of objects",
		`{"id":"h","tools":[{"tool":"x","rename":"y"}]}`:     `tools[0]: unknown field "rename"; an item's members are tool, name, description, hidden, arguments`,
		`{"id":"h","tools":[{"tool":"x"},{"hidden":"yes"}]}`: `tools[1]: invalid value for bool field hidden: "yes"; an item's`,
		`{"id":"h","tools":[{"tool":"x","arguments":[]}]}`:   `tools[0]: syntax error: unexpected token [`,
	} {
		if _, _, err := Preset([]byte(body)); !errors.Is(err, ErrPreset) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", body, err, want)
		}
	}
	if got := strings.Join(mask.GetPaths(), ","); got != "id,mcp_server_ids,tools" {
		t.Errorf("mask = %s", got)
	}
	if _, mask, _ := Preset([]byte(`{"id":"h","tools":[]}`)); !slices.Contains(mask.GetPaths(), "tools") { // [] clears
		t.Errorf("an empty tools is not named: %v", mask)
	}
}

func TestCallTool(t *testing.T) {
	req := &mcpgatewayv1.CallToolRequest{Id: "srv"}
	if err := CallTool([]byte("{\n  \"name\": \"echo\",\n  \"arguments\": {\n    \"text\": \"pretty\"\n  },\n  \"timeoutMs\": 2000\n}"), req); err != nil {
		t.Fatal(err)
	}
	if req.GetId() != "srv" || req.GetName() != "echo" || req.GetTimeoutMs() != 2000 || req.GetArguments().GetFields()["text"].GetStringValue() != "pretty" {
		t.Fatalf("%v", req)
	}
	for name, c := range map[string]struct{ body, msg string }{
		"no name":          {`{"arguments":{}}`, "name is required"},
		"name number":      {`{"name":3}`, "name must be a string"},
		"arguments array":  {`{"name":"e","arguments":[1]}`, "arguments must be a JSON object, not an array"},
		"both spellings":   {`{"name":"e","timeout_ms":1000,"timeoutMs":1000}`, "the same field"},
		"timeout a string": {`{"name":"e","timeout_ms":"x"}`, "timeout_ms must be a number"},
	} {
		t.Run(name, func(t *testing.T) {
			err := CallTool([]byte(c.body), &mcpgatewayv1.CallToolRequest{})
			if !errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %q", err, c.msg)
			}
		})
	}
}

// FuzzServer: any body is read or refused with one of the package's errors, never a panic,
// and no decoder's own text (Go's json or protobuf wording) reaches the message.
func FuzzServer(f *testing.F) {
	for _, s := range []string{`{"id":"e","command":"node"}`, `{"server":{"url":"https://h/mcp","transport":"http"}}`,
		`{"timeoutMs":1e400}`, `{"env":{"A":"${B}"},"args":["\u0000"]}`, `{"id":"\xff"}`, `[]`, `null`, `{"server":null}`,
		`{"sandbox":true}`, `{"sandbox":{"maxPids":8,"writable_paths":["/x"],"memory_bytes":1e20}}`, `{"sandbox":{"x":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, read := range []func([]byte) (*mcpgatewayv1.ServerConfig, *fieldmaskpb.FieldMask, error){Server, ServerPatch} {
			in, mask, err := read(body)
			if err != nil {
				msg := err.Error()
				if !errors.Is(err, ErrServer) || strings.Contains(msg, "json:") || strings.Contains(msg, "proto:") || strings.Contains(msg, "Go ") {
					t.Fatalf("bad error %q", msg)
				}
				continue
			}
			if in == nil || mask == nil {
				t.Fatal("nil input without an error")
			}
		}
	})
}

// TestServerExpose: expose is read with presence (absent stays absent, for the default true),
// and a wrong type names the field.
func TestServerExpose(t *testing.T) {
	in, _, err := Server([]byte(`{"id":"e","command":"node"}`))
	if err != nil || in.Expose != nil {
		t.Fatalf("absent expose: %v, %v", in, err)
	}
	in, _, err = Server([]byte(`{"id":"e","command":"node","expose":false}`))
	if err != nil || in.Expose == nil || in.GetExpose() {
		t.Fatalf("expose false: %v, %v", in, err)
	}
	if _, _, err := Server([]byte(`{"id":"e","command":"node","expose":"no"}`)); err == nil || !strings.Contains(err.Error(), "expose") {
		t.Fatalf("expose of the wrong type: %v", err)
	}
}

func TestReason(t *testing.T) {
	for body, want := range map[string]string{"": "", "  \n": "", `{}`: "", `{"reason":"not on prod"}`: "not on prod"} {
		if got, err := Reason([]byte(body)); err != nil || got != want {
			t.Errorf("Reason(%q) = %q, %v; want %q", body, got, err, want)
		}
	}
	for body, msg := range map[string]string{
		`{"reason":1}`:           "reason must be a string, not a number",
		`{"reason":"x","why":1}`: `unknown field "why": a decision takes only reason`,
		`[]`:                     `the body must be a JSON object such as {"reason":"not on production"}`,
	} {
		if _, err := Reason([]byte(body)); !errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), msg) {
			t.Errorf("Reason(%q) = %v, want an error containing %q", body, err, msg)
		}
	}
}

func FuzzReason(f *testing.F) {
	for _, s := range []string{``, `{"reason":"x"}`, `{"reason":null}`, `{"a":1}`, `{"reason":"\ud800"}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := Reason(body); err != nil {
			msg := err.Error()
			if !errors.Is(err, ErrRequest) || strings.Contains(msg, "json:") || strings.Contains(msg, "Go ") {
				t.Fatalf("bad error %q", msg)
			}
		}
	})
}

// TestServerMask: the mask names the fields the body holds, by their snake_case names, a
// camelCase one folded, an empty list included; a null (absent) and a state field sent back
// are not named.
func TestServerMask(t *testing.T) {
	_, mask, err := Server([]byte(`{"server":{"id":"e","command":"node","toolsDeny":[],"rate_limit":"","expose":null,"status":"connected","sandbox":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(mask.GetPaths(), ","); got != "command,id,rate_limit,sandbox,tools_deny" {
		t.Fatalf("mask %s", got)
	}
}

// TestServerPatch: a merge patch names each member, a null to clear it; the sandbox member by
// member ("sandbox.network"), true or false as its enabled; an id is refused (the path's).
func TestServerPatch(t *testing.T) {
	in, mask, err := ServerPatch([]byte(`{"rateLimit":null,"tools_deny":[],"enabled":false,"sandbox":{"network":"host","writablePaths":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(mask.GetPaths(), ","); got != "enabled,rate_limit,sandbox.network,sandbox.writable_paths,tools_deny" {
		t.Fatalf("mask %s", got)
	}
	if in.RateLimit != nil || in.Enabled == nil || in.GetEnabled() || in.GetSandbox().GetNetwork() != "host" {
		t.Fatalf("patch %v", in)
	}
	if _, mask, err := ServerPatch([]byte(`{"server":{"sandbox":false}}`)); err != nil || strings.Join(mask.GetPaths(), ",") != "sandbox.enabled" {
		t.Fatalf("sandbox false: %v %v", mask, err)
	}
	if _, mask, err := ServerPatch([]byte(`{"sandbox":null}`)); err != nil || strings.Join(mask.GetPaths(), ",") != "sandbox" {
		t.Fatalf("sandbox null: %v %v", mask, err)
	}
	for body, msg := range map[string]string{
		`{"id":"x","enabled":true}`:   "id is the server's, from the path: leave it out of a PATCH body",
		`{}`:                          `the body is empty: send a server such as {"enabled":false}`,
		`{"enabled":"no"}`:            "enabled must be true or false, not a string",
		`{"rate_limits":"1/s"}`:       `unknown field "rate_limits"`,
		`{"sandbox":{"maxPids":1.5}}`: "sandbox.max_pids 1.5 must be a whole number from 0 to 2147483647",
	} {
		if _, _, err := ServerPatch([]byte(body)); !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", body, err, msg)
		}
	}
}

// TestEveryNumberHasAUnit: an integer field's errors say what it counts.
func TestEveryNumberHasAUnit(t *testing.T) {
	for _, fs := range []fieldSet{serverFields, sandboxFields} {
		fields := fs.md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if k := fd.Kind(); (k == protoreflect.Int32Kind || k == protoreflect.Int64Kind) && units[fd.FullName()] == "" {
				t.Errorf("%s has no unit in units", fd.FullName())
			}
		}
	}
}

// TestSandboxMemoryAsItIsShown: memory_bytes, a 64-bit number, is shown as protojson writes it
// (a string of digits) and read back so; any other string is refused naming the field.
func TestSandboxMemoryAsItIsShown(t *testing.T) {
	in, _, err := Server([]byte(`{"sandbox":{"memory_bytes":"1073741824"}}`))
	if err != nil || in.GetSandbox().GetMemoryBytes() != 1<<30 {
		t.Fatalf("%v %v", in, err)
	}
	if _, _, err := Server([]byte(`{"sandbox":{"memory_bytes":"1GB"}}`)); err == nil || !strings.Contains(err.Error(), "sandbox.memory_bytes must be a number of bytes (or a string of its decimal digits), not a string") {
		t.Fatalf("1GB: %v", err)
	}
}

func TestPinTools(t *testing.T) {
	for body, want := range map[string]string{"": "", `{}`: "", `{"tools":["echo","add"]}`: "echo,add", `{"tools":[]}`: ""} {
		if got, err := PinTools([]byte(body)); err != nil || strings.Join(got, ",") != want {
			t.Errorf("PinTools(%q) = %q, %v; want %q", body, got, err, want)
		}
	}
	for body, msg := range map[string]string{
		`{"tools":"echo"}`:  "tools must be",
		`{"tool":["echo"]}`: `unknown field "tool": a decision on held tools takes only tools`,
		`[]`:                `the body must be a JSON object such as {"tools":["echo"]}`,
	} {
		if _, err := PinTools([]byte(body)); !errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), msg) {
			t.Errorf("PinTools(%q) = %v, want an error containing %q", body, err, msg)
		}
	}
}

// TestOAuthBlock: the oauth block reads as an object of UpstreamOAuth's fields (camelCase
// aliases too); true, false or an unknown member is refused naming it.
func TestOAuthBlock(t *testing.T) {
	cfg, _, err := Server([]byte(`{"id":"h","url":"https://h/mcp","oauth":{"clientId":"zest","scopes":["a"],"grant":"client_credentials","client_secret":"${S}"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.GetOauth(); o.GetClientId() != "zest" || o.GetClientSecret() != "${S}" || o.GetGrant() != "client_credentials" || len(o.GetScopes()) != 1 {
		t.Fatalf("oauth = %v", o)
	}
	for body, want := range map[string]string{
		`{"id":"h","oauth":true}`:                             `oauth must be an object such as {"client_id":"zest","scopes":["read"]}`,
		`{"id":"h","oauth":{"secret":"x"}}`:                   `unknown field "secret" in oauth: its fields are client_id, client_secret, scopes, authorization_server, grant`,
		`{"id":"h","oauth":{"scopes":"a"}}`:                   "oauth.scopes must be an array of strings",
		`{"id":"h","oauth":{"client_id":"a","clientId":"b"}}`: "oauth.client_id and oauth.clientId are the same field",
	} {
		if _, _, err := Server([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", body, err, want)
		}
	}
}
