// Package host is the tool host service as a library: it serves ToolHostService over gRPC on
// top of the supervisor, which launches and keeps the stdio MCP servers an admin registers.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/grpcserve"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/listen"
	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/park"
	"github.com/zestmcp/zest/lib/service"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/sandbox"
	"github.com/zestmcp/zest/services/toolhost/shim"
	"github.com/zestmcp/zest/services/toolhost/stdio"
	"github.com/zestmcp/zest/services/toolhost/supervisor"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Config is the tool host's configuration; flag names map to ZEST_* variables.
type Config struct {
	service.Common
	// Addr is the gRPC listen address (ZEST_TOOLHOST_ADDR).
	Addr string
	// Name names this tool host to mcpgateway (ZEST_TOOLHOST_NAME; default the machine's host
	// name): servers are placed on tool hosts by name and pinned to one by its name, so every
	// tool host of a deployment needs its own (NamePattern).
	Name string
	// MaxLineBytes bounds one stdout line of a child (ZEST_TOOLHOST_MAX_LINE_BYTES); 0, the
	// default, follows the gRPC message limit (see LineLimit).
	MaxLineBytes int
	// StderrTailBytes bounds the stderr kept per child (ZEST_TOOLHOST_STDERR_TAIL_BYTES).
	StderrTailBytes int
	// MaxInFlight bounds concurrent calls per child (ZEST_TOOLHOST_MAX_IN_FLIGHT).
	MaxInFlight int
	// MaxStdinQueueBytes bounds the request bytes waiting for a child that does not read its
	// stdin (ZEST_TOOLHOST_MAX_STDIN_QUEUE_BYTES).
	MaxStdinQueueBytes int
	// MaxRelays bounds the requests of one child waiting for callers' MCP clients
	// (ZEST_TOOLHOST_MAX_RELAYS); more are answered with an error.
	MaxRelays int
	// OrphanWindow is how long a call given up on still counts as in flight on its child (0:
	// stdio.DefaultOrphanWindow, 30 s); not a flag: tests shorten it.
	OrphanWindow time.Duration
	// StopGrace is each step of the stop sequence (ZEST_TOOLHOST_STOP_GRACE).
	StopGrace time.Duration
	// IdleTimeout stops unused children (ZEST_TOOLHOST_IDLE_TIMEOUT, 0 = never).
	IdleTimeout time.Duration
	// LazyStart launches on first call instead of on EnsureStarted (ZEST_TOOLHOST_LAZY_START).
	LazyStart bool
	// BackoffBase and BackoffMax shape crash-loop restart delays.
	BackoffBase, BackoffMax time.Duration
	// Procs is the number of OS threads running Go code in the tool host (GOMAXPROCS), applied
	// by the binary's main (ZEST_TOOLHOST_PROCS; 0 leaves Go's default). The tool host only
	// moves bytes between callers and children; the children need the cores.
	Procs int
	// EnvAllow adds names and NAME* prefixes, comma-separated, to the variables of the tool
	// host's environment a server inherits (ZEST_TOOLHOST_ENV_ALLOW; supervisor.DefaultEnvAllow
	// lists the fixed ones). ZEST_* and LEMONADE_* are refused.
	EnvAllow string
	// Keys guard the gRPC API.
	Keys keyauth.Keys
	// MetricsAddr serves GET /metrics (ZEST_TOOLHOST_METRICS_ADDR; "off": none).
	MetricsAddr string
	// Sandbox is the default for servers whose spec leaves sandbox.enabled out
	// (ZEST_TOOLHOST_SANDBOX): "off" or "on" (docs/operator/untrusted-tools.md).
	Sandbox string
	// SandboxUID is who sandboxed servers run as when the tool host is root
	// (ZEST_TOOLHOST_SANDBOX_UID, "uid[:gid]"; default 65534, nobody).
	SandboxUID string
	// ServerUID is who the servers that are not sandboxed run as when the tool host is root
	// (ZEST_TOOLHOST_SERVER_UID, "uid[:gid]"; default 65534, nobody; "0" keeps them root, and
	// able to read the tool host's memory and environment).
	ServerUID string
	// ShimPath is the tool host's own executable, run with shim.Flag between the tool host and
	// each server (set by main; empty runs servers directly).
	ShimPath string
}

// StreamWorkers is how many goroutines the tool host keeps to run gRPC calls (gRPC starts one
// for a call that finds them all busy). Not the 256 of the other services: gRPC hands each
// call to the worker idle the longest, so 256 workers take turns, and with the tool host's
// garbage collector at Go's GOGC=100 (for its 30 MB RSS) each one has had its stack halved
// by a collection since its last call and grows it again: 6–12 % of the tool host's CPU at
// concurrency 64, 1–5 % with 64 workers, which cost it 6–8 µs a call less
// (docs/dev/benchmarks.md, "CPU per call, measured again").
const StreamWorkers = 64

// DefaultMetricsAddr is where the tool host serves GET /metrics unless
// ZEST_TOOLHOST_METRICS_ADDR says otherwise.
const DefaultMetricsAddr = "127.0.0.1:13322"

// DefaultConfig binds loopback only.
func DefaultConfig() Config {
	d := supervisor.DefaultConfig()
	common := service.DefaultCommon()
	common.GCPercent = 100 // Go's default: the tool host's RSS target is 30 MB (docs/decisions.md, "The Go runtime's knobs")
	name, _ := os.Hostname()
	return Config{
		Common: common, Addr: "127.0.0.1:13312", Name: name,
		StderrTailBytes: d.StderrTailBytes, MaxInFlight: d.MaxInFlight, MaxStdinQueueBytes: d.MaxStdinQueueBytes,
		MaxRelays: d.MaxRelays, StopGrace: d.StopGrace, BackoffBase: d.BackoffBase, BackoffMax: d.BackoffMax,
		Procs: 1, Keys: keyauth.FromEnv(nil), MetricsAddr: DefaultMetricsAddr,
		Sandbox: "off", SandboxUID: strconv.Itoa(sandbox.DefaultUID), ServerUID: strconv.Itoa(sandbox.DefaultUID),
	}
}

// RegisterFlags adds the tool host's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Common.RegisterFlags(fs)
	fs.StringVar(&c.Addr, "toolhost-addr", c.Addr, "gRPC listen address of the tool host")
	fs.StringVar(&c.Name, "toolhost-name", c.Name, "this tool host's name, unique among the tool hosts of one mcpgateway: servers are placed on tool hosts by name and pinned to one by it (default: the machine's host name)")
	fs.StringVar(&c.MetricsAddr, "toolhost-metrics-addr", c.MetricsAddr, `serve Prometheus metrics at GET /metrics on this address ("off": none)`)
	fs.IntVar(&c.MaxLineBytes, "toolhost-max-line-bytes", c.MaxLineBytes, "largest stdout line a server may write; longer is a protocol failure that stops it (0: grpc-max-message-bytes − "+grpcdial.OverheadText+", the largest answer a gRPC message can carry)")
	fs.IntVar(&c.StderrTailBytes, "toolhost-stderr-tail-bytes", c.StderrTailBytes, "stderr bytes kept per server for diagnostics")
	fs.IntVar(&c.MaxInFlight, "toolhost-max-in-flight", c.MaxInFlight, "concurrent calls per server; more are refused")
	fs.IntVar(&c.MaxStdinQueueBytes, "toolhost-max-stdin-queue-bytes", c.MaxStdinQueueBytes, "request bytes that may wait for a server that does not read its stdin; a call that does not fit waits for room until its deadline")
	fs.IntVar(&c.MaxRelays, "toolhost-max-relays", c.MaxRelays, "requests of one server (sampling, elicitation, roots) that may wait for their caller's MCP client; more are answered with an error")
	fs.DurationVar(&c.StopGrace, "toolhost-stop-grace", c.StopGrace, "wait after closing a server's stdin, and again after the SIGTERM its shim passes on, before the next stop step")
	fs.DurationVar(&c.IdleTimeout, "toolhost-idle-timeout", c.IdleTimeout, "stop a server unused this long (0: never)")
	fs.BoolVar(&c.LazyStart, "toolhost-lazy-start", c.LazyStart, "launch a server on its first call instead of when it is registered")
	fs.DurationVar(&c.BackoffBase, "toolhost-backoff-base", c.BackoffBase, "first restart delay of a crash loop (doubles per crash)")
	fs.DurationVar(&c.BackoffMax, "toolhost-backoff-max", c.BackoffMax, "longest restart delay of a crash loop")
	fs.StringVar(&c.EnvAllow, "toolhost-env-allow", c.EnvAllow, "more variables of the tool host's environment that servers inherit, comma-separated; NAME* is a prefix (e.g. NODE_*,PYTHONPATH); ZEST_* and LEMONADE_* are refused")
	fs.StringVar(&c.Sandbox, "toolhost-sandbox", c.Sandbox, `default for stdio servers whose config leaves sandbox.enabled out: "off" (run unconfined) or "on" (bubblewrap, seccomp, Landlock, rlimits; docs/operator/untrusted-tools.md)`)
	fs.StringVar(&c.SandboxUID, "toolhost-sandbox-uid", c.SandboxUID, `uid[:gid] that sandboxed servers run as when the tool host is root (not 0; default nobody); writable_paths must be writable by it`)
	fs.StringVar(&c.ServerUID, "toolhost-server-uid", c.ServerUID, `uid[:gid] that servers without a sandbox run as when the tool host is root (default nobody): what they run must be readable by it; "0" runs them as root, which can read the tool host's memory and keys`)
	fs.IntVar(&c.Procs, "toolhost-procs", c.Procs, "OS threads running the tool host's Go code (GOMAXPROCS; 0: Go's default, one per core; the GOMAXPROCS variable wins)")
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := []error{c.ValidateCommon(), c.Keys.LoadServiceKey()}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("toolhost-addr %q: want host:port, e.g. 127.0.0.1:13312", c.Addr))
	}
	if !NamePattern.MatchString(c.Name) {
		errs = append(errs, fmt.Errorf("toolhost-name (ZEST_TOOLHOST_NAME) %q: want letters, digits, '.', '_' or '-', 1 to 253 of them (the machine's host name did not fit: set one)", c.Name))
	}
	if most := grpcdial.MaxBodyBytes(c.GRPCMaxMessageBytes); c.MaxLineBytes != 0 && (c.MaxLineBytes < 1024 || c.MaxLineBytes > most) {
		errs = append(errs, fmt.Errorf("toolhost-max-line-bytes %d: want 0 (follow grpc-max-message-bytes) or 1024 to %d (grpc-max-message-bytes %d − %s): a longer line could never be sent back over gRPC",
			c.MaxLineBytes, most, c.GRPCMaxMessageBytes, grpcdial.OverheadText))
	}
	if _, err := supervisor.ParseEnvAllow(c.EnvAllow); err != nil {
		errs = append(errs, fmt.Errorf("toolhost-env-allow (ZEST_TOOLHOST_ENV_ALLOW): %w", err))
	}
	errs = append(errs, metrics.ValidateAddr("toolhost-metrics-addr", c.MetricsAddr, c.MetricsPublic),
		metrics.ValidateApart("toolhost-metrics-addr", c.MetricsAddr, "toolhost-addr", c.Addr))
	if _, err := sandbox.ParseMode(c.Sandbox); err != nil {
		errs = append(errs, fmt.Errorf("toolhost-sandbox (ZEST_TOOLHOST_SANDBOX) %w", err))
	}
	if _, _, err := sandbox.ParseUID(c.SandboxUID); err != nil {
		errs = append(errs, fmt.Errorf("toolhost-sandbox-uid (ZEST_TOOLHOST_SANDBOX_UID) %w", err))
	}
	if _, _, err := parseServerUID(c.ServerUID); err != nil {
		errs = append(errs, fmt.Errorf("toolhost-server-uid (ZEST_TOOLHOST_SERVER_UID) %w", err))
	}
	if c.Procs < 0 {
		errs = append(errs, fmt.Errorf("toolhost-procs %d: want 0 (Go's default) or more", c.Procs))
	}
	if c.MaxStdinQueueBytes < 64<<10 {
		errs = append(errs, fmt.Errorf("toolhost-max-stdin-queue-bytes %d: want at least 65536 (64 KiB)", c.MaxStdinQueueBytes))
	}
	if c.MaxRelays < 1 {
		errs = append(errs, fmt.Errorf("toolhost-max-relays %d: want at least 1", c.MaxRelays))
	}
	if c.StderrTailBytes < 0 || c.MaxInFlight < 1 {
		errs = append(errs, errors.New("toolhost-stderr-tail-bytes must be ≥ 0 and toolhost-max-in-flight ≥ 1"))
	}
	if c.StopGrace <= 0 || c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase || c.IdleTimeout < 0 {
		errs = append(errs, errors.New("toolhost-stop-grace and toolhost-backoff-base must be > 0, toolhost-backoff-max ≥ base, toolhost-idle-timeout ≥ 0"))
	}
	return errors.Join(errs...)
}

// NamePattern is the shape of a tool host's name; mcpgateway's serverconfig checks a server's
// tool_host pin against the same pattern.
var NamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,253}$`)

// LineLimit is the stdout line limit in effect: MaxLineBytes, or by default the largest
// answer a gRPC message can carry (grpcdial.MaxBodyBytes).
func (c *Config) LineLimit() int {
	if c.MaxLineBytes > 0 {
		return c.MaxLineBytes
	}
	return grpcdial.MaxBodyBytes(c.GRPCMaxMessageBytes)
}

// Shared returns the common settings.
func (c *Config) Shared() *service.Common { return &c.Common }

// Host serves ToolHostService.
type Host struct {
	toolhostv1.UnimplementedToolHostServiceServer
	cfg Config
	sup *supervisor.Supervisor
	srv *grpcserve.Server
	log *slog.Logger
	// relays are the children's requests waiting for a caller's client, by relay id.
	relays relayTable
	// parked are the CallStreams run apart from their streams (park_ms), by call id.
	parked *park.Calls[*toolhostv1.CallStreamResponse]
	// started is when this process started serving, for Describe.
	started time.Time
}

// New builds the tool host; log nil means slog.Default().
func New(cfg Config, log *slog.Logger) *Host {
	if log == nil {
		log = slog.Default()
	}
	logDroppedKeys(log)
	envAllow, err := supervisor.ParseEnvAllow(cfg.EnvAllow) // Validate reports the refused entries
	if err != nil {
		log.Error("ignoring refused entries of ZEST_TOOLHOST_ENV_ALLOW", "err", err)
	}
	supCfg := supervisor.Config{
		MaxLineBytes: cfg.LineLimit(), StderrTailBytes: cfg.StderrTailBytes, MaxInFlight: cfg.MaxInFlight,
		MaxStdinQueueBytes: cfg.MaxStdinQueueBytes, MaxRelays: cfg.MaxRelays, OrphanWindow: cfg.OrphanWindow,
		StopGrace: cfg.StopGrace, IdleTimeout: cfg.IdleTimeout, LazyStart: cfg.LazyStart,
		BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, Logger: log, Shim: shimArgv(cfg.ShimPath, cfg.StopGrace),
		EnvAllow: envAllow, Sandbox: sandboxSettings(cfg, log),
	}
	supCfg.ServerUID, supCfg.ServerGID = serverUser(cfg, log)
	sup := supervisor.New(supCfg)
	h := &Host{cfg: cfg, sup: sup, log: log, relays: relayTable{waiting: map[string]stdio.Reply{}},
		parked: park.New(itemKind), started: time.Now()}
	// Every method launches, stops or talks to processes: only Zest's services, holding the
	// service key, may call them; with no key configured every call is refused.
	guard := keyauth.Guard{Keys: cfg.Keys, Level: func(string) keyauth.Level { return keyauth.LevelService }}
	if cfg.Keys.Service == "" {
		log.Warn("the service key is not set (ZEST_SERVICE_KEY or ZEST_SERVICE_KEY_FILE): every ToolHostService call is refused until it is (set the same key for mcpgateway)")
	}
	h.srv = grpcserve.New(grpcserve.Options{Guard: guard, Logger: log, DrainTimeout: cfg.DrainTimeout, MaxMessageBytes: cfg.GRPCMaxMessageBytes,
		StreamWorkers: StreamWorkers})
	h.srv.RegisterService(&toolhostv1.ToolHostService_ServiceDesc, h)
	return h
}

// sandboxSettings are the supervisor's sandbox settings from cfg (Validate reports wrong ones;
// here a wrong mode sandboxes every server, the safe side).
func sandboxSettings(cfg Config, log *slog.Logger) sandbox.Settings {
	on, err := sandbox.ParseMode(cfg.Sandbox)
	if err != nil {
		log.Error("ZEST_TOOLHOST_SANDBOX is invalid: sandboxing every server", "err", err)
		on = true
	}
	uid, gid, err := sandbox.ParseUID(cfg.SandboxUID)
	if err != nil {
		log.Error("ZEST_TOOLHOST_SANDBOX_UID is invalid: using nobody (65534)", "err", err)
		uid, gid = sandbox.DefaultUID, sandbox.DefaultUID
	}
	return sandbox.Settings{Default: on, UID: uid, GID: gid, Exe: cfg.ShimPath}
}

// parseServerUID parses ZEST_TOOLHOST_SERVER_UID: "0" (root: the operator's choice to keep
// servers root), or a uid[:gid] as the sandbox's.
func parseServerUID(s string) (uid, gid int, err error) {
	if s == "0" || s == "0:0" {
		return 0, 0, nil
	}
	uid, gid, err = sandbox.ParseUID(s)
	if err != nil {
		return 0, 0, fmt.Errorf("%q: want a uid[:gid] such as 65534 (nobody), or 0 to run servers as root", s)
	}
	return uid, gid, nil
}

// serverUser is who servers without a sandbox run as (supervisor.Config.ServerUID): the
// setting, or nobody when it is invalid (Validate reports it; nobody is the safe side). A
// root tool host told to keep them root says what that costs.
func serverUser(cfg Config, log *slog.Logger) (uid, gid int) {
	uid, gid, err := parseServerUID(cfg.ServerUID)
	if err != nil {
		log.Error("ZEST_TOOLHOST_SERVER_UID is invalid: running servers as nobody (65534)", "err", err)
		return sandbox.DefaultUID, sandbox.DefaultUID
	}
	if uid == 0 && os.Geteuid() == 0 {
		log.Warn("servers without a sandbox run as root (ZEST_TOOLHOST_SERVER_UID=0): each can read the tool host's memory and environment, its service key included, and everything else on this machine; set a uid, or sandbox them")
	}
	return uid, gid
}

// shimArgv runs servers under the shim at path, which gives a server and its descendants the
// same grace after SIGTERM as the tool host's stop sequence does.
func shimArgv(path string, grace time.Duration) []string {
	if path == "" {
		return nil
	}
	return []string{path, shim.Flag, "-stop-grace=" + grace.String()}
}

// Run listens on cfg.Addr and serves until ctx is done, then stops every child.
func (h *Host) Run(ctx context.Context) error {
	lis, err := listen.TCP(h.cfg.Addr)
	if err != nil {
		h.sup.Close()
		return fmt.Errorf("listen %s: %w", h.cfg.Addr, err)
	}
	return h.Serve(ctx, lis)
}

// Serve serves on lis until ctx is done, then stops every child.
func (h *Host) Serve(ctx context.Context, lis net.Listener) error {
	defer h.sup.Close()
	return h.srv.Serve(ctx, lis)
}

// EnsureStarted implements ToolHostService.
func (h *Host) EnsureStarted(ctx context.Context, req *toolhostv1.EnsureStartedRequest) (*toolhostv1.EnsureStartedResponse, error) {
	if req.GetSpec() == nil {
		return nil, status.Error(codes.InvalidArgument, "spec is required")
	}
	st, err := h.sup.EnsureStarted(ctx, req.GetSpec(), req.GetLazy())
	if err != nil {
		return nil, toStatus(err)
	}
	return &toolhostv1.EnsureStartedResponse{Status: st}, nil
}

// MaxDrain bounds StopRequest.drain_ms: the longest a call may take (mcpgateway's largest
// timeout_ms, 300 s).
const MaxDrain = 300 * time.Second

// Stop implements ToolHostService.
func (h *Host) Stop(ctx context.Context, req *toolhostv1.StopRequest) (*toolhostv1.StopResponse, error) {
	if ms := req.GetDrainMs(); ms < 0 || time.Duration(ms)*time.Millisecond > MaxDrain {
		return nil, status.Errorf(codes.InvalidArgument, "drain_ms %d: want 0 to %d", ms, MaxDrain.Milliseconds())
	}
	st, err := h.sup.StopDrained(ctx, req.GetId(), time.Duration(req.GetDrainMs())*time.Millisecond)
	if err != nil {
		return nil, toStatus(err)
	}
	return &toolhostv1.StopResponse{Status: st}, nil
}

// Describe implements ToolHostService.
func (h *Host) Describe(context.Context, *toolhostv1.DescribeRequest) (*toolhostv1.DescribeResponse, error) {
	return &toolhostv1.DescribeResponse{Name: h.cfg.Name, Version: service.VersionString(), Pid: int32(os.Getpid()),
		StartTime: timestamppb.New(h.started)}, nil
}

// GetStatus implements ToolHostService.
func (h *Host) GetStatus(_ context.Context, req *toolhostv1.GetStatusRequest) (*toolhostv1.GetStatusResponse, error) {
	st, err := h.sup.Status(req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &toolhostv1.GetStatusResponse{Status: st}, nil
}

// ListServers implements ToolHostService.
func (h *Host) ListServers(context.Context, *toolhostv1.ListServersRequest) (*toolhostv1.ListServersResponse, error) {
	return &toolhostv1.ListServersResponse{Servers: h.sup.List()}, nil
}

// ListTools implements ToolHostService.
func (h *Host) ListTools(ctx context.Context, req *toolhostv1.ListToolsRequest) (*toolhostv1.ListToolsResponse, error) {
	tools, err := h.sup.ListTools(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	out := &toolhostv1.ListToolsResponse{Tools: make([][]byte, len(tools))}
	for i, t := range tools {
		out.Tools[i] = t
	}
	return out, nil
}

// Call implements ToolHostService. A unary call cannot carry the child's requests back: they
// are answered by the tool host (its relays are ignored).
func (h *Host) Call(ctx context.Context, req *toolhostv1.CallRequest) (*toolhostv1.CallResponse, error) {
	return h.call(ctx, req, stdio.Hooks{})
}

// CallStream implements ToolHostService: progress notifications of the call and the child's
// requests its relays accept, then its answer.
func (h *Host) CallStream(req *toolhostv1.CallStreamRequest, stream toolhostv1.ToolHostService_CallStreamServer) error {
	if req.GetCall().GetParkMs() > 0 && req.GetCall().GetRelays() != nil {
		return h.callParkable(req, stream)
	}
	var mu sync.Mutex // progress and requests come from the read loop, the answer from here
	send := func(item *toolhostv1.CallStreamResponse) error {
		mu.Lock()
		defer mu.Unlock()
		return stream.Send(item)
	}
	hooks := stdio.Hooks{OnProgress: func(n []byte) {
		// Sent from the child's read loop: a slow caller delays the other callers of that
		// server, which is why progress is only streamed to callers who ask for it.
		_ = send(&toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Notification{Notification: n}})
	}}
	if rl := req.GetCall().GetRelays(); rl.GetSampling() || rl.GetElicitation() || rl.GetRoots() {
		ids := h.relays.forCall()
		defer ids.end()
		hooks.Accepts = func(method string) bool {
			return method == stdio.MethodSampling && rl.GetSampling() || method == stdio.MethodElicitation && rl.GetElicitation() ||
				method == stdio.MethodRoots && rl.GetRoots()
		}
		hooks.OnRequest = func(method string, params json.RawMessage, reply stdio.Reply) {
			id := ids.add(reply)
			item := &toolhostv1.ServerRequest{RelayId: id, Method: method, Params: params}
			if err := send(&toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Request{Request: item}}); err != nil {
				h.relays.take(id)
				reply(nil, &stdio.RPCError{Code: -32603, Message: "Internal error: the request could not be passed on to the client: " + err.Error()})
			}
		}
	}
	answer, err := h.call(stream.Context(), req.GetCall(), hooks)
	if err != nil {
		return err
	}
	return send(&toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Answer{Answer: answer}})
}

// call runs one request. Its answer says how far the server's notifications had come when
// the child's answer was read (CallResponse.notification_seq): a caller that relays both to
// one MCP client keeps them in the order the child wrote them.
func (h *Host) call(ctx context.Context, req *toolhostv1.CallRequest, hooks stdio.Hooks) (*toolhostv1.CallResponse, error) {
	var seq atomic.Uint64
	hooks.OnAnswer = func() { seq.Store(h.sup.Notified(req.GetId())) }
	res, err := h.sup.CallWith(ctx, req.GetId(), req.GetMethod(), req.GetParams(), req.GetTimeoutMs(), hooks)
	var rpcErr *stdio.RPCError
	switch {
	case errors.As(err, &rpcErr):
		return &toolhostv1.CallResponse{Answer: &toolhostv1.CallResponse_Error{Error: &toolhostv1.JsonRpcError{
			Code: int32(rpcErr.Code), Message: rpcErr.Message, Data: rpcErr.Data}}, NotificationSeq: seq.Load()}, nil
	case err != nil:
		return nil, toStatus(err)
	}
	return &toolhostv1.CallResponse{Answer: &toolhostv1.CallResponse_Result{Result: res}, NotificationSeq: seq.Load()}, nil
}

// Watch implements ToolHostService.
func (h *Host) Watch(req *toolhostv1.WatchRequest, stream toolhostv1.ToolHostService_WatchServer) error {
	ctx := stream.Context()
	events := h.sup.Watch(ctx, req.GetId())
	// The headers tell the caller that the watcher is registered: it misses no later event.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	for {
		var ev supervisor.Event
		select {
		case <-ctx.Done():
			return nil
		case <-h.srv.Draining(): // Watch streams never end on their own: a graceful stop would wait out its timeout
			return status.Error(codes.Unavailable, "the tool host is shutting down; watch again")
		case ev = <-events:
		}
		resp := &toolhostv1.WatchResponse{Id: ev.ID, Seq: ev.Seq}
		switch {
		case ev.Status != nil:
			resp.Kind = &toolhostv1.WatchResponse_Status{Status: ev.Status}
		case ev.Published > 0:
			resp.Kind = &toolhostv1.WatchResponse_Published{Published: ev.Published}
		default:
			resp.Kind = &toolhostv1.WatchResponse_Notification{Notification: ev.Notification}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}
