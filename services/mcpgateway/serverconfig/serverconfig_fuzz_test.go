package serverconfig

import (
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/zestmcp/zest/lib/adminjson"
	"github.com/zestmcp/zest/lib/envref"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// FuzzServerConfig feeds any body to the admin API's way in — the edge's reading
// (lib/adminjson) then Parse — : nothing panics, every error names a field, and an accepted
// config keeps every rule (checkParsed).
//
//	go test -run '^$' -fuzz '^FuzzServerConfig$' -fuzztime 60s ./serverconfig/
func FuzzServerConfig(f *testing.F) {
	for _, s := range []string{
		`{"id":"echo","command":"node","args":["echo.js"]}`,
		`{"server":{"id":"echo","command":"node"}}`,
		`{"name":"My Echo!","command":"node","workingDir":"/tmp","timeoutMs":5000}`,
		`{"command":"/usr/local/bin/Server_Everything","env":{"GITHUB_TOKEN":"${GH_TOKEN}"}}`,
		`{"id":"h","transport":"http","url":"http://127.0.0.1:9000/mcp","bearer_token":"${TOKEN}"}`,
		`{"transport":"streamable-http","url":"http://tools.lan/mcp","allow_insecure_http":true}`,
		`{"id":"a","command":"x","env":{"GITHUB_TOKEN":"ghp_123"},"timeout_ms":1500.5}`,
		`{"id":"a","transport":"http","url":"https://user:pw@h/mcp#x","bearer_token":"sk-123"}`,
		`{"id":"a","command":"x","timeout_ms":2000,"timeoutMs":3000,"status":"connected","tools":[]}`,
		`{"server":{},"id":"b"}`, `{"server":"a"}`, `{}`, `{"id":null,"name":null,"command":"x"}`,
		`{"id":"e","command":"x","tools_allow":["echo","get-*"],"toolsDeny":["[a","",null]}`,
		`{"id":"e","command":"x","toolsAllow":["[^a-c]?\\*"],"tools_deny":"x"}`,
		`{"id":"s","command":"x","sandbox":true}`,
		`{"id":"s","command":"x","sandbox":{"network":"host","writable_paths":["/var/lib/s"],"memoryBytes":1073741824}}`,
		`{"id":"s","command":"x","sandbox":{"writable_paths":["tmp"],"max_pids":1,"open_files":"x","bogus":1}}`,
		`{"id":"s","transport":"http","url":"https://h/mcp","sandbox":false}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, _, err := adminjson.Server(data)
		if err != nil {
			checkParsed(t, nil, err)
			return
		}
		cfg, err := Parse(in, func(id string) bool { return id == "echo" || id == "server" || id == "server-2" })
		checkParsed(t, cfg, err)
	})
}

// fieldNames are the names an error may lead with: the config's fields and their camelCase
// spellings, and the wrapper.
var fieldNames = []string{"server", "id", "name", "transport", "command", "args", "working_dir", "env", "url",
	"bearer_token", "allow_insecure_http", "enabled", "timeout_ms", "tools_allow", "tools_deny",
	"sandbox", "workingDir", "bearerToken", "allowInsecureHttp", "timeoutMs", "toolsAllow", "toolsDeny"}

// checkParsed holds the fuzz target's checks of one Parse result.
func checkParsed(t *testing.T, cfg *mcpgatewayv1.ServerConfig, err error) {
	t.Helper()
	if err != nil {
		msg, ok := strings.CutPrefix(err.Error(), ErrInvalid.Error()+": ") // both layers say "invalid server config"
		if !ok || !(errors.Is(err, ErrInvalid) || errors.Is(err, adminjson.ErrServer)) || cfg != nil {
			t.Fatalf("error %q (config %v): want ErrInvalid and no config", err, cfg)
		}
		if !utf8.ValidString(msg) {
			t.Fatalf("error %q is not UTF-8", msg)
		}
		if !namesField(msg) {
			t.Fatalf("error %q names no field", msg)
		}
		return
	}
	if !IDPattern.MatchString(cfg.GetId()) || cfg.GetName() == "" {
		t.Fatalf("accepted config has id %q, name %q", cfg.GetId(), cfg.GetName())
	}
	if cfg.GetTimeoutMs() < MinTimeoutMs || cfg.GetTimeoutMs() > MaxTimeoutMs {
		t.Fatalf("accepted config has timeout_ms %d", cfg.GetTimeoutMs())
	}
	for field, ps := range map[string][]string{FieldToolsAllow: cfg.GetToolsAllow(), FieldToolsDeny: cfg.GetToolsDeny()} {
		if len(ps) > MaxToolPatterns {
			t.Fatalf("accepted config has %d %s patterns", len(ps), field)
		}
		for _, p := range ps {
			if _, err := path.Match(p, ""); err != nil || p == "" || utf8.RuneCountInString(p) > MaxToolPatternLength {
				t.Fatalf("accepted config has %s pattern %q", field, p)
			}
		}
	}
	for k, v := range cfg.GetEnv() {
		if _, err := envref.Variable(v); err != nil {
			t.Fatalf("accepted config has env %s = %q", k, v)
		}
	}
	if tok := cfg.GetBearerToken(); tok != "" {
		if _, err := envref.Variable(tok); err != nil {
			t.Fatalf("accepted config has bearer_token %q", tok)
		}
	}
	switch cfg.GetTransport() {
	case TransportStdio:
		if strings.TrimSpace(cfg.GetCommand()) == "" || cfg.GetUrl() != "" {
			t.Fatalf("accepted stdio config has command %q, url %q", cfg.GetCommand(), cfg.GetUrl())
		}
	case TransportHTTP:
		if CheckURL(cfg.GetUrl(), cfg.GetAllowInsecureHttp()) != nil || cfg.GetCommand() != "" || len(cfg.GetEnv()) > 0 {
			t.Fatalf("accepted streamable-http config has url %q, command %q, env %v", cfg.GetUrl(), cfg.GetCommand(), cfg.GetEnv())
		}
	default:
		t.Fatalf("accepted config has transport %q", cfg.GetTransport())
	}
}

// namesField reports whether an error message names the field it is about: it starts with
// the field ("url must…", "args[1] must…", "env.K must…"), or refuses fields by their quoted
// names (`unknown field "x"`: a name may be empty or hold any character), or the wrapper
// sent with bare fields, or asks for the missing body.
func namesField(msg string) bool {
	for _, prefix := range []string{`unknown field "`, "send the server bare", "the body is empty: send a server",
		"the body must be a JSON object", "the server is missing"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return slices.ContainsFunc(fieldNames, func(f string) bool {
		rest, ok := strings.CutPrefix(msg, f)
		return ok && rest != "" && strings.ContainsRune(" [.", rune(rest[0]))
	})
}
