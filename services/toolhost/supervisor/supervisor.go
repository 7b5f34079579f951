// Package supervisor keeps the stdio MCP servers of the tool host: one child per registered
// server, shared by every caller, launched once for all who need it and detached from any one
// of them; a clean environment for each child (env.go); the MCP handshake; a tool cache
// refreshed on tools/list_changed; restarts after crashes with exponential backoff; optional
// idle stop and lazy start; and watchers of state changes and notifications.
package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zestmcp/zest/lib/envref"
	"github.com/zestmcp/zest/lib/sandboxspec"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/sandbox"
	"github.com/zestmcp/zest/services/toolhost/shim"
	"github.com/zestmcp/zest/services/toolhost/stdio"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// OfferedVersion is the MCP version offered to a server (AcceptedVersions, those it may answer).
const OfferedVersion = "2025-11-25"

// AcceptedVersions are the MCP versions a server may answer with.
var AcceptedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Version is sent as clientInfo.version.
var Version = "0.1.0"

// Config holds the supervisor's limits and policies.
type Config struct {
	MaxLineBytes    int
	StderrTailBytes int
	MaxInFlight     int
	// MaxStdinQueueBytes bounds the request bytes waiting for a child that does not read.
	MaxStdinQueueBytes int
	// MaxRelays bounds the requests of one child waiting for callers' clients.
	MaxRelays int
	// OrphanWindow is how long a call given up on still counts as in flight on its child when
	// a request of the child is attributed (0: stdio.DefaultOrphanWindow, 30 s).
	OrphanWindow time.Duration
	StopGrace    time.Duration
	// IdleTimeout stops a child unused for this long (0: never); the next call starts it.
	IdleTimeout time.Duration
	// LazyStart makes EnsureStarted only check and register; the first call launches.
	LazyStart bool
	// BackoffBase and BackoffMax shape restart delays after repeated crashes.
	BackoffBase, BackoffMax time.Duration
	// Shim is the argv prefix that runs each server under the shim (empty: run directly).
	Shim []string
	// DefaultTimeout applies when a spec sets no timeout_ms.
	DefaultTimeout time.Duration
	// EnvAllow adds names and prefixes (NAME*) to DefaultEnvAllow: the variables of the tool
	// host's environment a server inherits. ZEST_* and LEMONADE_* are never passed on.
	EnvAllow []string
	// Environ is the environment servers inherit from (os.Environ when nil), and LookupEnv
	// resolves ${VAR} references (os.LookupEnv when nil).
	Environ   func() []string
	LookupEnv func(string) (string, bool)
	Logger    *slog.Logger
	// Sandbox is the operator's sandbox default and user (package sandbox): a server runs
	// sandboxed when its spec says so or, saying nothing, when Sandbox.Default is set.
	Sandbox sandbox.Settings
	// ServerUID and ServerGID, when ServerUID is above 0 and the tool host runs as root, are
	// who the servers that are not sandboxed run as (their shims stay root; sandboxed servers
	// run as Sandbox.UID): root could read the tool host's memory and environment, its service
	// key included, whatever else stopped it. 0 runs them as the tool host runs. Needs Shim.
	ServerUID, ServerGID int
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		MaxLineBytes: stdio.DefaultMaxLineBytes, StderrTailBytes: stdio.DefaultStderrTailBytes,
		MaxInFlight: stdio.DefaultMaxInFlight, MaxStdinQueueBytes: stdio.DefaultMaxStdinQueueBytes, StopGrace: stdio.DefaultStopGrace,
		MaxRelays:   stdio.DefaultMaxRelays,
		BackoffBase: 500 * time.Millisecond, BackoffMax: 30 * time.Second, DefaultTimeout: 30 * time.Second,
	}
}

// Event is one thing a watcher sees: a status change or a notification (numbered: Seq), or,
// first of all, how far a server's notifications had come before the watcher was registered
// (Published).
type Event struct {
	ID           string
	Status       *toolhostv1.ServerStatus
	Notification []byte
	// Seq numbers a notification among its server's: from 1, in the order they are passed on
	// to watchers, for the life of the supervisor (Notified).
	Seq uint64
	// Published, in the events a watcher gets first, is the Seq of the server's last
	// notification before the watcher was registered.
	Published uint64
}

// Supervisor keeps the servers.
type Supervisor struct {
	cfg      Config
	log      *slog.Logger
	mu       sync.Mutex
	servers  map[string]*server
	watchers map[*watcher]struct{}
	// notes counts each server's notifications passed on to watchers (Event.Seq), by id, for
	// the supervisor's life: a server stopped, restarted or registered again goes on from its
	// count, so that a watcher never sees a number twice.
	notes    map[string]uint64
	closed   atomic.Bool // set under mu; read without it where a server's lock is held
	stopIdle chan struct{}
	envAllow envFilter
}

type watcher struct {
	id string
	ch chan Event
}

// New returns a supervisor; Close stops every child. It makes the process non-dumpable
// (PR_SET_DUMPABLE 0): the process that runs untrusted servers must not be theirs to read —
// its /proc entries (environ, mem, maps, fd/) then open only to root with CAP_SYS_PTRACE, so a
// server running as the same user reads none of them, and core dumps, which would hold the
// service key, are off.
func New(cfg Config) *Supervisor {
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 30 * time.Second
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		cfg.Logger.Error("cannot make the tool host non-dumpable: servers running as its user may read its environment and memory", "err", err)
	}
	s := &Supervisor{cfg: cfg, log: cfg.Logger, servers: map[string]*server{}, watchers: map[*watcher]struct{}{}, notes: map[string]uint64{}, stopIdle: make(chan struct{}),
		envAllow: newEnvFilter(DefaultEnvAllow, cfg.EnvAllow)}
	if cfg.IdleTimeout > 0 {
		go s.idleLoop()
	}
	track(s) // metrics.go
	return s
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,96}$`)

// server is one registered server and its current child, if any.
type server struct {
	sup  *Supervisor
	id   string
	mu   sync.Mutex
	spec *toolhostv1.ServerSpec
	path string
	env  []string // the child's whole environment; holds secret values: never logged or returned
	// plan confines the child (nil: it runs unconfined).
	plan *sandbox.Plan

	conn       *stdio.Conn
	state      toolhostv1.ServerState
	starting   *launch // the launch in progress, if any
	gen        int     // bumped by every stop and spec change: a launch of an older gen is void
	started    time.Time
	restarts   int32
	crashes    int
	nextStart  time.Time
	lastErr    string
	stderrTail string
	protocol   string
	serverInfo map[string]any
	caps       map[string]any
	// instructions is what the child's initialize result said in "instructions".
	instructions string
	tools        []json.RawMessage
	lastUse      time.Time
	everRan      bool
	// calls counts the calls admitted (CallWith) and not yet ended; draining, set by
	// StopDrained, admits no more: both under mu, so that a drain that saw no call left can
	// stop the child without one slipping in.
	calls    int
	draining bool
}

// prepare checks a spec and resolves its command and environment.
func (s *Supervisor) prepare(spec *toolhostv1.ServerSpec) (path string, env []string, err error) {
	if !idPattern.MatchString(spec.GetId()) {
		return "", nil, fmt.Errorf("%w: id %q must match [A-Za-z0-9_.-]{1,96}", ErrBadSpec, spec.GetId())
	}
	if spec.GetCommand() == "" {
		return "", nil, fmt.Errorf("%w: command is empty; give the program that runs the MCP server", ErrBadSpec)
	}
	if t := spec.GetTimeoutMs(); t != 0 && (t < 1000 || t > 300000) {
		return "", nil, fmt.Errorf("%w: timeout_ms %d must be between 1000 and 300000", ErrBadSpec, t)
	}
	if err := checkReferences(spec.GetEnv()); err != nil { // before any variable is read
		return "", nil, err
	}
	declared, err := envref.Resolve(spec.GetEnv(), s.cfg.LookupEnv) // checks every name and reference first
	if err != nil {
		return "", nil, err
	}
	path, err = exec.LookPath(spec.GetCommand())
	if err != nil {
		return "", nil, fmt.Errorf("%w %q: %w", stdio.ErrLaunch, spec.GetCommand(), unwrapExecErr(err))
	}
	if d := spec.GetWorkingDir(); d != "" {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return "", nil, fmt.Errorf("%w: working_dir %q is not a directory", ErrBadSpec, d)
		}
	}
	return path, childEnv(s.cfg.Environ(), s.envAllow, declared), nil
}

// sandboxPlan checks spec's sandbox and, when the server runs sandboxed, resolves how. A
// sandbox that is asked for and cannot run here fails the start: never unconfined instead.
func (s *Supervisor) sandboxPlan(spec *toolhostv1.ServerSpec, path string, env []string) (*sandbox.Plan, error) {
	if err := sandboxspec.Check(spec.GetSandbox()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	if !sandbox.Enabled(spec.GetSandbox(), s.cfg.Sandbox.Default) {
		return nil, nil
	}
	plan, err := sandbox.NewPlan(spec.GetSandbox(), s.cfg.Sandbox, path, spec.GetWorkingDir(), env)
	if errors.Is(err, sandboxspec.ErrBadSandbox) {
		err = fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	return plan, err
}

func unwrapExecErr(err error) error {
	var e *exec.Error
	if errors.As(err, &e) {
		return e.Err
	}
	return err
}

// EnsureStarted registers spec and, unless lazy, launches the child and completes the
// handshake. A changed spec replaces the running child.
func (s *Supervisor) EnsureStarted(ctx context.Context, spec *toolhostv1.ServerSpec, lazy bool) (*toolhostv1.ServerStatus, error) {
	path, env, err := s.prepare(spec)
	if err != nil {
		return nil, err
	}
	plan, err := s.sandboxPlan(spec, path, env)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	srv := s.servers[spec.GetId()]
	if srv == nil {
		srv = &server{sup: s, id: spec.GetId(), state: toolhostv1.ServerState_SERVER_STATE_STOPPED}
		s.servers[spec.GetId()] = srv
	}
	s.mu.Unlock()

	srv.mu.Lock()
	changed := srv.spec != nil && !proto.Equal(srv.spec, spec)
	srv.spec, srv.path, srv.env, srv.plan = proto.Clone(spec).(*toolhostv1.ServerSpec), path, env, plan
	old := srv.conn
	if changed {
		srv.gen++
		srv.conn, srv.crashes, srv.nextStart = nil, 0, time.Time{}
		srv.state = toolhostv1.ServerState_SERVER_STATE_STOPPED
	}
	srv.mu.Unlock()
	if changed && old != nil {
		s.log.Info("spec changed; restarting MCP server", "id", spec.GetId())
		_ = old.Stop()
	}
	if lazy || s.cfg.LazyStart {
		return srv.status(), nil
	}
	if _, err := srv.ensureRunning(ctx); err != nil {
		return srv.status(), err
	}
	return srv.status(), nil
}

func (s *Supervisor) get(id string) (*server, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv := s.servers[id]
	if srv == nil {
		return nil, fmt.Errorf("%w %q: start it first (EnsureStarted)", ErrUnknownServer, id)
	}
	return srv, nil
}

// Conn is server id's running child; an error when it has none.
func (s *Supervisor) Conn(id string) (*stdio.Conn, error) {
	srv, err := s.get(id)
	if err != nil {
		return nil, err
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.conn == nil {
		return nil, fmt.Errorf("server %q has no running child", id)
	}
	return srv.conn, nil
}

// launch is one start of a server's child, shared by every caller who needs it meanwhile.
type launch struct {
	done chan struct{} // closed when the child is ready or failed
	err  error         // why it failed; read after done
	gen  int
}

// ensureRunning returns a ready child, launching one (once, whoever asks) when needed. The
// launch runs detached from the caller who happened to start it, bounded by the spec's
// timeout; every caller waits for it with its own context, and one who gives up fails alone.
func (srv *server) ensureRunning(ctx context.Context) (*stdio.Conn, error) {
	for {
		srv.mu.Lock()
		if srv.conn != nil && srv.state == toolhostv1.ServerState_SERVER_STATE_READY {
			c := srv.conn
			srv.mu.Unlock()
			if exit := c.Err(); exit != nil { // exited; its OnExit may not have run yet
				srv.onExit(c, exit)
				continue
			}
			return c, nil
		}
		l := srv.starting
		if l == nil {
			if srv.sup.closed.Load() {
				srv.mu.Unlock()
				return nil, ErrClosed
			}
			if wait := time.Until(srv.nextStart); wait > 0 {
				err := fmt.Errorf("%w: %q crashed %d times in a row; next restart in %v; last error: %s",
					ErrCrashLoop, srv.id, srv.crashes, wait.Round(time.Millisecond), srv.lastErr)
				srv.mu.Unlock()
				return nil, err
			}
			l = &launch{done: make(chan struct{}), gen: srv.gen}
			srv.starting = l
			if srv.state == toolhostv1.ServerState_SERVER_STATE_FAILED {
				srv.restarts++
				countRestart(srv.id)
			}
			srv.state = toolhostv1.ServerState_SERVER_STATE_STARTING
			spec, path, env, plan := srv.spec, srv.path, srv.env, srv.plan
			srv.mu.Unlock()
			srv.sup.publish(srv.id, srv.status(), nil)
			go srv.run(context.WithoutCancel(ctx), l, spec, path, env, plan)
		} else {
			srv.mu.Unlock()
		}
		select {
		case <-l.done:
			if l.err != nil && !srv.superseded(l) {
				return nil, l.err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// superseded says whether launch l was made void by a change of the server's spec rather
// than by a stop: the server is still registered under its id, so its callers go on with the
// new spec instead of failing with the void launch's ErrStopped.
func (srv *server) superseded(l *launch) bool {
	srv.mu.Lock()
	void := srv.gen != l.gen
	srv.mu.Unlock()
	if !void {
		return false
	}
	s := srv.sup
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed.Load() && s.servers[srv.id] == srv
}

// run performs launch l and records its outcome.
func (srv *server) run(ctx context.Context, l *launch, spec *toolhostv1.ServerSpec, path string, env []string, plan *sandbox.Plan) {
	conn, err := srv.launch(ctx, l.gen, spec, path, env, plan)

	srv.mu.Lock()
	stopped := srv.gen != l.gen
	switch {
	case stopped: // stopped (or its spec replaced) while it started: not a crash
		if conn != nil {
			defer conn.Stop() //nolint:errcheck // outside the lock
		}
		err = fmt.Errorf("%w while it started", ErrStopped)
	case err == nil && srv.conn != conn: // exited between the handshake and now
		err = fmt.Errorf("%w: %w", ErrHandshake, conn.Err())
	}
	if err != nil && !stopped && plan != nil {
		if hidden := plan.Hidden(append([]string{spec.GetWorkingDir()}, spec.GetArgs()...)); len(hidden) > 0 {
			err = fmt.Errorf("%w (the sandbox hides %s: it gives the server a private /tmp and $HOME; add the directory to sandbox.readable_paths, or writable_paths)", err, strings.Join(hidden, ", "))
		}
	}
	if uid, _, other := srv.sup.serverUser(); err != nil && !stopped && plan == nil && other {
		err = fmt.Errorf("%w (the tool host is root, so this server runs as uid %d, ZEST_TOOLHOST_SERVER_UID: its program, working directory and files must be readable by that user, and $HOME is the tool host's; or sandbox it)", err, uid)
	}
	srv.starting = nil
	l.err = err
	srv.everRan = true
	switch {
	case stopped:
		if srv.state == toolhostv1.ServerState_SERVER_STATE_STARTING {
			srv.state = toolhostv1.ServerState_SERVER_STATE_STOPPED
		}
	case err != nil:
		srv.state = toolhostv1.ServerState_SERVER_STATE_FAILED
		srv.lastErr = err.Error()
		srv.crashes++
		srv.nextStart = time.Now().Add(srv.sup.backoff(srv.crashes))
	default:
		srv.state = toolhostv1.ServerState_SERVER_STATE_READY
		srv.lastUse = time.Now()
	}
	srv.mu.Unlock()
	close(l.done)
	srv.sup.publish(srv.id, srv.status(), nil)
}

// serverUser is who a server that is not sandboxed runs as, when that is another user than
// the tool host's (ServerUID is set and the tool host is root).
func (s *Supervisor) serverUser() (uid, gid int, other bool) {
	if s.cfg.ServerUID <= 0 || os.Geteuid() != 0 {
		return 0, 0, false
	}
	gid = s.cfg.ServerGID
	if gid <= 0 {
		gid = s.cfg.ServerUID
	}
	return s.cfg.ServerUID, gid, true
}

// backoff is the delay before restart number n of a crash loop: none for the first crash,
// then base, 2·base, 4·base, … up to max.
func (s *Supervisor) backoff(crashes int) time.Duration {
	if crashes <= 1 {
		return 0
	}
	d := s.cfg.BackoffBase << min(crashes-2, 20)
	return min(d, s.cfg.BackoffMax)
}

// launch starts a child and completes the MCP handshake within the spec's timeout. A child
// started after a stop of the server (gen changed) is stopped at once.
func (srv *server) launch(ctx context.Context, gen int, spec *toolhostv1.ServerSpec, path string, env []string, plan *sandbox.Plan) (*stdio.Conn, error) {
	s := srv.sup
	args := spec.GetArgs()
	var proxy *sandbox.Proxy // network "proxy": this start's filtering proxy, closed when the child exits
	if plan != nil && plan.Network == sandboxspec.NetworkProxy {
		var err error
		proxy, err = sandbox.StartProxy(sandbox.ProxyOptions{
			AllowHosts: spec.GetSandbox().GetAllowHosts(), UID: plan.UID, GID: plan.GID,
			Logger: s.log.With("server", spec.GetId()),
		})
		if err != nil {
			return nil, fmt.Errorf("%w: sandbox proxy: %w", sandbox.ErrUnavailable, err)
		}
		p := *plan
		p.ProxySocket = proxy.Socket
		plan = &p
	}
	shimArgv := s.cfg.Shim
	if plan != nil { // the shim runs the sandbox's outer step, which runs the server
		path, args = plan.Argv(path, args)
	} else if uid, gid, other := s.serverUser(); other {
		if len(shimArgv) == 0 {
			return nil, fmt.Errorf("%w: running servers as uid %d needs the shim (Config.Shim)", stdio.ErrLaunch, uid)
		}
		shimArgv = append(slices.Clip(shimArgv), shim.RunAs(uid, gid)...)
	}
	// The callbacks run on the conn's goroutines, which may start before Start has returned
	// conn: they wait for it (Start starts them only on success, right before returning).
	var conn *stdio.Conn
	ready := make(chan struct{})
	conn, err := stdio.Start(stdio.Options{
		Path: path, Args: args, Dir: spec.GetWorkingDir(), Env: env,
		MaxLineBytes: s.cfg.MaxLineBytes, StderrTailBytes: s.cfg.StderrTailBytes, MaxInFlight: s.cfg.MaxInFlight,
		MaxStdinQueueBytes: s.cfg.MaxStdinQueueBytes, MaxRelays: s.cfg.MaxRelays, OrphanWindow: s.cfg.OrphanWindow,
		StopGrace: s.cfg.StopGrace, Shim: shimArgv, Logger: s.log.With("server", spec.GetId()),
		OnNotification: func(method string, msg []byte) { <-ready; srv.onNotification(conn, method, msg) },
		OnExit: func(err error) {
			<-ready
			if proxy != nil {
				proxy.Close()
			}
			countExit(err)
			srv.onExit(conn, err)
		},
	})
	close(ready)
	if err != nil {
		if proxy != nil {
			proxy.Close()
		}
		return nil, err
	}
	childStarts.Inc()
	srv.mu.Lock()
	if srv.gen != gen {
		srv.mu.Unlock()
		_ = conn.Stop()
		return nil, ErrStopped
	}
	srv.conn, srv.started = conn, time.Now()
	srv.mu.Unlock()
	s.log.Info("MCP server started", "id", spec.GetId(), "pid", conn.Pid(), "command", spec.GetCommand(), "sandboxed", plan != nil)

	hctx, cancel := context.WithTimeout(ctx, srv.timeout(spec))
	defer cancel()
	if err := srv.handshake(hctx, conn); err != nil {
		if conn.Err() != nil && !errors.Is(err, stdio.ErrExited) { // the child died: report why
			err = fmt.Errorf("%w: %w", err, conn.Err())
		}
		_ = conn.Stop()
		srv.mu.Lock()
		if srv.conn == conn {
			srv.conn = nil
			srv.stderrTail = conn.StderrTail()
		}
		srv.mu.Unlock()
		return nil, err
	}
	return conn, nil
}

func (srv *server) timeout(spec *toolhostv1.ServerSpec) time.Duration {
	if t := spec.GetTimeoutMs(); t > 0 {
		return time.Duration(t) * time.Millisecond
	}
	return srv.sup.cfg.DefaultTimeout
}

func (srv *server) handshake(ctx context.Context, conn *stdio.Conn) error {
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": OfferedVersion,
		// The tool host's callers may relay these to their MCP clients (stdio.Conn.CallWith);
		// a request no caller can take is answered by the tool host.
		"capabilities": map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}},
		"clientInfo":   map[string]any{"name": "zest-toolhost", "version": Version},
	})
	raw, err := conn.Call(ctx, "initialize", params, nil)
	if err != nil {
		return fmt.Errorf("%w: initialize: %w", ErrHandshake, err)
	}
	var res struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		ServerInfo      map[string]any `json:"serverInfo"`
		Instructions    string         `json:"instructions"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("%w: initialize result: %w", ErrHandshake, err)
	}
	if !slices.Contains(AcceptedVersions, res.ProtocolVersion) {
		return fmt.Errorf("%w: server answered protocol version %q; Zest accepts %v", ErrHandshake, res.ProtocolVersion, AcceptedVersions)
	}
	if err := conn.Notify(ctx, "notifications/initialized", nil); err != nil {
		return fmt.Errorf("%w: notifications/initialized: %w", ErrHandshake, err)
	}
	srv.mu.Lock()
	srv.protocol, srv.caps, srv.serverInfo, srv.instructions = res.ProtocolVersion, res.Capabilities, res.ServerInfo, res.Instructions
	srv.mu.Unlock()
	if _, ok := res.Capabilities["tools"]; ok {
		tools, err := listTools(ctx, conn)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrHandshake, err)
		}
		srv.mu.Lock()
		srv.tools = tools
		srv.mu.Unlock()
	}
	return nil
}

// maxToolPages bounds tools/list paging against a server that never stops returning cursors.
const maxToolPages = 100

func listTools(ctx context.Context, conn *stdio.Conn) ([]json.RawMessage, error) {
	var all []json.RawMessage
	cursor := ""
	for range maxToolPages {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		raw, err := conn.Call(ctx, "tools/list", params, nil)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("tools/list result: %w", err)
		}
		all = append(all, page.Tools...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", maxToolPages)
}

func (srv *server) onNotification(conn *stdio.Conn, method string, msg []byte) {
	if method == "notifications/tools/list_changed" {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), srv.sup.cfg.DefaultTimeout)
			defer cancel()
			tools, err := listTools(ctx, conn)
			if err != nil {
				srv.sup.log.Warn("re-listing tools after list_changed failed", "id", srv.id, "err", err)
				return
			}
			srv.mu.Lock()
			if srv.conn == conn {
				srv.tools = tools
			}
			srv.mu.Unlock()
			srv.sup.publish(srv.id, nil, msg)
		}()
		return
	}
	srv.sup.publish(srv.id, nil, msg)
}

// crashResetAfter is how long a child must run before its crash count starts over.
const crashResetAfter = 30 * time.Second

func (srv *server) onExit(conn *stdio.Conn, err error) {
	srv.mu.Lock()
	if srv.conn != conn {
		srv.mu.Unlock()
		return
	}
	srv.conn = nil
	srv.stderrTail = conn.StderrTail()
	if srv.state == toolhostv1.ServerState_SERVER_STATE_STARTING {
		srv.mu.Unlock() // the failed launch reports it
		return
	}
	if errors.Is(err, stdio.ErrStopped) {
		srv.state = toolhostv1.ServerState_SERVER_STATE_STOPPED
	} else {
		srv.state = toolhostv1.ServerState_SERVER_STATE_FAILED
		srv.lastErr = err.Error()
		if time.Since(srv.started) > crashResetAfter {
			srv.crashes = 0
		}
		srv.crashes++
		srv.nextStart = time.Now().Add(srv.sup.backoff(srv.crashes))
		srv.sup.log.Warn("MCP server exited", "id", srv.id, "err", err, "crashes", srv.crashes)
	}
	srv.mu.Unlock()
	srv.sup.publish(srv.id, srv.status(), nil)
}

// Call sends one request to a server, starting its child first when needed.
func (s *Supervisor) Call(ctx context.Context, id, method string, params json.RawMessage, timeoutMs int32, onProgress func([]byte)) (json.RawMessage, error) {
	return s.CallWith(ctx, id, method, params, timeoutMs, stdio.Hooks{OnProgress: onProgress})
}

// CallWith is Call with the hooks of a caller that relays the child's requests (see
// stdio.Conn.CallWith).
func (s *Supervisor) CallWith(ctx context.Context, id, method string, params json.RawMessage, timeoutMs int32, hooks stdio.Hooks) (json.RawMessage, error) {
	srv, err := s.get(id)
	if err != nil {
		return nil, err
	}
	srv.mu.Lock()
	if srv.draining {
		srv.mu.Unlock()
		return nil, fmt.Errorf("%w: %q stops on this tool host once its calls in flight end (it moved to another); this call did not reach it", ErrMoving, id)
	}
	srv.calls++
	srv.mu.Unlock()
	defer func() {
		srv.mu.Lock()
		srv.calls--
		srv.mu.Unlock()
	}()
	conn, err := srv.ensureRunning(ctx)
	if err != nil {
		return nil, err
	}
	srv.mu.Lock()
	d := srv.timeout(srv.spec)
	srv.lastUse = time.Now()
	srv.mu.Unlock()
	if timeoutMs > 0 {
		d = time.Duration(timeoutMs) * time.Millisecond
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	res, err := conn.CallWith(cctx, method, params, hooks)
	srv.mu.Lock()
	srv.lastUse = time.Now()
	srv.mu.Unlock()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, fmt.Errorf("%s on %q timed out after %v: %w", method, id, d, err)
	}
	return res, err
}

// ListTools returns the cached tools of a server, starting it when it never ran.
func (s *Supervisor) ListTools(ctx context.Context, id string) ([]json.RawMessage, error) {
	srv, err := s.get(id)
	if err != nil {
		return nil, err
	}
	srv.mu.Lock()
	tools, ran := srv.tools, srv.everRan
	srv.mu.Unlock()
	if !ran {
		if _, err := srv.ensureRunning(ctx); err != nil {
			return nil, err
		}
		srv.mu.Lock()
		tools = srv.tools
		srv.mu.Unlock()
	}
	return tools, nil
}

// Stop stops a server's child and forgets the server.
func (s *Supervisor) Stop(id string) (*toolhostv1.ServerStatus, error) {
	return s.StopDrained(context.Background(), id, 0)
}

// drainPoll is how often StopDrained looks at the calls in flight.
const drainPoll = 10 * time.Millisecond

// StopDrained is Stop after the calls in flight on the child have ended, waiting for them
// up to drain (or until ctx ends): a server moved to another tool host stops here without
// failing the calls any mcpgateway replica still has on it. From the start of the drain, a
// new call is refused with ErrMoving without reaching the child: its caller sends it where
// the server runs now.
func (s *Supervisor) StopDrained(ctx context.Context, id string, drain time.Duration) (*toolhostv1.ServerStatus, error) {
	if drain > 0 {
		srv, err := s.get(id)
		if err != nil {
			return nil, err
		}
		srv.mu.Lock()
		srv.draining = true
		srv.mu.Unlock()
		deadline := time.NewTimer(drain)
		defer deadline.Stop()
		tick := time.NewTicker(drainPoll)
		defer tick.Stop()
	wait:
		for srv.admitted() > 0 {
			select {
			case <-ctx.Done():
				break wait
			case <-deadline.C:
				s.log.Info("stopping an MCP server with calls still in flight: they did not end within the drain time", "id", id, "drain", drain.String())
				break wait
			case <-tick.C:
			}
		}
	}
	s.mu.Lock()
	srv := s.servers[id]
	delete(s.servers, id)
	s.mu.Unlock()
	if srv == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownServer, id)
	}
	srv.stop()
	st := srv.status()
	s.publish(id, st, nil)
	return st, nil
}

// admitted counts the calls CallWith admitted that have not ended.
func (srv *server) admitted() int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.calls
}

func (srv *server) stop() {
	srv.mu.Lock()
	srv.gen++
	conn := srv.conn
	srv.mu.Unlock()
	if conn != nil {
		_ = conn.Stop()
	}
	srv.mu.Lock()
	srv.state = toolhostv1.ServerState_SERVER_STATE_STOPPED
	srv.mu.Unlock()
}

// Status reports one server.
func (s *Supervisor) Status(id string) (*toolhostv1.ServerStatus, error) {
	srv, err := s.get(id)
	if err != nil {
		return nil, err
	}
	return srv.status(), nil
}

// List reports every server, ordered by id.
func (s *Supervisor) List() []*toolhostv1.ServerStatus {
	s.mu.Lock()
	ids := make([]string, 0, len(s.servers))
	for id := range s.servers {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	sort.Strings(ids)
	var out []*toolhostv1.ServerStatus
	for _, id := range ids {
		if st, err := s.Status(id); err == nil {
			out = append(out, st)
		}
	}
	return out
}

func (srv *server) status() *toolhostv1.ServerStatus {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	st := &toolhostv1.ServerStatus{
		Id: srv.id, State: srv.state, RestartCount: srv.restarts, LastError: srv.lastErr,
		StderrTail: srv.stderrTail, ProtocolVersion: srv.protocol,
	}
	if srv.conn != nil {
		st.Pid = int32(srv.conn.Pid())
		st.StderrTail = srv.conn.StderrTail()
		st.StartTime = timestamppb.New(srv.started)
	}
	if srv.serverInfo != nil {
		st.ServerInfo, _ = structpb.NewStruct(srv.serverInfo)
	}
	if srv.caps != nil {
		st.Capabilities, _ = structpb.NewStruct(srv.caps)
	}
	st.Instructions = srv.instructions
	if srv.plan != nil {
		st.Sandbox = srv.plan.Status()
	}
	return st
}

// watchBuffer is how many events wait for a watcher that does not read; beyond it the
// oldest it has not read are dropped.
const watchBuffer = 256

// Watch returns events of one server (or all when id is empty) until ctx is done: first, for
// each server that has sent notifications, how far they had come (Event.Published); then
// every status change and notification from the moment it was registered. A watcher that
// falls more than 256 events behind (and one more for each of those first events) loses the
// oldest ones it has not read.
func (s *Supervisor) Watch(ctx context.Context, id string) <-chan Event {
	s.mu.Lock()
	w := &watcher{id: id, ch: make(chan Event, watchBuffer+len(s.notes))}
	for sid, n := range s.notes {
		if id == "" || id == sid {
			w.ch <- Event{ID: sid, Published: n}
		}
	}
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
	}()
	return w.ch
}

// Notified is the Seq of the last notification of server id passed on to watchers (0: none
// yet).
func (s *Supervisor) Notified(id string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notes[id]
}

// publish passes a status change or a notification of server id on to the watchers; a
// notification takes the next number of the server's (its number and its place in every
// watcher's queue are taken under one lock, so that numbers come in order).
func (s *Supervisor) publish(id string, st *toolhostv1.ServerStatus, note []byte) {
	ev := Event{ID: id, Status: st, Notification: note}
	s.mu.Lock()
	defer s.mu.Unlock()
	if note != nil {
		s.notes[id]++
		ev.Seq = s.notes[id]
	}
	for w := range s.watchers {
		if w.id != "" && w.id != id {
			continue
		}
		select {
		case w.ch <- ev:
		default:
			select { // drop the oldest to make room
			case <-w.ch:
			default:
			}
			select {
			case w.ch <- ev:
			default:
			}
		}
	}
}

func (s *Supervisor) idleLoop() {
	tick := time.NewTicker(max(s.cfg.IdleTimeout/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.stopIdle:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		var idle []*server
		for _, srv := range s.servers {
			srv.mu.Lock()
			if srv.conn != nil && srv.conn.InFlight() == 0 && srv.state == toolhostv1.ServerState_SERVER_STATE_READY &&
				time.Since(srv.lastUse) > s.cfg.IdleTimeout {
				idle = append(idle, srv)
			}
			srv.mu.Unlock()
		}
		s.mu.Unlock()
		for _, srv := range idle {
			s.log.Info("stopping idle MCP server", "id", srv.id, "idle_timeout", s.cfg.IdleTimeout.String())
			srv.stop()
			s.publish(srv.id, srv.status(), nil)
		}
	}
}

// Close stops every child (in parallel) and refuses new starts.
func (s *Supervisor) Close() {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return
	}
	s.closed.Store(true)
	close(s.stopIdle)
	defer untrack(s) // after the children stopped: metrics.go
	servers := make([]*server, 0, len(s.servers))
	for _, srv := range s.servers {
		servers = append(servers, srv)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); srv.stop() }()
	}
	wg.Wait()
}
