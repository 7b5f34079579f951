// Package adminjson reads the JSON bodies of Lemonade's admin routes (/internal/mcp/*) into
// the typed AdminService messages, at the edge: a bare object or one wrapped as
// {"server":{…}} / {"preset":{…}}, Lemonade's snake_case names with their camelCase aliases
// (both spellings at once are refused), read-only state fields sent back ignored, unknown
// fields refused (a typo is not silently dropped), and every type checked with a message that
// names the field. What the values mean (ids, transports, URLs, ranges, ${VAR} references) is
// checked by mcpgateway, for HTTP and gRPC callers alike.
package adminjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/zestmcp/zest/lib/jsonerr"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Errors wrap one of these, so that the edge answers 400.
var (
	ErrServer  = errors.New("invalid server config")
	ErrPreset  = errors.New("invalid preset")
	ErrRequest = errors.New("bad request")
)

// serverAliases maps each multi-word server field to its camelCase spelling.
var serverAliases = map[string]string{
	"working_dir": "workingDir", "bearer_token": "bearerToken",
	"allow_insecure_http": "allowInsecureHttp", "timeout_ms": "timeoutMs",
	"tools_allow": "toolsAllow", "tools_deny": "toolsDeny", "tool_host": "toolHost",
	"max_output_bytes": "maxOutputBytes", "approval_tools": "approvalTools",
	"approval_by": "approvalBy", "rate_limit": "rateLimit", "max_concurrency": "maxConcurrency",
}

var serverFields = []string{"id", "name", "transport", "command", "args", "working_dir", "env", "url",
	"bearer_token", "allow_insecure_http", "enabled", "timeout_ms", "tools_allow", "tools_deny", "expose", "tool_host", "max_output_bytes",
	"approval", "approval_tools", "approval_by", "sandbox", "rate_limit", "max_concurrency"}

// serverStateFields are read-only fields of a server state: a client that sends a state back
// (as Lemonade's GUI does when it edits a server) is not refused for them.
var serverStateFields = []string{"status", "connected", "last_error", "protocol_version", "server_info",
	"capabilities", "tools", "test_only", "process", "placement"}

var presetAliases = map[string]string{"system_prompt": "systemPrompt", "mcp_server_ids": "mcpServerIds", "tools_enabled": "toolsEnabled"}

var presetFields = []string{"id", "name", "model", "system_prompt", "mcp_server_ids", "tools_enabled"}

// Server reads a server config body (POST /internal/mcp/servers and /servers/test) and the
// mask of the fields it names (their snake_case names, sorted; a null is not named: it means
// absent), so that an upsert tells a field sent empty from one left out.
func Server(body []byte) (*mcpgatewayv1.ServerConfig, *fieldmaskpb.FieldMask, error) {
	f, err := fold(body, ErrServer, "server", `{"id":"echo","command":"node","args":["server.js"]}`, serverAliases, serverFields, serverStateFields)
	if err != nil {
		return nil, nil, err
	}
	r := reader{f: f, kind: ErrServer}
	in := &mcpgatewayv1.ServerConfig{
		Id: value(r.str("id")), Name: value(r.str("name")), Transport: value(r.str("transport")), Command: value(r.str("command")),
		Args: r.strs("args"), WorkingDir: value(r.str("working_dir")), Env: r.strMap("env"), Url: value(r.str("url")),
		BearerToken: value(r.str("bearer_token")), AllowInsecureHttp: value(r.boolean("allow_insecure_http")),
		Enabled: r.boolean("enabled"), TimeoutMs: r.whole32("timeout_ms", "milliseconds"),
		ToolsAllow: r.strs("tools_allow"), ToolsDeny: r.strs("tools_deny"), Expose: r.boolean("expose"),
		ToolHost: r.str("tool_host"), MaxOutputBytes: r.whole32("max_output_bytes", "bytes"),
		Approval: r.str("approval"), ApprovalTools: r.strs("approval_tools"), ApprovalBy: r.str("approval_by"),
		RateLimit: r.str("rate_limit"), MaxConcurrency: r.whole32("max_concurrency", "tool calls"),
	}
	in.Sandbox = r.sandbox("sandbox")
	if r.err != nil {
		return nil, nil, r.err
	}
	mask := &fieldmaskpb.FieldMask{}
	for k := range f {
		if _, ok := r.get(k); ok && slices.Contains(serverFields, k) {
			mask.Paths = append(mask.Paths, k)
		}
	}
	sort.Strings(mask.Paths)
	return in, mask, nil
}

// value is *p, or the zero value when p is nil (a field without presence).
func value[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Preset reads a preset body (POST /internal/mcp/presets).
func Preset(body []byte) (*mcpgatewayv1.PresetInput, error) {
	f, err := fold(body, ErrPreset, "preset", `{"id":"helper","model":"builtin-llm","mcp_server_ids":["lemonade"]}`, presetAliases, presetFields, nil)
	if err != nil {
		return nil, err
	}
	r := reader{f: f, kind: ErrPreset}
	p := &mcpgatewayv1.PresetInput{
		Id: r.str("id"), Name: r.str("name"), Model: r.str("model"), SystemPrompt: r.str("system_prompt"),
		McpServerIds: r.strs("mcp_server_ids"), ToolsEnabled: r.boolean("tools_enabled"),
	}
	return p, r.err
}

// CallTool reads a tool call body ({"name":…, "arguments":{…}, "timeout_ms":…}) into req; the
// server id comes from the path. Fields other than these are ignored.
func CallTool(body []byte, req *mcpgatewayv1.CallToolRequest) error {
	f, err := object(body, ErrRequest, `{"name":"echo","arguments":{}}`)
	if err != nil {
		return err
	}
	if err := alias(f, ErrRequest, "timeout_ms", "timeoutMs"); err != nil {
		return err
	}
	r := reader{f: f, kind: ErrRequest}
	name := r.str("name")
	req.TimeoutMs = r.whole32("timeout_ms", "milliseconds")
	if r.err != nil {
		return r.err
	}
	if name == nil || *name == "" {
		return fmt.Errorf("%w: name is required: the tool to call, as a string", ErrRequest)
	}
	req.Name = *name
	req.Arguments = nil
	if raw, ok := r.get("arguments"); ok {
		if raw[0] != '{' {
			return fmt.Errorf("%w: arguments must be a JSON object, not %s", ErrRequest, jsonerr.KindOfRaw(raw))
		}
		st := &structpb.Struct{}
		if err := protojson.Unmarshal(raw, st); err != nil {
			return fmt.Errorf("%w: arguments must be a JSON object of JSON values", ErrRequest)
		}
		req.Arguments = st
	}
	return nil
}

// object reads a JSON object whose members stay raw.
func object(body []byte, kindErr error, example string) (map[string]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	var f map[string]json.RawMessage
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &f) != nil {
		return nil, fmt.Errorf("%w: the body must be a JSON object such as %s", kindErr, example)
	}
	return f, nil
}

// alias folds camel into snake, refusing both at once.
func alias(f map[string]json.RawMessage, kindErr error, snake, camel string) error {
	v, ok := f[camel]
	if !ok {
		return nil
	}
	if _, both := f[snake]; both {
		return fmt.Errorf("%w: %s and %s are the same field: send one of them", kindErr, snake, camel)
	}
	f[snake] = v
	delete(f, camel)
	return nil
}

// fold reads a body bare or wrapped as {"<wrapper>":{…}}, folds the camelCase aliases and
// refuses fields outside known (and ignored).
func fold(body []byte, kindErr error, wrapper, example string, aliases map[string]string, known, ignored []string) (map[string]json.RawMessage, error) {
	f, err := object(body, kindErr, example)
	if err != nil {
		return nil, err
	}
	if w, ok := f[wrapper]; ok {
		if len(f) != 1 {
			return nil, fmt.Errorf(`%w: send the %s bare or wrapped as {"%s":{…}}, not both`, kindErr, wrapper, wrapper)
		}
		w = bytes.TrimSpace(w)
		f = nil
		if len(w) == 0 || w[0] != '{' || json.Unmarshal(w, &f) != nil {
			return nil, fmt.Errorf("%w: %s must be an object", kindErr, wrapper)
		}
	}
	if len(f) == 0 {
		return nil, fmt.Errorf("%w: the body is empty: send a %s such as %s", kindErr, wrapper, example)
	}
	snakes := make([]string, 0, len(aliases))
	for snake := range aliases {
		snakes = append(snakes, snake)
	}
	sort.Strings(snakes)
	for _, snake := range snakes {
		if err := alias(f, kindErr, snake, aliases[snake]); err != nil {
			return nil, err
		}
	}
	var unknown []string
	for k := range f {
		if !slices.Contains(known, k) && !slices.Contains(ignored, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		for i, k := range unknown {
			unknown[i] = strconv.Quote(k) // a name may be empty or hold any character
		}
		return nil, fmt.Errorf("%w: unknown field %s: the fields are %s", kindErr, strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return f, nil
}

// reader reads typed fields, keeping the first error; null means absent.
type reader struct {
	f    map[string]json.RawMessage
	kind error
	err  error
}

func (r *reader) fail(field, want string, raw json.RawMessage) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s must be %s, not %s", r.kind, field, want, jsonerr.KindOfRaw(raw))
	}
}

func (r *reader) get(k string) (json.RawMessage, bool) {
	raw, ok := r.f[k]
	raw = bytes.TrimSpace(raw)
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

func (r *reader) str(k string) *string {
	raw, ok := r.get(k)
	if !ok {
		return nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		r.fail(k, "a string", raw)
		return nil
	}
	return &s
}

func (r *reader) strs(k string) []string {
	raw, ok := r.get(k)
	if !ok {
		return nil
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		r.fail(k, "an array of strings", raw)
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		var s string
		if it = bytes.TrimSpace(it); len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &s) != nil {
			r.fail(fmt.Sprintf("%s[%d]", k, i), "a string", it)
			return nil
		}
		out = append(out, s)
	}
	return out
}

func (r *reader) strMap(k string) map[string]string {
	raw, ok := r.get(k)
	if !ok {
		return nil
	}
	var items map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &items) != nil {
		r.fail(k, `an object of "NAME": "${VAR}" pairs`, raw)
		return nil
	}
	names := make([]string, 0, len(items))
	for name := range items {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(map[string]string, len(items))
	for _, name := range names {
		it := bytes.TrimSpace(items[name])
		var s string
		if len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &s) != nil {
			r.fail(k+"."+name, `a string such as "${VAR}"`, it)
			return nil
		}
		out[name] = s
	}
	return out
}

func (r *reader) boolean(k string) *bool {
	raw, ok := r.get(k)
	if !ok {
		return nil
	}
	var b bool
	if (raw[0] != 't' && raw[0] != 'f') || json.Unmarshal(raw, &b) != nil {
		r.fail(k, "true or false", raw)
		return nil
	}
	return &b
}

// whole32 reads a whole number of unit ("bytes", "milliseconds", "tool calls") that fits an
// int32, negative ones too: mcpgateway checks the range, with a message that says it.
func (r *reader) whole32(k, unit string) *int32 {
	raw, ok := r.get(k)
	if !ok {
		return nil
	}
	var x float64
	if json.Unmarshal(raw, &x) != nil { // only a JSON number decodes into a float64
		r.fail(k, "a number of "+unit, raw)
		return nil
	}
	if x != math.Trunc(x) || x < math.MinInt32 || x > math.MaxInt32 {
		r.setErr(fmt.Errorf("%w: %s %v must be a whole number of %s", r.kind, k, x, unit))
		return nil
	}
	v := int32(x)
	return &v
}

// Reason reads an approval decision body (POST /internal/mcp/approvals/{id}/approve or /deny):
// empty, or {"reason": "…"}; other fields are refused, so that a misspelt one is not lost.
func Reason(body []byte) (string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil
	}
	f, err := object(body, ErrRequest, `{"reason":"not on production"}`)
	if err != nil {
		return "", err
	}
	for k := range f {
		if k != "reason" {
			return "", fmt.Errorf("%w: unknown field %.40q: a decision takes only reason (or an empty body)", ErrRequest, k)
		}
	}
	r := reader{f: f, kind: ErrRequest}
	s := r.str("reason")
	if r.err != nil || s == nil {
		return "", r.err
	}
	return *s, nil
}
