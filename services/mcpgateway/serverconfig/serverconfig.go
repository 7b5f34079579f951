// Package serverconfig checks the server configs and presets that admins send (over HTTP the
// edge has read Lemonade's JSON shapes into the typed messages; over gRPC programs send them
// as they are): every rule of docs/dev/contracts.md with a message that names the field, the defaults,
// and the id derived when missing. It also decides which tools a server exposes (CheckTool,
// by its tools_allow and tools_deny), for every path that shows or runs them.
package serverconfig

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/zestmcp/zest/lib/envref"
	"github.com/zestmcp/zest/lib/ratelimit"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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

// Limits of max_output_bytes: the largest tools/call result of a server passed on whole. The
// upper bound is the gRPC message limit (grpcdial.DefaultMaxMessageBytes): a larger result
// could not cross the tool host's stream anyway.
const (
	MinMaxOutputBytes     = 1 << 10
	MaxMaxOutputBytes     = 40 << 20
	DefaultMaxOutputBytes = 1 << 20
)

// MaxMaxConcurrency bounds max_concurrency: more calls in flight than this is no limit.
const MaxMaxConcurrency = 1024

// parseLimits checks rate_limit and max_concurrency of cfg and stores them, the rate as
// ratelimit.Rate writes it. "" and 0 — what a server's state shows when it has none, and a
// client sends back — are no limit of the server's own, stored unset.
func parseLimits(cfg *mcpgatewayv1.ServerConfig) error {
	s := strings.TrimSpace(cfg.GetRateLimit())
	cfg.RateLimit = nil
	if s != "" {
		r, err := ratelimit.Parse(s)
		if err != nil {
			return invalid("rate_limit %q is not a rate: write %s for the tool calls of this server, all callers together, or leave it out for none", truncate(s, 40), ratelimit.Syntax)
		}
		cfg.RateLimit = proto.String(r.String())
	}
	if n := cfg.GetMaxConcurrency(); n != 0 {
		if n < 1 || n > MaxMaxConcurrency {
			return invalid("max_concurrency %d is out of range: use a whole number of tool calls in flight at once from 1 to %d, or 0 (or leave it out) for no limit", n, MaxMaxConcurrency)
		}
	} else {
		cfg.MaxConcurrency = nil
	}
	return nil
}

// ErrInvalid wraps every validation failure.
var ErrInvalid = errors.New("invalid server config")

// IDPattern is the shape of a server id.
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,96}$`)

// ToolHostPattern is the shape of a tool host's name (ZEST_TOOLHOST_NAME), which tool_host
// pins: the tool host's own check (services/toolhost/host.NamePattern) is the same.
var ToolHostPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,253}$`)

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// ReservedIDs cannot name a server: "lemonade" is the built-in provider of presets and chats.
var ReservedIDs = []string{LemonadeProvider}

// Parse checks a config an admin sent (over HTTP the edge has read Lemonade's JSON into in)
// and returns it as stored, with docs/dev/contracts.md's defaults: id, name, transport, enabled,
// timeout_ms and expose set; a Zest field set only when it holds something other than its
// default. Parse of a config as stored returns it unchanged. taken reports whether an id is
// already used, for deriving a missing id; it is not consulted when in names an id.
func Parse(in *mcpgatewayv1.ServerConfig, taken func(id string) bool) (*mcpgatewayv1.ServerConfig, error) {
	if in == nil {
		return nil, invalid(`the server is missing: send a server such as {"id":"echo","command":"node","args":["server.js"]}`)
	}
	cfg := proto.CloneOf(in)
	if cfg.Enabled == nil {
		cfg.Enabled = proto.Bool(true)
	}
	if cfg.Expose == nil {
		cfg.Expose = proto.Bool(true)
	}
	if cfg.TimeoutMs == nil {
		cfg.TimeoutMs = proto.Int32(DefaultTimeoutMs)
	} else if t := cfg.GetTimeoutMs(); t < MinTimeoutMs || t > MaxTimeoutMs {
		return nil, invalid("timeout_ms %d is out of range: use a whole number from %d to %d", t, MinTimeoutMs, MaxTimeoutMs)
	}
	if n := cfg.GetMaxOutputBytes(); n == 0 {
		cfg.MaxOutputBytes = nil // the operator's default
	} else if n < MinMaxOutputBytes || n > MaxMaxOutputBytes {
		return nil, invalid("max_output_bytes %d is out of range: use a whole number of bytes from %d (1 KiB) to %d (40 MiB, the gRPC message limit), or 0 (or leave it out) for the operator's default (ZEST_TOOL_OUTPUT_MAX_BYTES)", n, MinMaxOutputBytes, MaxMaxOutputBytes)
	}
	if err := parseLimits(cfg); err != nil {
		return nil, err
	}
	if err := checkToolPatterns(FieldToolsAllow, cfg.GetToolsAllow()); err != nil {
		return nil, err
	}
	if err := checkToolPatterns(FieldToolsDeny, cfg.GetToolsDeny()); err != nil {
		return nil, err
	}
	if err := parseApproval(cfg); err != nil {
		return nil, err
	}
	switch t := transportOf(cfg); t {
	case TransportStdio, TransportHTTP:
		cfg.Transport = t
	default:
		return nil, invalid("transport %q: use stdio or streamable-http (alias http)", truncate(cfg.GetTransport(), 40))
	}
	if cfg.GetToolHost() == "" {
		cfg.ToolHost = nil // placed by Zest
	}
	if err := checkTransportFields(cfg); err != nil {
		return nil, err
	}
	sb, err := parseSandbox(cfg.GetSandbox(), cfg.GetTransport())
	if err != nil {
		return nil, err
	}
	cfg.Sandbox = sb
	if err := envref.Check("env", cfg.GetEnv()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if t := cfg.GetBearerToken(); t != "" {
		if _, err := envref.Variable(t); err != nil {
			return nil, fmt.Errorf("%w: bearer_token %w", ErrInvalid, err)
		}
	}
	// Zest's own variables (its keys) are no server's: refused here, where the admin makes the
	// mistake, rather than when the tool host (env) or mcpgateway (bearer_token) resolves them.
	if err := errors.Join(envref.CheckEnvNotReserved(cfg.GetEnv()),
		envref.CheckNotReserved("bearer_token", cfg.GetBearerToken(), "MCP_BEARER_TOKEN", "mcpgateway's environment")); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if cfg.GetTransport() == TransportHTTP {
		if err := CheckURL(cfg.GetUrl(), cfg.GetAllowInsecureHttp()); err != nil {
			return nil, err
		}
	}
	if err := parseOAuth(cfg); err != nil {
		return nil, err
	}
	switch {
	case cfg.GetId() == "":
		cfg.Id = DeriveID(cfg, func(id string) bool {
			return slices.Contains(ReservedIDs, id) || (taken != nil && taken(id))
		})
	case !IDPattern.MatchString(cfg.GetId()):
		return nil, invalid("id %q must match [A-Za-z0-9_.-]{1,96}", truncate(cfg.GetId(), 120))
	case slices.Contains(ReservedIDs, strings.ToLower(cfg.GetId())):
		return nil, invalid("id %q is reserved for Zest's built-in tools (the lemonade provider): choose another id", cfg.GetId())
	}
	if cfg.GetName() == "" {
		cfg.Name = cfg.GetId()
	}
	return cfg, nil
}

// checkTransportFields refuses the fields of the other transport that say something: an
// empty string, list or map, or allow_insecure_http false, says nothing and is accepted on
// either.
func checkTransportFields(cfg *mcpgatewayv1.ServerConfig) error {
	if cfg.GetTransport() == TransportStdio {
		for _, f := range []struct {
			k       string
			present bool
		}{{"url", cfg.GetUrl() != ""}, {"bearer_token", cfg.GetBearerToken() != ""}, {"allow_insecure_http", cfg.GetAllowInsecureHttp()}} {
			if f.present {
				return invalid("%s is a streamable-http field; this server's transport is stdio (set transport to streamable-http, or remove %s)", f.k, f.k)
			}
		}
		if strings.TrimSpace(cfg.GetCommand()) == "" {
			return invalid("command is required for a stdio server: the program that runs it, e.g. npx or node")
		}
		if h := cfg.GetToolHost(); h != "" && !ToolHostPattern.MatchString(h) {
			return invalid("tool_host %q is not a tool host name: want the ZEST_TOOLHOST_NAME of one tool host (letters, digits, '.', '_' or '-', at most 253), or empty to let Zest place the server", truncate(h, 120))
		}
		return nil
	}
	for _, f := range []struct {
		k       string
		present bool
	}{{"command", cfg.GetCommand() != ""}, {"args", len(cfg.GetArgs()) > 0}, {"working_dir", cfg.GetWorkingDir() != ""}, {"env", len(cfg.GetEnv()) > 0}, {"tool_host", cfg.GetToolHost() != ""}} {
		if f.present {
			return invalid("%s is a stdio field; this server's transport is streamable-http (remove %s)", f.k, f.k)
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

// Field is the config field a validation error of this package names first (its message
// starts with it: "command is required…", "env A must be…", "tools_deny[2] is empty…"): a
// field of ServerConfig for ErrInvalid, of Preset for ErrInvalidPreset; "" when the error
// names none (a missing body). The admin API returns it as the error's param, so that a form
// shows the error next to that field.
func Field(err error) string {
	var msg string
	var fields protoreflect.FieldDescriptors
	switch {
	case errors.Is(err, ErrInvalid):
		msg, fields = err.Error(), (&mcpgatewayv1.ServerConfig{}).ProtoReflect().Descriptor().Fields()
	case errors.Is(err, ErrInvalidPreset):
		msg, fields = err.Error(), (&mcpgatewayv1.Preset{}).ProtoReflect().Descriptor().Fields()
	default:
		return ""
	}
	_, rest, ok := strings.Cut(msg, ": ")
	if !ok {
		return ""
	}
	name := rest[:strings.IndexFunc(rest+" ", func(r rune) bool { return r == ' ' || r == '[' || r == ':' || r == '.' })]
	if fields.ByName(protoreflect.Name(name)) == nil {
		return ""
	}
	return name
}
