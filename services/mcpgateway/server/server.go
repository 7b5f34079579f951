// Package server is the mcpgateway service as a library: it opens the registry, connects to
// the inference service and serves HttpService (the MCP endpoints /mcp, /mcp/servers/{id} and
// /mcp/presets/{id}, handed over by the edge), AdminService and ChatService over gRPC.
package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/grpcserve"
	"github.com/zestmcp/zest/lib/httpexchange"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/listen"
	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/oauthrs"
	"github.com/zestmcp/zest/lib/service"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/admin"
	"github.com/zestmcp/zest/services/mcpgateway/aggregate"
	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"github.com/zestmcp/zest/services/mcpgateway/audit"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/configcache"
	"github.com/zestmcp/zest/services/mcpgateway/federate"
	"github.com/zestmcp/zest/services/mcpgateway/follow"
	"github.com/zestmcp/zest/services/mcpgateway/lemonade"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"github.com/zestmcp/zest/services/mcpgateway/mcpregistry"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/pins"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/streamable"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/toolchat"
	"github.com/zestmcp/zest/services/mcpgateway/toolhosts"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc"
)

// EnvImageDir is Lemonade's variable for the image sandbox of lemonade_generate_image.
const EnvImageDir = "LEMONADE_MCP_IMAGE_DIR"

// EnvSessionKey shares the session signing key between replicas (base64url, ≥ 32 bytes).
const EnvSessionKey = "ZEST_SESSION_KEY"

// Config is mcpgateway's configuration; flag names map to ZEST_* variables.
type Config struct {
	service.Common
	// Addr is the gRPC listen address (ZEST_MCPGATEWAY_ADDR).
	Addr string
	// InferenceAddr is the inference service (ZEST_INFERENCE_ADDR): one address, a
	// comma-separated list of replicas or dns:///name:port (grpcdial.ParseTarget).
	InferenceAddr string
	// ToolhostAddr is the tool hosts that run stdio servers (ZEST_TOOLHOST_ADDR): host:port, a
	// comma-separated list, or dns:///name:port (package toolhosts).
	ToolhostAddr string
	// ToolhostResolveEvery, ToolhostHealthEvery and ToolhostWait tune the tool hosts' pool
	// (ZEST_TOOLHOST_RESOLVE_EVERY, ZEST_TOOLHOST_HEALTH_EVERY, ZEST_TOOLHOST_WAIT).
	ToolhostResolveEvery, ToolhostHealthEvery, ToolhostWait time.Duration
	// DataDir holds registry.db and session.key (ZEST_DATA_DIR).
	DataDir string
	// Registry selects the registry store (ZEST_REGISTRY): "" is bbolt at
	// <DataDir>/registry.db; etcd://host:port[,…][/prefix] or etcds://… a registry on etcd
	// shared by replicas (TLS and auth from ZEST_ETCD_*).
	Registry string
	// ImageDir is where lemonade_generate_image writes (LEMONADE_MCP_IMAGE_DIR; default
	// <data dir>/mcp-images).
	ImageDir string
	// AudioDir is the only tree lemonade_transcribe_audio reads audio_path from
	// (ZEST_MCP_AUDIO_DIR; default <data dir>/mcp-audio).
	AudioDir string
	// ChatMaxRounds caps the model calls of one tool-loop chat (ZEST_CHAT_MAX_ROUNDS).
	ChatMaxRounds int
	// ChatMaxToolOutput caps one tool result fed back to the model (ZEST_CHAT_MAX_TOOL_OUTPUT).
	ChatMaxToolOutput int
	// ToolOutputMaxBytes bounds one tools/call result of a server whose config sets no
	// max_output_bytes, on every path (ZEST_TOOL_OUTPUT_MAX_BYTES).
	ToolOutputMaxBytes int
	// SessionLifetime is how long an /mcp session id stays valid (ZEST_SESSION_LIFETIME).
	SessionLifetime time.Duration
	// SSEKeepAlive is the interval of comment lines on idle MCP GET streams (ZEST_SSE_KEEPALIVE).
	SSEKeepAlive time.Duration
	// Keys guard the gRPC APIs and are sent to the services this one calls.
	Keys keyauth.Keys
	// OAuth lets the MCP endpoints' calls (HttpService), which the edge relays with the
	// caller's token, in with an access token of the configured issuer beside the API key
	// (ZEST_OAUTH_ISSUER…, lib/oauthrs): the edge checks the token for its very endpoint, this
	// service checks it again for one of Zest's endpoints.
	OAuth oauthrs.Config
	// SessionKey, when set, signs session ids (from ZEST_SESSION_KEY); else a key file in DataDir.
	SessionKey string
	// MCPPreset, when set, makes /mcp serve that preset's providers aggregated, as
	// /mcp/presets/{id} does, instead of the built-in tools (ZEST_MCP_PRESET).
	MCPPreset string
	// ActivitySize is how many of the latest tool calls GET /internal/mcp/activity can show
	// (ZEST_ACTIVITY_SIZE, 1 to activity.MaxSize); each replica keeps its own.
	ActivitySize int
	// ActivityDetails keeps each recorded call's arguments and result, cut at
	// activity.DetailBytes (ZEST_ACTIVITY_DETAILS); off, only who, what, how long and how it ended.
	ActivityDetails bool
	// MetricsAddr serves GET /metrics (ZEST_MCPGATEWAY_METRICS_ADDR; "off": none).
	MetricsAddr string
	// AuditRetention is how long the audit trail keeps an entry (ZEST_AUDIT_RETENTION).
	AuditRetention time.Duration
	// AuditMaxEntries bounds the audit trail's tool calls (ZEST_AUDIT_MAX_ENTRIES; 0: no trail).
	AuditMaxEntries int
	// AuditMaxAdminEntries bounds its admin entries, apart from the tool calls
	// (ZEST_AUDIT_MAX_ADMIN_ENTRIES).
	AuditMaxAdminEntries int
	// AuditDetails keeps tool calls' arguments and results in the trail (ZEST_AUDIT_DETAILS).
	AuditDetails bool
	// ApprovalTimeout is how long a tool call that needs approval waits for a decision
	// (ZEST_APPROVAL_TIMEOUT, approval.MinTimeout to approval.MaxTimeout).
	ApprovalTimeout time.Duration
	// MCPRegistryURL is the MCP Registry that zestctl servers install and the console's install
	// search read (ZEST_MCP_REGISTRY_URL).
	MCPRegistryURL string
	// ToolSearchEmbeddingModel, when set, is the inference node's embedding model whose
	// vectors tool search blends with BM25 (ZEST_TOOL_SEARCH_EMBEDDING_MODEL; toolsearch).
	ToolSearchEmbeddingModel string
}

// DefaultMetricsAddr is where mcpgateway serves GET /metrics unless
// ZEST_MCPGATEWAY_METRICS_ADDR says otherwise.
const DefaultMetricsAddr = "127.0.0.1:13321"

// MinSSEKeepAlive is the shortest interval of keep-alive comments ZEST_SSE_KEEPALIVE takes.
const MinSSEKeepAlive = 100 * time.Millisecond

// DefaultConfig binds loopback only.
func DefaultConfig() Config {
	return Config{
		Common: service.DefaultCommon(), Addr: "127.0.0.1:13311", InferenceAddr: "127.0.0.1:13310",
		ToolhostAddr: "127.0.0.1:13312", DataDir: "data", SessionLifetime: 24 * time.Hour, SSEKeepAlive: 15 * time.Second,
		ToolhostResolveEvery: toolhosts.DefaultResolveEvery, ToolhostHealthEvery: toolhosts.DefaultHealthEvery, ToolhostWait: toolhosts.DefaultWait,
		ChatMaxRounds: toolchat.DefaultMaxRounds, ChatMaxToolOutput: toolchat.DefaultMaxToolOutput,
		ToolOutputMaxBytes: serverconfig.DefaultMaxOutputBytes, ActivitySize: activity.DefaultSize,
		Keys: keyauth.FromEnv(nil), SessionKey: os.Getenv(EnvSessionKey), ImageDir: os.Getenv(EnvImageDir),
		MetricsAddr: DefaultMetricsAddr, AuditRetention: audit.DefaultRetention, AuditMaxEntries: audit.DefaultMaxEntries,
		AuditMaxAdminEntries: audit.DefaultMaxAdminEntries, ApprovalTimeout: approval.DefaultTimeout, OAuth: oauthrs.DefaultConfig(),
		MCPRegistryURL: mcpregistry.DefaultURL,
	}
}

// RegisterFlags adds mcpgateway's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Common.RegisterFlags(fs)
	fs.StringVar(&c.Addr, "mcpgateway-addr", c.Addr, "gRPC listen address of mcpgateway")
	fs.StringVar(&c.InferenceAddr, "inference-addr", c.InferenceAddr, "the inference service: host:port, a comma-separated list of replicas, or dns:///name:port (calls go round robin to the healthy ones)")
	fs.StringVar(&c.ToolhostAddr, "toolhost-addr", c.ToolhostAddr, "the tool hosts that run stdio MCP servers: host:port, a comma-separated list, or dns:///name:port (every address it resolves to)")
	fs.DurationVar(&c.ToolhostResolveEvery, "toolhost-resolve-every", c.ToolhostResolveEvery, "how often a dns:/// toolhost-addr is resolved again")
	fs.DurationVar(&c.ToolhostHealthEvery, "toolhost-health-every", c.ToolhostHealthEvery, "how often each tool host's health is checked (a dropped connection counts at once)")
	fs.DurationVar(&c.ToolhostWait, "toolhost-wait", c.ToolhostWait, "how long a stdio server's call waits for a tool host that can run it when none is healthy")
	fs.StringVar(&c.MetricsAddr, "mcpgateway-metrics-addr", c.MetricsAddr, `serve Prometheus metrics at GET /metrics on this address ("off": none)`)
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for registry.db and session.key")
	fs.StringVar(&c.Registry, "registry", c.Registry, `registry store: "" (bbolt at <data-dir>/registry.db), etcd://host:port[,host:port…][/prefix] or etcds://… (TLS); TLS files and auth from ZEST_ETCD_*`)
	fs.StringVar(&c.AudioDir, "mcp-audio-dir", c.AudioDir, "the only directory tree lemonade_transcribe_audio reads audio_path from (default <data-dir>/mcp-audio)")
	fs.IntVar(&c.ChatMaxRounds, "chat-max-rounds", c.ChatMaxRounds, "model calls one tool-loop chat may make")
	fs.IntVar(&c.ChatMaxToolOutput, "chat-max-tool-output", c.ChatMaxToolOutput, "bytes of one tool result fed back to the model (longer is cut, with a marker)")
	fs.IntVar(&c.ToolOutputMaxBytes, "tool-output-max-bytes", c.ToolOutputMaxBytes, fmt.Sprintf("bytes of one tools/call result of a server whose config sets no max_output_bytes, on every path (%d to %d; larger is answered as an isError result that says so)", serverconfig.MinMaxOutputBytes, serverconfig.MaxMaxOutputBytes))
	fs.DurationVar(&c.SessionLifetime, "session-lifetime", c.SessionLifetime, "how long an /mcp session id stays valid")
	fs.DurationVar(&c.SSEKeepAlive, "sse-keepalive", c.SSEKeepAlive, fmt.Sprintf("interval of keep-alive comments on idle /mcp GET streams (at least %v)", MinSSEKeepAlive))
	fs.StringVar(&c.MCPPreset, "mcp-preset", c.MCPPreset, "a preset id: /mcp serves that preset's providers aggregated (as /mcp/presets/{id}) instead of the built-in tools")
	fs.IntVar(&c.ActivitySize, "activity-size", c.ActivitySize, fmt.Sprintf("how many of the latest tool calls GET /internal/mcp/activity can show (1 to %d; each replica keeps its own)", activity.MaxSize))
	fs.DurationVar(&c.AuditRetention, "audit-retention", c.AuditRetention, fmt.Sprintf("how long the audit trail keeps an entry (at least %v)", audit.MinRetention))
	fs.IntVar(&c.AuditMaxEntries, "audit-max-entries", c.AuditMaxEntries, fmt.Sprintf("how many tool calls the audit trail keeps at most, the oldest trimmed first (0 to %d; 0 turns the trail off)", audit.MaxMaxEntries))
	fs.IntVar(&c.AuditMaxAdminEntries, "audit-max-admin-entries", c.AuditMaxAdminEntries, fmt.Sprintf("how many admin changes and approval decisions the audit trail keeps at most, apart from the tool calls, the oldest trimmed first (1 to %d)", audit.MaxMaxEntries))
	fs.BoolVar(&c.AuditDetails, "audit-details", c.AuditDetails, fmt.Sprintf("keep each tool call's arguments and result (cut at %d bytes each) in the audit trail", activity.DetailBytes))
	fs.DurationVar(&c.ApprovalTimeout, "approval-timeout", c.ApprovalTimeout, fmt.Sprintf("how long a tool call whose server requires approval waits for an administrator's decision before it fails as expired (%v to %v)", approval.MinTimeout, approval.MaxTimeout))
	c.OAuth.RegisterFlags(fs)
	fs.StringVar(&c.MCPRegistryURL, "mcp-registry-url", c.MCPRegistryURL, "the MCP Registry's base URL, read by zestctl servers install and the console's install search")
	fs.StringVar(&c.ToolSearchEmbeddingModel, "tool-search-embedding-model", c.ToolSearchEmbeddingModel, "an embedding model of the inference node (of a semantic engine, not builtin-embed): tool search blends its vectors with BM25, so a request that shares no word with its tool can find it")
	fs.BoolVar(&c.ActivityDetails, "activity-details", c.ActivityDetails, fmt.Sprintf("keep each recorded tool call's arguments and result (cut at %d bytes each) for GET /internal/mcp/activity", activity.DetailBytes))
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := []error{c.ValidateCommon(), c.Keys.LoadServiceKey(), c.OAuth.Validate()}
	errs = append(errs, grpcdial.ValidateTarget("inference-addr", c.InferenceAddr), c.toolhosts().Validate())
	for name, a := range map[string]string{"mcpgateway-addr": c.Addr} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want host:port", name, a))
		}
	}
	errs = append(errs, metrics.ValidateAddr("mcpgateway-metrics-addr", c.MetricsAddr, c.MetricsPublic),
		metrics.ValidateApart("mcpgateway-metrics-addr", c.MetricsAddr, "mcpgateway-addr", c.Addr))
	if strings.TrimSpace(c.DataDir) == "" {
		errs = append(errs, errors.New("data-dir is empty: give a directory for registry.db"))
	}
	if err := registry.CheckURL(c.Registry, os.Getenv); err != nil {
		errs = append(errs, fmt.Errorf("registry (ZEST_REGISTRY): %w", err))
	}
	if c.SSEKeepAlive < MinSSEKeepAlive {
		errs = append(errs, fmt.Errorf("sse-keepalive (ZEST_SSE_KEEPALIVE) %v: want at least %v", c.SSEKeepAlive, MinSSEKeepAlive))
	}
	if c.ChatMaxRounds < 1 || c.ChatMaxToolOutput < 256 {
		errs = append(errs, fmt.Errorf("chat-max-rounds must be at least 1 and chat-max-tool-output at least 256"))
	}
	if c.ToolOutputMaxBytes < serverconfig.MinMaxOutputBytes || c.ToolOutputMaxBytes > serverconfig.MaxMaxOutputBytes {
		errs = append(errs, fmt.Errorf("tool-output-max-bytes (ZEST_TOOL_OUTPUT_MAX_BYTES) %d: want a whole number of bytes from %d (1 KiB) to %d (40 MiB, the gRPC message limit)", c.ToolOutputMaxBytes, serverconfig.MinMaxOutputBytes, serverconfig.MaxMaxOutputBytes))
	}
	if c.MCPPreset != "" && !serverconfig.IDPattern.MatchString(c.MCPPreset) {
		errs = append(errs, fmt.Errorf("mcp-preset %q: want a preset id ([A-Za-z0-9_.-]{1,96})", c.MCPPreset))
	}
	if c.ActivitySize < 1 || c.ActivitySize > activity.MaxSize {
		errs = append(errs, fmt.Errorf("activity-size (ZEST_ACTIVITY_SIZE) %d: want a whole number from 1 to %d", c.ActivitySize, activity.MaxSize))
	}
	if c.AuditRetention < audit.MinRetention {
		errs = append(errs, fmt.Errorf("audit-retention (ZEST_AUDIT_RETENTION) %v: want at least %v (720h is 30 days)", c.AuditRetention, audit.MinRetention))
	}
	if c.AuditMaxEntries < 0 || c.AuditMaxEntries > audit.MaxMaxEntries {
		errs = append(errs, fmt.Errorf("audit-max-entries (ZEST_AUDIT_MAX_ENTRIES) %d: want a whole number from 0 (no audit trail) to %d", c.AuditMaxEntries, audit.MaxMaxEntries))
	}
	if c.AuditMaxAdminEntries < 1 || c.AuditMaxAdminEntries > audit.MaxMaxEntries {
		errs = append(errs, fmt.Errorf("audit-max-admin-entries (ZEST_AUDIT_MAX_ADMIN_ENTRIES) %d: want a whole number from 1 to %d (to keep no trail at all, set ZEST_AUDIT_MAX_ENTRIES=0)", c.AuditMaxAdminEntries, audit.MaxMaxEntries))
	}
	if err := approval.CheckTimeout(c.ApprovalTimeout); err != nil {
		errs = append(errs, err)
	}
	if _, err := mcpregistry.New(c.MCPRegistryURL); err != nil {
		errs = append(errs, err)
	}
	if err := toolsearch.CheckEmbeddingModel(c.ToolSearchEmbeddingModel); err != nil {
		errs = append(errs, fmt.Errorf("tool-search-embedding-model (ZEST_TOOL_SEARCH_EMBEDDING_MODEL) %w", err))
	}
	if c.SessionLifetime < time.Minute {
		errs = append(errs, fmt.Errorf("session-lifetime %v: want at least 1m", c.SessionLifetime))
	}
	return errors.Join(errs...)
}

// Shared returns the common settings.
func (c *Config) Shared() *service.Common { return &c.Common }

// toolhosts is the configuration of the tool hosts' pool.
func (c *Config) toolhosts() toolhosts.Config {
	return toolhosts.Config{Addr: c.ToolhostAddr, Key: c.Keys.Service, MaxMessageBytes: c.GRPCMaxMessageBytes,
		ResolveEvery: c.ToolhostResolveEvery, HealthEvery: c.ToolhostHealthEvery, Wait: c.ToolhostWait}
}

// Server is a running mcpgateway.
type Server struct {
	cfg       Config
	log       *slog.Logger
	reg       registry.Registry
	inference *grpc.ClientConn
	toolhosts *toolhosts.Pool
	up        *upstream.Manager
	srv       *grpcserve.Server
	// servers is the config cache, and changes what applies the registry's changes to this
	// replica (Serve follows the registry's watch when it has one).
	servers *configcache.Registry
	changes *follow.Replica
	audit   *audit.Log // nil: no audit trail
	search  *toolsearch.Shared
}

// New opens the registry and builds the service; Close releases what New opened.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	registryClient, err := mcpregistry.New(cfg.MCPRegistryURL)
	if err != nil {
		return nil, err
	}
	key, err := sessionKey(cfg)
	if err != nil {
		return nil, err
	}
	codec, err := session.NewCodec(key, cfg.SessionLifetime)
	if err != nil {
		return nil, err
	}
	// Bounded: an etcd that does not answer fails within its request timeout.
	reg, err := registry.OpenURL(context.Background(), cfg.Registry, cfg.DataDir, nil)
	if err != nil {
		return nil, err
	}
	cc, err := grpcdial.Dial(cfg.InferenceAddr, cfg.Keys.API, cfg.GRPCMaxMessageBytes, grpcdial.LogUnavailable(log)...)
	if err != nil {
		reg.Close()
		return nil, err
	}
	// The tool host launches processes: it takes only the service key, never a caller's key.
	if cfg.Keys.Service == "" {
		log.Warn("the service key is not set (ZEST_SERVICE_KEY or ZEST_SERVICE_KEY_FILE): the tool host refuses every call without it, so stdio MCP servers cannot run")
	}
	th, err := toolhosts.New(cfg.toolhosts(), log)
	if err != nil {
		cc.Close()
		reg.Close()
		return nil, err
	}
	up := upstream.NewPlaced(th, nil, log)
	// Upstream OAuth: tokens sealed with ZEST_SECRET_KEY_FILE's key in the registry. Without
	// the key the signer refuses every sign-in, naming the setting.
	keys, err := oauthclient.LoadKeyring(os.LookupEnv)
	if err != nil {
		cc.Close()
		th.Close()
		reg.Close()
		return nil, err
	}
	if tokens, ok := reg.(registry.OAuthTokens); ok {
		signer := oauthclient.New(keys, tokens, os.LookupEnv, nil, nil, log, oauthclient.WithPublicURL(cfg.OAuth.PublicURL))
		signer.SetCallerIssuer(cfg.OAuth.Issuer) // where token_exchange may send the callers' tokens
		up.SetOAuth(signer)
	}
	dirs := lemonade.Dirs{Images: cfg.ImageDir, Audio: cfg.AudioDir}
	if dirs.Images == "" {
		dirs.Images = filepath.Join(cfg.DataDir, "mcp-images")
	}
	if dirs.Audio == "" {
		dirs.Audio = filepath.Join(cfg.DataDir, "mcp-audio")
	}
	for _, d := range []string{dirs.Images, dirs.Audio} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			cc.Close()
			th.Close()
			reg.Close()
			return nil, fmt.Errorf("tool directory: %w", err)
		}
	}
	if dirs.Images, err = filepath.Abs(dirs.Images); err != nil {
		return nil, err
	}
	if dirs.Audio, err = filepath.Abs(dirs.Audio); err != nil {
		return nil, err
	}
	// Who made each call, named once when it arrives (after the key check) for the activity,
	// the audit trail and approvals: a configured key by its hash, any other caller anonymous.
	serverOpts := activity.NewCallers(cfg.Keys).ServerOptions()
	// The audit trail: every admin change (the interceptor) and every tool call (the activity's
	// sink), appended to the registry in batches.
	var trail *audit.Log
	var sink []activity.Option
	if cfg.AuditMaxEntries > 0 {
		store, ok := reg.(registry.AuditLog)
		if !ok {
			cc.Close()
			th.Close()
			reg.Close()
			return nil, fmt.Errorf("registry %T keeps no audit trail: set ZEST_AUDIT_MAX_ENTRIES=0", reg)
		}
		trail = audit.New(store, audit.Config{Retention: cfg.AuditRetention, MaxEntries: cfg.AuditMaxEntries,
			MaxAdminEntries: cfg.AuditMaxAdminEntries, Details: cfg.AuditDetails, Logger: log})
		sink = append(sink, activity.WithSink(trail))
		serverOpts = append(serverOpts, grpc.ChainUnaryInterceptor(trail.UnaryInterceptor()))
	}
	// The latest tool calls of every path, for GET /internal/mcp/activity.
	calls, err := activity.New(cfg.ActivitySize, cfg.ActivityDetails, sink...)
	if err != nil {
		cc.Close()
		th.Close()
		reg.Close()
		return nil, err
	}
	mcpSrv := mcpserve.NewMCPServer(mcpserve.ServerVersion)
	infer := inferencev1.NewInferenceServiceClient(cc)
	modelAdmin := inferencev1.NewModelAdminServiceClient(cc)
	builtins := lemonade.New(infer, modelAdmin, dirs)
	builtins.Register(mcpSrv)
	lemonade.NewModelTools(modelAdmin).Register(mcpSrv)
	lemonade.NewMedia(builtins, inferencev1.NewMediaServiceClient(cc)).Register(mcpSrv)

	guard := keyauth.Guard{Keys: cfg.Keys, Level: func(m string) keyauth.Level {
		switch {
		case strings.HasPrefix(m, "/"+mcpgatewayv1.AdminService_ServiceDesc.ServiceName+"/"),
			strings.HasPrefix(m, "/"+mcpgatewayv1.RegistryService_ServiceDesc.ServiceName+"/"),
			m == mcpgatewayv1.UpstreamOAuthService_StartSignIn_FullMethodName, m == mcpgatewayv1.UpstreamOAuthService_SignOut_FullMethodName:
			return keyauth.LevelAdmin
		case m == mcpgatewayv1.UpstreamOAuthService_FinishSignIn_FullMethodName:
			// A browser's callback: the state it carries is its credential (oauthclient).
			return keyauth.LevelPublic
		case strings.HasPrefix(m, "/"+mcpgatewayv1.HttpService_ServiceDesc.ServiceName+"/"):
			return keyauth.LevelEndpoint
		}
		return keyauth.LevelAPI
	}}
	if v := oauthrs.New(cfg.OAuth, oauthrs.WithLogger(log)); v != nil {
		guard.Token = func(ctx context.Context, token string) (keyauth.TokenCaller, error) {
			c, err := v.VerifyAnyEndpoint(ctx, token)
			if err != nil {
				return keyauth.TokenCaller{}, err
			}
			return keyauth.TokenCaller{Subject: c.Subject, Admin: c.Admin}, nil
		}
	}
	// Every server config is read through one write-through cache: the admin service writes
	// through it, the federation and the chat loop read it on every request and tool call.
	servers := configcache.New(reg)
	// The tool calls that wait for approval, in the registry: a decision taken through any
	// replica reaches the one whose call waits. Both stores keep them.
	var gate *approval.Gate
	if store, ok := reg.(registry.Approvals); ok {
		gate = approval.New(store, cfg.ApprovalTimeout, log)
	}
	// The tool definitions pinned per server (pin_tools): a changed or new tool is held — left
	// out of every list the manager reads, refused by the pipeline — until an administrator
	// accepts it. Both stores keep the pins.
	var pinGate *pins.Gate
	if store, ok := reg.(registry.Pins); ok {
		pinGate = pins.New(store, servers, log)
		up.PinTools(pinGate)
		pinGate.OnDecision(up.Relist)
		// A call before the server's first listing lists it first (which pins its tools).
		pinGate.ListWith(func(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error {
			_, err := up.ListTools(ctx, cfg, true)
			return err
		})
	}
	// The one door: every tool call of every path (the admin API, /mcp's built-in tools,
	// /mcp/servers/{id}, /mcp/presets/{id}, the chat loop) goes through this pipeline.
	tools := toolcall.New(toolcall.Config{MaxOutputBytes: cfg.ToolOutputMaxBytes}, servers, up, cfg.Keys,
		toolcall.WithBuiltin(mcpserve.NewBuiltin(mcpSrv)), toolcall.WithActivity(calls), toolcall.WithApprovals(gate), toolcall.WithPins(pinGate), toolcall.WithAudit(trail), toolcall.WithLogger(log))
	// The three MCP endpoints: /mcp's built-in tools, /mcp/servers/{id} (each registered server
	// through the same transport and sessions), /mcp/presets/{id} (a preset's providers on one
	// endpoint; and /mcp, with ZEST_MCP_PRESET).
	builtin := mcpserve.New(mcpSrv, codec, reg, tools, log)
	fed := federate.New(servers, up, tools, codec, reg, cfg.Keys, log)
	// The tool catalog, one for the admin API and tool search: the search index is built once
	// per catalog version, for every preset and session (toolsearch.Shared).
	cat := catalog.New(servers, up, log)
	builtinTools, err := builtin.BuiltinTools(context.Background())
	if err != nil {
		cc.Close()
		th.Close()
		reg.Close()
		return nil, fmt.Errorf("reading the built-in tools: %w", err)
	}
	var searchOpts []toolsearch.SharedOption
	if cfg.ToolSearchEmbeddingModel != "" {
		searchOpts = append(searchOpts, toolsearch.WithEmbedder(
			toolsearch.InferenceEmbedder(inferencev1.NewTextServiceClient(cc), cfg.ToolSearchEmbeddingModel), log))
		log.Info("tool search blends BM25 with an embedding model (ZEST_TOOL_SEARCH_EMBEDDING_MODEL)", "model", cfg.ToolSearchEmbeddingModel)
	}
	search := toolsearch.NewShared(cat, toolsearch.OwnNames(serverconfig.LemonadeProvider, builtinTools), searchOpts...)
	agg := aggregate.New(servers, up, tools, builtin, fed, codec, reg, cfg.Keys, log, aggregate.WithToolSearch(search))
	var mcp mcphttp.Endpoint = builtin
	if cfg.MCPPreset != "" {
		mcp = agg.ForMCP(cfg.MCPPreset)
		if _, err := reg.GetPreset(context.Background(), cfg.MCPPreset); err != nil {
			log.Error("ZEST_MCP_PRESET names a preset that is not in the registry: /mcp answers every request with this error until it is created",
				"preset", cfg.MCPPreset, "err", err)
		} else {
			log.Info("/mcp serves a preset's providers (ZEST_MCP_PRESET)", "preset", cfg.MCPPreset)
		}
	}
	routes := mcpserve.NewRoutes(mcp, mcpserve.WithServers(fed), mcpserve.WithPresets(agg))
	notify := func(server string, msg []byte) {
		fed.Notify(server, msg)
		agg.Notify(server, msg)
	}
	up.OnNotification(notify)
	// A write of a server or preset, through this replica's admin API or another replica's
	// (the registry's watch), reaches the connections and the sessions the same way.
	changes := follow.New(up, log, follow.WithNotify(notify), follow.WithPresets(agg))
	adminService := admin.New(servers, up, tools, log,
		admin.WithCatalog(cat), admin.WithActivity(calls), admin.WithAudit(trail), admin.WithApprovals(gate), admin.WithPins(pinGate), admin.WithChanges(changes), admin.WithModels(infer))
	// The tool catalog's answer leaves with the encoding its snapshot kept (catalog.Codec).
	// A batch's answer (mcpserve.Batch) stops growing at the message limit it is sent under.
	serverOpts = append(serverOpts, grpc.ChainStreamInterceptor(mcpserve.MaxAnswerInterceptor(cfg.GRPCMaxMessageBytes)))
	g := grpcserve.New(grpcserve.Options{Guard: guard, Logger: log, DrainTimeout: cfg.DrainTimeout, MaxMessageBytes: cfg.GRPCMaxMessageBytes,
		ServerOptions: append(serverOpts, grpc.ForceServerCodecV2(adminService.Catalog().Codec()))})
	// The edge hands every request of the three endpoints over the generic HTTP exchange;
	// MCP's Streamable HTTP transport (streamable) serves it, calling the endpoints in-process.
	transport := streamable.Mux(&streamable.Handler{MCP: routes, Log: log, KeepAlive: cfg.SSEKeepAlive})
	g.RegisterService(&mcpgatewayv1.HttpService_ServiceDesc, httpexchange.NewServer(transport))
	// McpService stays served for the programs that end a session over gRPC (zestctl sessions
	// end); the edge no longer calls it.
	g.RegisterService(&mcpgatewayv1.McpService_ServiceDesc, routes.Service())
	g.RegisterService(&mcpgatewayv1.AdminService_ServiceDesc, adminService)
	chat := toolchat.New(toolchat.Config{MaxRounds: cfg.ChatMaxRounds, MaxToolOutput: cfg.ChatMaxToolOutput},
		infer, servers, up, mcpSrv, tools, cfg.Keys, log, toolchat.WithToolSearch(search))
	mcpgatewayv1.RegisterChatServiceServer(g.GRPC, chat)
	// The MCP Registry, read for zestctl servers install and the console (admin key).
	mcpgatewayv1.RegisterRegistryServiceServer(g.GRPC, mcpregistry.NewService(registryClient, log))
	// Sign-in to the upstream servers that sign in by OAuth (admin key; the callback: its state).
	if signer := up.OAuth(); signer != nil {
		mcpgatewayv1.RegisterUpstreamOAuthServiceServer(g.GRPC, oauthclient.NewService(signer, servers, cfg.OAuth.PublicURL, oauthclient.WithAuditNames(activity.WhoOf, audit.NoteSignIn)))
	}
	return &Server{cfg: cfg, log: log, reg: reg, inference: cc, toolhosts: th, up: up, srv: g, servers: servers, changes: changes, audit: trail, search: search}, nil
}

func sessionKey(cfg Config) ([]byte, error) {
	if cfg.SessionKey != "" {
		return session.DecodeKey(cfg.SessionKey)
	}
	return session.LoadOrCreateKey(filepath.Join(cfg.DataDir, "session.key"))
}

// Run listens on cfg.Addr and serves until ctx is done, then closes everything.
func (s *Server) Run(ctx context.Context) error {
	lis, err := listen.TCP(s.cfg.Addr)
	if err != nil {
		s.Close()
		return fmt.Errorf("listen %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, lis)
}

// Serve serves on lis until ctx is done, then closes everything. While it serves, the
// upstream manager follows the tool hosts (their events: a stdio server's new tools; their
// health: a server moves when its tool host goes), and, with a registry shared by replicas
// (registry.Watcher), the replica follows the registry's changes.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	defer s.Close()
	fctx, stop := context.WithCancel(ctx)
	var followed sync.WaitGroup
	followed.Go(func() { s.up.FollowToolHost(fctx) })
	if w, ok := s.reg.(registry.Watcher); ok {
		followed.Go(func() { s.changes.Follow(fctx, w, s.servers) })
	}
	if signer := s.up.OAuth(); signer != nil { // abandoned upstream sign-ins, any replica's
		followed.Go(func() { signer.SweepAbandoned(fctx) })
	}
	defer func() { stop(); followed.Wait() }()
	return s.srv.Serve(ctx, lis)
}

// Close disconnects the upstreams and releases the registry and client connections.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	s.up.Close(ctx)
	s.search.Close() // its background embedding, before the connection it calls on
	// After the upstreams: the calls they ended are recorded; before the registry it writes to.
	auditErr := s.audit.Close(ctx)
	return errors.Join(auditErr, s.inference.Close(), s.toolhosts.Close(), s.reg.Close())
}
