// Package serverconfig reads the server configs that admins send to /internal/mcp/servers:
// a bare object or {"server":{…}}, Lemonade's field names (snake_case, with camelCase
// aliases for multi-word fields), every rule of DESIGN.md checked with a message that names
// the field, and the id derived when missing.
package serverconfig

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/zestmcp/zest/lib/envref"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// Transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "streamable-http"
)

// Limits of timeout_ms.
const (
	MinTimeoutMs     = 1000
	MaxTimeoutMs     = 300000
	DefaultTimeoutMs = 30000
)

// ErrInvalid wraps every validation failure.
var ErrInvalid = errors.New("invalid server config")

// IDPattern is the shape of a server id.
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,96}$`)

// aliases maps each multi-word field to its camelCase spelling.
var aliases = map[string]string{
	"working_dir": "workingDir", "bearer_token": "bearerToken",
	"allow_insecure_http": "allowInsecureHttp", "timeout_ms": "timeoutMs",
}

var known = []string{"id", "name", "transport", "command", "args", "working_dir", "env", "url",
	"bearer_token", "allow_insecure_http", "enabled", "timeout_ms"}

// stateFields are read-only fields of a server state; a client that sends a state back is
// not refused for them.
var stateFields = []string{"status", "connected", "last_error", "protocol_version", "server_info",
	"capabilities", "tools", "test_only"}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Parse reads a config from body. taken reports whether an id is already used, for deriving
// a missing id; it is not consulted when the body names an id.
func Parse(body *structpb.Struct, taken func(id string) bool) (*mcpgatewayv1.ServerConfig, error) {
	f, err := fold(body, "server", `{"id":"echo","command":"node","args":["server.js"]}`, aliases, known, stateFields)
	if err != nil {
		return nil, err
	}
	r := reader{f: f}
	cfg := &mcpgatewayv1.ServerConfig{
		Id: r.str("id"), Name: r.str("name"), Transport: r.str("transport"), Command: r.str("command"),
		Args: r.strs("args"), WorkingDir: r.str("working_dir"), Env: r.strMap("env"), Url: r.str("url"),
		BearerToken: r.str("bearer_token"), AllowInsecureHttp: r.boolean("allow_insecure_http", false),
		Enabled: r.boolean("enabled", true), TimeoutMs: r.timeout(),
	}
	if r.err != nil {
		return nil, r.err
	}
	switch strings.ToLower(cfg.GetTransport()) {
	case "", TransportStdio:
		cfg.Transport = TransportStdio
	case TransportHTTP, "http", "streamable_http", "streamablehttp":
		cfg.Transport = TransportHTTP
	default:
		return nil, invalid("transport %q: use stdio or streamable-http (alias http)", cfg.GetTransport())
	}
	if err := checkTransportFields(cfg, f); err != nil {
		return nil, err
	}
	if err := envref.Check("env", cfg.GetEnv()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if t := cfg.GetBearerToken(); t != "" {
		if _, err := envref.Variable(t); err != nil {
			return nil, fmt.Errorf("%w: bearer_token %w", ErrInvalid, err)
		}
	}
	if cfg.GetTransport() == TransportHTTP {
		if err := CheckURL(cfg.GetUrl(), cfg.GetAllowInsecureHttp()); err != nil {
			return nil, err
		}
	}
	if cfg.GetId() == "" {
		cfg.Id = DeriveID(cfg, taken)
	} else if !IDPattern.MatchString(cfg.GetId()) {
		return nil, invalid("id %q must match [A-Za-z0-9_.-]{1,96}", truncate(cfg.GetId(), 120))
	}
	if cfg.GetName() == "" {
		cfg.Name = cfg.GetId()
	}
	return cfg, nil
}

// fold reads an admin body: bare or wrapped as {"<wrapper>":{…}}, camelCase aliases folded
// into snake_case (both spellings refused), fields outside known (and ignored) refused.
func fold(body *structpb.Struct, wrapper, example string, aliases map[string]string, known, ignored []string) (map[string]*structpb.Value, error) {
	fields := body.GetFields()
	if w, ok := fields[wrapper]; ok {
		if len(fields) != 1 {
			return nil, invalid(`send the %s bare or wrapped as {"%s":{…}}, not both`, wrapper, wrapper)
		}
		if fields = w.GetStructValue().GetFields(); fields == nil {
			return nil, invalid("%s must be an object", wrapper)
		}
	}
	if len(fields) == 0 {
		return nil, invalid("the body is empty: send a %s such as %s", wrapper, example)
	}
	f := make(map[string]*structpb.Value, len(fields))
	for k, v := range fields {
		f[k] = v
	}
	for snake, camel := range aliases {
		if v, ok := f[camel]; ok {
			if _, both := f[snake]; both {
				return nil, invalid("%s and %s are the same field: send one of them", snake, camel)
			}
			f[snake] = v
			delete(f, camel)
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
		return nil, invalid("unknown field %s: the fields are %s", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return f, nil
}

func checkTransportFields(cfg *mcpgatewayv1.ServerConfig, f map[string]*structpb.Value) error {
	present := func(k string) bool { _, ok := f[k]; return ok }
	if cfg.GetTransport() == TransportStdio {
		for _, k := range []string{"url", "bearer_token", "allow_insecure_http"} {
			if present(k) {
				return invalid("%s is a streamable-http field; this server's transport is stdio (set transport to streamable-http, or remove %s)", k, k)
			}
		}
		if strings.TrimSpace(cfg.GetCommand()) == "" {
			return invalid("command is required for a stdio server: the program that runs it, e.g. npx or node")
		}
		return nil
	}
	for _, k := range []string{"command", "args", "working_dir", "env"} {
		if present(k) {
			return invalid("%s is a stdio field; this server's transport is streamable-http (remove %s)", k, k)
		}
	}
	if cfg.GetUrl() == "" {
		return invalid("url is required for a streamable-http server, e.g. https://host/mcp")
	}
	return nil
}

// CheckURL applies the rules for upstream URLs: http or https, no credentials or fragment,
// plain http only to loopback unless allowInsecure.
func CheckURL(raw string, allowInsecure bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return invalid("url %q is not an absolute URL such as https://host/mcp", truncate(raw, 200))
	}
	if u.User != nil {
		return invalid("url must not contain credentials: use bearer_token with a ${VARIABLE} reference")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return invalid("url must not contain a fragment (#…)")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowInsecure && !isLoopback(u.Hostname()) {
			// The host is percent-decoded, so it may hold bytes that are not UTF-8.
			return invalid("url uses plain http to %s: use https, or set allow_insecure_http to true", strings.ToValidUTF8(u.Hostname(), "\uFFFD"))
		}
	default:
		return invalid("url scheme %q: use https (or http to loopback)", u.Scheme)
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

var nonIDRun = regexp.MustCompile(`[^a-z0-9]+`)

// DeriveID makes an id from the name, else the command's basename (else the URL's host):
// lowercase, other runs of characters as "-", at most 64 characters, then -2, -3, … while
// taken.
func DeriveID(cfg *mcpgatewayv1.ServerConfig, taken func(string) bool) string {
	src := cfg.GetName()
	if src == "" && cfg.GetCommand() != "" {
		src = filepath.Base(cfg.GetCommand())
	}
	if src == "" {
		if u, err := url.Parse(cfg.GetUrl()); err == nil {
			src = u.Hostname()
		}
	}
	return deriveID(src, taken)
}

// deriveID makes an id from src: lowercase, other runs as "-", at most 64, then -2, -3, ….
func deriveID(src string, taken func(string) bool) string {
	base := strings.Trim(nonIDRun.ReplaceAllString(strings.ToLower(src), "-"), "-")
	if len(base) > 64 {
		base = strings.Trim(base[:64], "-")
	}
	if base == "" {
		base = "server"
	}
	if taken == nil || !taken(base) {
		return base
	}
	for n := 2; ; n++ {
		id := fmt.Sprintf("%s-%d", base, n)
		if !taken(id) {
			return id
		}
	}
}

// truncate cuts s to at most n bytes, between characters, and marks the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// reader reads typed fields, keeping the first error.
type reader struct {
	f   map[string]*structpb.Value
	err error
}

func kind(v *structpb.Value) string {
	switch v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return "a string"
	case *structpb.Value_NumberValue:
		return "a number"
	case *structpb.Value_BoolValue:
		return "a boolean"
	case *structpb.Value_ListValue:
		return "an array"
	case *structpb.Value_StructValue:
		return "an object"
	case *structpb.Value_NullValue:
		return "null"
	}
	return "unknown"
}

func (r *reader) fail(field, want string, v *structpb.Value) {
	if r.err == nil {
		r.err = invalid("%s must be %s, not %s", field, want, kind(v))
	}
}

func (r *reader) get(k string) (*structpb.Value, bool) {
	v, ok := r.f[k]
	if ok {
		if _, null := v.GetKind().(*structpb.Value_NullValue); null {
			return nil, false // null means unset
		}
	}
	return v, ok
}

func (r *reader) str(k string) string {
	v, ok := r.get(k)
	if !ok {
		return ""
	}
	s, isStr := v.GetKind().(*structpb.Value_StringValue)
	if !isStr {
		r.fail(k, "a string", v)
		return ""
	}
	return s.StringValue
}

func (r *reader) strs(k string) []string {
	v, ok := r.get(k)
	if !ok {
		return nil
	}
	l := v.GetListValue()
	if l == nil {
		r.fail(k, "an array of strings", v)
		return nil
	}
	out := make([]string, 0, len(l.GetValues()))
	for i, e := range l.GetValues() {
		s, isStr := e.GetKind().(*structpb.Value_StringValue)
		if !isStr {
			r.fail(fmt.Sprintf("%s[%d]", k, i), "a string", e)
			return nil
		}
		out = append(out, s.StringValue)
	}
	return out
}

func (r *reader) strMap(k string) map[string]string {
	v, ok := r.get(k)
	if !ok {
		return nil
	}
	m := v.GetStructValue()
	if m == nil {
		r.fail(k, `an object of "NAME": "${VAR}" pairs`, v)
		return nil
	}
	out := make(map[string]string, len(m.GetFields()))
	for name, e := range m.GetFields() {
		s, isStr := e.GetKind().(*structpb.Value_StringValue)
		if !isStr {
			r.fail(k+"."+name, `a string such as "${VAR}"`, e)
			return nil
		}
		out[name] = s.StringValue
	}
	return out
}

func (r *reader) boolean(k string, def bool) bool {
	v, ok := r.get(k)
	if !ok {
		return def
	}
	b, isBool := v.GetKind().(*structpb.Value_BoolValue)
	if !isBool {
		r.fail(k, "true or false", v)
		return def
	}
	return b.BoolValue
}

func (r *reader) timeout() int32 {
	v, ok := r.get("timeout_ms")
	if !ok {
		return DefaultTimeoutMs
	}
	n, isNum := v.GetKind().(*structpb.Value_NumberValue)
	if !isNum {
		r.fail("timeout_ms", "a number of milliseconds", v)
		return 0
	}
	x := n.NumberValue
	if x != math.Trunc(x) || x < MinTimeoutMs || x > MaxTimeoutMs {
		if r.err == nil {
			r.err = invalid("timeout_ms %v is out of range: use a whole number from %d to %d", x, MinTimeoutMs, MaxTimeoutMs)
		}
		return 0
	}
	return int32(x)
}
