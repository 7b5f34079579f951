package edge

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/oauthrs"
	"github.com/zestmcp/zest/lib/ratelimit"
	"github.com/zestmcp/zest/lib/service"
)

// EnvAllowedOrigins lists extra allowed browser origins, comma-separated, exact.
const EnvAllowedOrigins = "LEMONADE_ALLOWED_ORIGINS"

// Config is the edge's configuration; flag names map to ZEST_* variables.
type Config struct {
	service.Common
	// Addr is the HTTP listen address (ZEST_EDGE_ADDR).
	Addr string
	// McpgatewayAddr and InferenceAddr are the services behind the edge: each one address, a
	// comma-separated list of replicas or dns:///name:port (grpcdial.ParseTarget).
	McpgatewayAddr, InferenceAddr string
	// ToolhostAddr is the tool host whose health the edge shows.
	ToolhostAddr string
	// MaxBodyBytes caps /mcp and OpenAI request bodies (ZEST_MAX_BODY_BYTES).
	MaxBodyBytes int64
	// MaxAdminBodyBytes caps /internal/mcp/* request bodies (ZEST_MAX_ADMIN_BODY_BYTES).
	MaxAdminBodyBytes int64
	// BodyReadTimeout bounds the time a request's body may take to arrive, counted from the
	// end of its headers (ZEST_BODY_READ_TIMEOUT); past it the request gets 408 and its
	// connection is closed. It does not bound the response: see bodyDeadline.
	BodyReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for its next request
	// (ZEST_IDLE_TIMEOUT).
	IdleTimeout time.Duration
	// Keys are LEMONADE_API_KEY and LEMONADE_ADMIN_API_KEY.
	Keys keyauth.Keys
	// AllowedOrigins come from LEMONADE_ALLOWED_ORIGINS.
	AllowedOrigins []string
	// MetricsAddr serves GET /metrics on its own port (ZEST_EDGE_METRICS_ADDR; "off": none).
	MetricsAddr string
	// RateLimit is the rate of every API route per key, and per loopback address for callers
	// without one (ZEST_RATE_LIMIT, "N/s[:burst]" or "off"); ConcurrencyLimit their calls in
	// flight (ZEST_CONCURRENCY_LIMIT, 0: none); RateLimitKeys the rates of some keys
	// ("api=50/s,admin=off,3f2a9c1b0d4e=5/s"). AnonymousRateLimit and
	// AnonymousConcurrencyLimit are those of a caller without a key from another address, per
	// address (ZEST_ANONYMOUS_RATE_LIMIT, ZEST_ANONYMOUS_CONCURRENCY_LIMIT). See limits.go.
	RateLimit                 string
	ConcurrencyLimit          int
	RateLimitKeys             string
	AnonymousRateLimit        string
	AnonymousConcurrencyLimit int
	// RateLimitMaxCallers bounds the callers tracked at once (0: ratelimit.DefaultMaxKeys).
	RateLimitMaxCallers int
	// StreamsPerSession, StreamsPerKey and MaxStreams bound the MCP streams held open
	// (ZEST_STREAMS_PER_SESSION, ZEST_STREAMS_PER_KEY, ZEST_MAX_STREAMS; 0: DefaultMaxStreams
	// or what the open-file limit allows). See streams.go.
	StreamsPerSession, StreamsPerKey, MaxStreams int
	// AuthFailureLimit is how many wrong keys an address may present (ZEST_AUTH_FAILURE_LIMIT,
	// a rate with its burst, or "off"); past it, keys from that address are answered 429
	// unchecked (httpguard/failures.go).
	AuthFailureLimit string
	// OAuth makes the MCP endpoints take an issuer's access tokens beside the API key
	// (ZEST_OAUTH_ISSUER, ZEST_PUBLIC_URL, ZEST_OAUTH_SCOPE, ZEST_OAUTH_ADMIN_SCOPE; lib/oauthrs).
	OAuth oauthrs.Config
}

// DefaultAuthFailureLimit lets a person mistype a key many times over (30 at once, then one
// a second) and holds a guesser to 86 400 keys a day per address, where one edge answered
// about 8 000 wrong keys a second.
const DefaultAuthFailureLimit = "1/s:30"

// DefaultMetricsAddr is where the edge serves GET /metrics unless ZEST_EDGE_METRICS_ADDR says
// otherwise: its own port, never the API's (as Lemonade does).
const DefaultMetricsAddr = "127.0.0.1:13319"

// DefaultConfig binds loopback only.
func DefaultConfig() Config {
	return Config{
		Common: service.DefaultCommon(), Addr: "127.0.0.1:13305",
		McpgatewayAddr: "127.0.0.1:13311", InferenceAddr: "127.0.0.1:13310", ToolhostAddr: "127.0.0.1:13312",
		MaxBodyBytes: 32 << 20, MaxAdminBodyBytes: 1 << 20,
		BodyReadTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MetricsAddr: DefaultMetricsAddr,
		Keys: keyauth.FromEnv(nil), AllowedOrigins: splitList(os.Getenv(EnvAllowedOrigins)),
		RateLimit: DefaultRateLimit, ConcurrencyLimit: DefaultConcurrencyLimit,
		AnonymousRateLimit: DefaultAnonymousRateLimit, AnonymousConcurrencyLimit: DefaultAnonymousConcurrencyLimit,
		AuthFailureLimit: DefaultAuthFailureLimit, OAuth: oauthrs.DefaultConfig(), StreamsPerSession: DefaultStreamsPerSession, StreamsPerKey: DefaultStreamsPerKey,
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// RegisterFlags adds the edge's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Common.RegisterFlags(fs)
	fs.StringVar(&c.Addr, "edge-addr", c.Addr, "HTTP listen address of the edge")
	fs.StringVar(&c.McpgatewayAddr, "mcpgateway-addr", c.McpgatewayAddr, "mcpgateway: host:port, a comma-separated list of replicas, or dns:///name:port (calls go round robin to the healthy ones)")
	fs.StringVar(&c.InferenceAddr, "inference-addr", c.InferenceAddr, "the inference service: host:port, a comma-separated list of replicas, or dns:///name:port (calls go round robin to the healthy ones)")
	fs.StringVar(&c.ToolhostAddr, "toolhost-addr", c.ToolhostAddr, "the tool hosts, for health: host:port, a comma-separated list, or dns:///name:port (healthy while one of them serves)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", c.MaxBodyBytes, "largest /mcp or OpenAI request body")
	fs.Int64Var(&c.MaxAdminBodyBytes, "max-admin-body-bytes", c.MaxAdminBodyBytes, "largest /internal/mcp/* request body")
	fs.DurationVar(&c.BodyReadTimeout, "body-read-timeout", c.BodyReadTimeout, "longest time a request body may take to arrive (408 and the connection closed beyond)")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "close keep-alive connections idle this long")
	fs.StringVar(&c.RateLimit, "rate-limit", c.RateLimit, `requests per key (and per loopback address without one) on every API route: N/s, N/m or N/h with an optional burst ":B", or "off"`)
	fs.IntVar(&c.ConcurrencyLimit, "concurrency-limit", c.ConcurrencyLimit, "requests in flight per key (and per loopback address without one) on every API route (0: no limit)")
	fs.StringVar(&c.RateLimitKeys, "rate-limit-keys", c.RateLimitKeys, `rates of some keys: name=rate,… where a name is api, admin or a key's 12-hex hash, and a rate may be "off"`)
	fs.StringVar(&c.AnonymousRateLimit, "anonymous-rate-limit", c.AnonymousRateLimit, `requests per address of callers without a key from other machines, on every API route: a rate, or "off"`)
	fs.IntVar(&c.AnonymousConcurrencyLimit, "anonymous-concurrency-limit", c.AnonymousConcurrencyLimit, "requests in flight per address of callers without a key from other machines (0: no limit)")
	fs.IntVar(&c.StreamsPerSession, "streams-per-session", c.StreamsPerSession, "GET streams one MCP session may hold open at once")
	fs.IntVar(&c.StreamsPerKey, "streams-per-key", c.StreamsPerKey, "streams (responses held open: the MCP endpoints' GET streams and subscriptions) one key, or one address without a key, may hold open at once")
	fs.IntVar(&c.MaxStreams, "max-streams", c.MaxStreams, "MCP streams held open in all (0: 4096, or fewer when the open-file limit leaves less after the descriptors kept for the other routes)")
	fs.StringVar(&c.AuthFailureLimit, "auth-failure-limit", c.AuthFailureLimit, `wrong keys an address may present: a rate with its burst (N/s, N/m or N/h, ":B"), or "off"; past it, its keys are answered 429 unchecked`)
	c.OAuth.RegisterFlags(fs)
	fs.StringVar(&c.MetricsAddr, "edge-metrics-addr", c.MetricsAddr, `serve Prometheus metrics at GET /metrics on this address ("off": none)`)
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := []error{c.ValidateCommon()}
	errs = append(errs, grpcdial.ValidateTarget("mcpgateway-addr", c.McpgatewayAddr), grpcdial.ValidateTarget("inference-addr", c.InferenceAddr),
		grpcdial.ValidateTarget("toolhost-addr", c.ToolhostAddr))
	for _, a := range []struct{ name, v string }{
		{"edge-addr", c.Addr},
	} {
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want host:port", a.name, a.v))
		}
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("max-body-bytes %d: want at least 1024", c.MaxBodyBytes))
	}
	if c.MaxBodyBytes > int64(grpcdial.MaxBodyBytes(c.GRPCMaxMessageBytes)) {
		errs = append(errs, fmt.Errorf("max-body-bytes %d must be at least %s below grpc-max-message-bytes %d (a body travels in one gRPC message): raise grpc-max-message-bytes on every service", c.MaxBodyBytes, grpcdial.OverheadText, c.GRPCMaxMessageBytes))
	}
	if c.MaxAdminBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("max-admin-body-bytes %d: want at least 1024", c.MaxAdminBodyBytes))
	}
	if c.BodyReadTimeout < time.Second {
		errs = append(errs, fmt.Errorf("body-read-timeout %v: want at least 1s", c.BodyReadTimeout))
	}
	errs = append(errs, metrics.ValidateAddr("edge-metrics-addr", c.MetricsAddr, c.MetricsPublic), metrics.ValidateApart("edge-metrics-addr", c.MetricsAddr, "edge-addr", c.Addr))
	if _, err := parseKeyLimits(c); err != nil {
		errs = append(errs, err)
	}
	if err := checkStreamSettings(c); err != nil {
		errs = append(errs, err)
	}
	if _, err := streamsInAll(c.MaxStreams, openFileLimit()); err != nil {
		errs = append(errs, err)
	}
	if _, err := ratelimit.ParseSetting(c.AuthFailureLimit); err != nil {
		errs = append(errs, fmt.Errorf("auth-failure-limit (ZEST_AUTH_FAILURE_LIMIT): %w, or off", err))
	}
	errs = append(errs, c.OAuth.Validate())
	if c.IdleTimeout < time.Second {
		errs = append(errs, fmt.Errorf("idle-timeout %v: want at least 1s", c.IdleTimeout))
	}
	return errors.Join(errs...)
}

// Shared returns the common settings.
func (c *Config) Shared() *service.Common { return &c.Common }
