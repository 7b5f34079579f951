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

// serverExample and patchExample are what an empty or malformed server body is told to send.
const (
	serverExample = `{"id":"echo","command":"node","args":["server.js"]}`
	patchExample  = `{"enabled":false}`
)

// Server reads a server config body (POST /internal/mcp/servers and /servers/test) and the
// mask of the fields it names (their snake_case names, sorted; a null is not named: it means
// absent), so that an upsert tells a field sent empty from one left out.
func Server(body []byte) (*mcpgatewayv1.ServerConfig, *fieldmaskpb.FieldMask, error) {
	return readServer(body, false)
}

// ServerPatch reads the body of PATCH /internal/mcp/servers/{id}, a JSON merge patch of a server
// config (RFC 7396; bare or wrapped as {"server":{…}}), and the mask UpdateServer applies: each
// member names its field, a null one to clear (its default); the sandbox's members are named
// one by one ("sandbox.network"), true or false as "sandbox.enabled". The id is the path's: a
// body that names one is refused.
func ServerPatch(body []byte) (*mcpgatewayv1.ServerConfig, *fieldmaskpb.FieldMask, error) {
	return readServer(body, true)
}

func readServer(body []byte, patch bool) (*mcpgatewayv1.ServerConfig, *fieldmaskpb.FieldMask, error) {
	example := serverExample
	if patch {
		example = patchExample
	}
	f, err := fold(body, ErrServer, "server", example, serverFields.aliases, serverFields.names, serverStateFields)
	if err != nil {
		return nil, nil, err
	}
	if _, ok := f["id"]; ok && patch {
		return nil, nil, fmt.Errorf("%w: id is the server's, from the path: leave it out of a PATCH body (a server keeps its id)", ErrServer)
	}
	r := reader{f: f, kind: ErrServer}
	in := &mcpgatewayv1.ServerConfig{}
	paths := r.message(in.ProtoReflect(), patch)
	if r.err != nil {
		return nil, nil, r.err
	}
	return in, &fieldmaskpb.FieldMask{Paths: paths}, nil
}

// Preset reads a preset body (POST /internal/mcp/presets), and the mask of the fields it
// names: "tools": [] clears a preset's tools, where leaving tools out keeps them.
func Preset(body []byte) (*mcpgatewayv1.PresetInput, *fieldmaskpb.FieldMask, error) {
	f, err := fold(body, ErrPreset, "preset", `{"id":"helper","model":"builtin-llm","mcp_server_ids":["lemonade"]}`, presetFields.aliases, presetFields.names, nil)
	if err != nil {
		return nil, nil, err
	}
	r := reader{f: f, kind: ErrPreset}
	p := &mcpgatewayv1.PresetInput{}
	paths := r.message(p.ProtoReflect(), false)
	if r.err != nil {
		return nil, nil, r.err
	}
	return p, &fieldmaskpb.FieldMask{Paths: paths}, nil
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

// PinTools reads a decision body on held tool definitions (POST
// /internal/mcp/servers/{server_id}/pins/accept or /refuse): empty, or {"tools": ["…"]}
// naming the held tools to decide (none: every pending one of the server); other fields are
// refused, so that a misspelt one is not lost.
func PinTools(body []byte) ([]string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	f, err := object(body, ErrRequest, `{"tools":["echo"]}`)
	if err != nil {
		return nil, err
	}
	for k := range f {
		if k != "tools" {
			return nil, fmt.Errorf("%w: unknown field %.40q: a decision on held tools takes only tools (or an empty body: every pending one)", ErrRequest, k)
		}
	}
	r := reader{f: f, kind: ErrRequest}
	tools := r.strs("tools")
	return tools, r.err
}
