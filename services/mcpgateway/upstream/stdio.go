package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/toolhosts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// stdioSession is a stdio server run by a tool host.
type stdioSession struct {
	th    toolhostv1.ToolHostServiceClient
	spec  *toolhostv1.ServerSpec
	log   *slog.Logger
	cache toolCache
	lists relister
	// host is the tool host the server runs on, hosts the pool it belongs to, pin the
	// server's tool_host.
	host  toolhosts.Host
	hosts *toolhosts.Pool
	pin   string
	// relayed is how far the Watch streams have passed on the servers' notifications (the
	// Manager's; Hooks.Ordered).
	relayed *relayed
	// placedAt is the pool generation at which host was last the server's placement
	// (Manager.placed).
	placedAt atomic.Uint64

	mu  sync.Mutex
	inf Info
}

func openStdio(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, host toolhosts.Host, hosts *toolhosts.Pool, rel *relayed, admit admitFunc, log *slog.Logger) (*stdioSession, error) {
	s := &stdioSession{th: host.Client, host: host, hosts: hosts, relayed: rel, pin: cfg.GetToolHost(), log: log, spec: &toolhostv1.ServerSpec{
		Id: cfg.GetId(), Command: cfg.GetCommand(), Args: cfg.GetArgs(), WorkingDir: cfg.GetWorkingDir(),
		Env: cfg.GetEnv(), TimeoutMs: cfg.GetTimeoutMs(), Sandbox: serverconfig.ToToolHost(cfg.GetSandbox()),
	}}
	s.cache.admit = admit
	s.placedAt.Store(hosts.Generation())
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	if _, err := s.tools(ctx, true); err != nil {
		return nil, err
	}
	return s, nil
}

// start asks the tool host for the child (idempotent) and records the handshake.
func (s *stdioSession) start(ctx context.Context) error {
	r, err := s.th.EnsureStarted(ctx, &toolhostv1.EnsureStartedRequest{Spec: s.spec})
	if err != nil {
		// Starting is idempotent: a tool host that went away midway is as good as one that
		// never got the request (its children died with it).
		return s.fail(err, false)
	}
	st := r.GetStatus()
	s.mu.Lock()
	s.inf = Info{ProtocolVersion: st.GetProtocolVersion(), ServerInfo: st.GetServerInfo().AsMap(), Capabilities: st.GetCapabilities().AsMap(),
		Instructions: st.GetInstructions()}
	s.mu.Unlock()
	return nil
}

func (s *stdioSession) info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inf
}

func (s *stdioSession) tools(ctx context.Context, refresh bool) ([]json.RawMessage, error) {
	if cached, ok := s.cache.get(); ok && !refresh {
		return cached, nil
	}
	return s.list(ctx, true)
}

// list reads the tools from the tool host. With restart, a server the tool host no longer
// knows (it restarted) is started again first.
func (s *stdioSession) list(ctx context.Context, restart bool) ([]json.RawMessage, error) {
	ticket := s.cache.begin()
	var r *toolhostv1.ListToolsResponse
	f := func() error {
		var err error
		r, err = s.th.ListTools(ctx, &toolhostv1.ListToolsRequest{Id: s.spec.GetId()})
		return err
	}
	var err error
	if restart {
		err = s.retryOnLost(ctx, f)
	} else {
		err = f()
	}
	if !restart && status.Code(err) == codes.NotFound {
		return nil, errLost
	}
	if err != nil {
		return nil, s.fail(err, false) // a read: safe to send again
	}
	out := make([]json.RawMessage, len(r.GetTools()))
	for i, t := range r.GetTools() {
		out[i] = t
	}
	return s.cache.put(ticket, s.cache.admitted(ctx, out)), nil
}

// errLost means the tool host does not know the server (it restarted since).
var errLost = errors.New("the tool host does not run the server")

// listChanged reads the tools again from the tool host, which lists them again itself when
// the server sends notifications/tools/list_changed and only then tells its watchers. A
// server the tool host no longer knows is not started for this: its next use starts it, and
// the tool host's "ready" event brings its tools.
func (s *stdioSession) listChanged() {
	s.lists.trigger(func() {
		ctx, cancel := context.WithTimeout(context.Background(), msTimeout(s.spec.GetTimeoutMs()))
		defer cancel()
		_, err := s.list(ctx, false)
		switch {
		case errors.Is(err, errLost):
			s.log.Debug("not re-reading tools: the tool host no longer runs the server", "server", s.spec.GetId())
		case err != nil:
			s.log.Warn("re-reading tools from the tool host failed", "server", s.spec.GetId(), "err", err)
		}
	})
}

func (s *stdioSession) call(ctx context.Context, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	return s.unary(ctx, method, params, timeout, Hooks{})
}

// unary calls through the tool host's unary Call.
func (s *stdioSession) unary(ctx context.Context, method string, params json.RawMessage, timeout time.Duration, hooks Hooks) (json.RawMessage, error) {
	var r *toolhostv1.CallResponse
	var p peer.Peer
	err := s.retryOnLost(ctx, func() error {
		var err error
		r, err = s.th.Call(ctx, &toolhostv1.CallRequest{Id: s.spec.GetId(), Method: method, Params: params, TimeoutMs: int32(timeout.Milliseconds())}, grpc.Peer(&p))
		return err
	})
	if err != nil {
		return nil, s.fail(err, p.Addr != nil)
	}
	s.ordered(ctx, r, hooks)
	if e := r.GetError(); e != nil {
		return nil, &RPCError{Code: int(e.GetCode()), Message: e.GetMessage(), Data: e.GetData()}
	}
	return r.GetResult(), nil
}

// ordered waits, for a caller that asked (Hooks.Ordered), until this replica has passed on
// the notifications the server wrote before the answer r, at most NotificationWait (order.go).
func (s *stdioSession) ordered(ctx context.Context, r *toolhostv1.CallResponse, hooks Hooks) {
	seq := r.GetNotificationSeq()
	if !hooks.Ordered || seq == 0 || s.relayed == nil {
		return
	}
	if !s.relayed.wait(ctx, s.host.Addr, s.spec.GetId(), seq, NotificationWait) {
		s.log.DebugContext(ctx, "an answer goes out before the notifications its server wrote before it: the tool host's watch stream is down or behind",
			"server", s.spec.GetId(), "tool_host", s.host.String(), "notification_seq", seq)
	}
}

// callWith calls through the tool host's CallStream, which rewrites the progress token for
// the child and restores the caller's on each notification it streams back, and streams the
// child's requests it attributes to this call when the caller's client accepts them (their
// answers go back with Manager.Answer). A caller that wants neither makes a unary Call.
func (s *stdioSession) callWith(ctx context.Context, method string, params json.RawMessage, timeout time.Duration, hooks Hooks) (json.RawMessage, error) {
	if hooks.OnProgress == nil && (!hooks.Relays.Any() || hooks.OnRequest == nil) {
		return s.unary(ctx, method, params, timeout, hooks)
	}
	var relays *toolhostv1.Relays
	if hooks.OnRequest != nil && hooks.Relays.Any() {
		relays = &toolhostv1.Relays{Sampling: hooks.Relays.Sampling, Elicitation: hooks.Relays.Elicitation, Roots: hooks.Relays.Roots}
	}
	var r *toolhostv1.CallResponse
	var asked *InputRequiredError
	var p peer.Peer
	err := s.retryOnLost(ctx, func() error {
		stream, err := s.th.CallStream(ctx, &toolhostv1.CallStreamRequest{Call: &toolhostv1.CallRequest{
			Id: s.spec.GetId(), Method: method, Params: params, TimeoutMs: int32(timeout.Milliseconds()), Relays: relays,
			ParkMs: int32(hooks.Park.Milliseconds())}}, grpc.Peer(&p))
		if err != nil {
			return err
		}
		r, asked, err = readCallStream(stream, hooks, refPrefix(s.host))
		return err
	})
	if err != nil {
		return nil, s.fail(err, p.Addr != nil)
	}
	s.ordered(ctx, r, hooks)
	return s.answerOf(r, asked, nil)
}

// resume goes on with a parked call (Manager.Resume).
func (s *stdioSession) resume(ctx context.Context, req *toolhostv1.ResumeRequest, hooks Hooks) (json.RawMessage, error) {
	stream, err := s.th.Resume(ctx, req)
	var r *toolhostv1.CallResponse
	var asked *InputRequiredError
	if err == nil {
		r, asked, err = readCallStream(resumeItems{stream}, hooks, refPrefix(s.host))
	}
	if err == nil {
		s.ordered(ctx, r, hooks)
	}
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%w: the call of MCP server %q no longer waits for these answers (it ended, or it waited longer than it may)", ErrRelayUnknown, s.spec.GetId())
	}
	return s.answerOf(r, asked, err)
}

// resumeItems reads a Resume stream as the CallStream items it carries.
type resumeItems struct {
	stream toolhostv1.ToolHostService_ResumeClient
}

func (r resumeItems) Recv() (*toolhostv1.CallStreamResponse, error) {
	m, err := r.stream.Recv()
	if err != nil {
		return nil, err
	}
	return m.GetItem(), nil
}

func (s *stdioSession) answerOf(r *toolhostv1.CallResponse, asked *InputRequiredError, err error) (json.RawMessage, error) {
	if err != nil {
		return nil, s.fail(err, true)
	}
	if asked != nil {
		return nil, asked
	}
	if e := r.GetError(); e != nil {
		return nil, &RPCError{Code: int(e.GetCode()), Message: e.GetMessage(), Data: e.GetData()}
	}
	return r.GetResult(), nil
}

// readCallStream reads a CallStream or a Resume: progress to hooks.OnProgress, the child's
// requests to hooks.OnRequest, until the answer; a parked call's requests (they carry its
// call id) are gathered instead, and the stream's end after them is an InputRequiredError.
func readCallStream(stream interface {
	Recv() (*toolhostv1.CallStreamResponse, error)
}, hooks Hooks, prefix string) (*toolhostv1.CallResponse, *InputRequiredError, error) {
	var asked *InputRequiredError
	for {
		item, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if asked != nil {
					return nil, asked, nil
				}
				return nil, nil, status.Error(codes.Internal, "the tool host ended the call without an answer")
			}
			return nil, nil, err
		}
		if n := item.GetNotification(); n != nil {
			if hooks.OnProgress != nil {
				hooks.OnProgress(n)
			}
			continue
		}
		if q := item.GetRequest(); q != nil {
			req := ServerRequest{Ref: prefix + q.GetRelayId(), Method: q.GetMethod(), Params: q.GetParams()}
			if q.GetCallId() != "" {
				if asked == nil {
					asked = &InputRequiredError{Call: prefix + q.GetCallId()}
				}
				asked.Requests = append(asked.Requests, req)
				continue
			}
			hooks.OnRequest(req)
			continue
		}
		return item.GetAnswer(), nil, nil
	}
}

// retryOnLost runs f, and once more after starting the server again when the tool host no
// longer knows it (the tool host restarted).
func (s *stdioSession) retryOnLost(ctx context.Context, f func() error) error {
	err := f()
	if status.Code(err) != codes.NotFound {
		return err
	}
	// The tool host forgot the server: it moved to another (a replica stopped it here after
	// its drain); start it where it runs now, not here again.
	if s.hosts != nil && s.pin == "" {
		if h, perr := s.hosts.Placement(s.spec.GetId(), ""); perr == nil && !sameHost(h, s.host) {
			s.placedAt.Store(unplaced)
			return fmt.Errorf("%w: %q no longer runs on the tool host %s (it moved to %s)", errElsewhere, s.spec.GetId(), s.host, h)
		}
	}
	if err := s.start(ctx); err != nil {
		// Stopped while it started: this replica (or another) moved it meanwhile. The call
		// reached no child: it goes where the server runs now.
		if s.hosts != nil && s.pin == "" && s.hosts.Elsewhere(s.spec.GetId(), "", s.host, 0) {
			s.placedAt.Store(unplaced)
			return fmt.Errorf("%w: %w", errElsewhere, err)
		}
		return err
	}
	return f()
}

func (s *stdioSession) close(ctx context.Context) error {
	_, err := s.th.Stop(ctx, &toolhostv1.StopRequest{Id: s.spec.GetId()})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// refPrefix starts the refs of the requests and parked calls a tool host holds: "t:" and the
// tool host's name, so that an answer reaches that tool host from any replica, wherever the
// server runs by then ("t:<name>/<id>"; "t:<id>" for a tool host without a name).
func refPrefix(h toolhosts.Host) string {
	if h.Name == "" {
		return "t:"
	}
	return "t:" + h.Name + "/"
}

// splitToolHostRef splits the id part of a "t:" ref into the tool host's name and its own id.
func splitToolHostRef(rest string) (name, id string) {
	if name, id, ok := strings.Cut(rest, "/"); ok {
		return name, id
	}
	return "", rest
}

// lostWait bounds how long a failed call waits for the pool to confirm that the tool host went
// away (the call usually sees the connection drop a moment before the pool does).
const lostWait = 200 * time.Millisecond

// movingWait bounds how long a call refused by a tool host the server moves off waits for
// this replica to place the server elsewhere too (its next health probes of the tool hosts).
const movingWait = 2 * time.Second

// errElsewhere marks a failure that left nothing behind on a tool host that went away: a
// call that never left (its connection was gone before it was sent), or a start or a read.
// Manager.onSession places the server again and tries once more.
var errElsewhere = errors.New("the tool host went away before the call left")

// unplaced is a placedAt no pool generation equals.
const unplaced = ^uint64(0)

// fail turns a failed call to the tool host into the error the caller sees. When the tool
// host went away (the call failed UNAVAILABLE and the pool no longer counts the tool host
// among the healthy), the error says so and names it; a call that may have reached it
// (sent: a connection carried it, as grpc.Peer tells) stays failed, one that cannot have
// (or that may be sent again: a start, a read) is errElsewhere too, to be tried elsewhere.
func (s *stdioSession) fail(err error, sent bool) error {
	id := s.spec.GetId()
	if status.Code(err) == codes.Aborted && s.hosts != nil && s.pin == "" {
		// The tool host refused the call before the child saw it: the server moves off it
		// (another replica saw a tool host come back). Once this replica places it elsewhere
		// too, the call goes there.
		if s.hosts.Elsewhere(id, "", s.host, movingWait) {
			s.placedAt.Store(unplaced)
			return fmt.Errorf("%w: %w", errElsewhere, upstreamErr(id, err))
		}
		return upstreamErr(id, err)
	}
	if status.Code(err) != codes.Unavailable || s.hosts == nil || !s.hosts.Lost(s.host, lostWait) {
		return upstreamErr(id, err)
	}
	next := "the server's calls go to another tool host from now on"
	if s.pin != "" {
		next = "the server is pinned to that tool host (tool_host), so its calls fail until it is back"
	}
	gone := fmt.Errorf("%w: %q: the tool host %s went away during the call (%s); %s", ErrUpstream, id, s.host, status.Convert(err).Message(), next)
	if !sent && s.pin == "" {
		s.placedAt.Store(unplaced) // the next use checks the placement again
		return fmt.Errorf("%w: %w", errElsewhere, gone)
	}
	return gone
}

// causeText is a tool host's message that wraps cause without repeating it: the tool host's
// own text usually ends with it already ("… timed out after 1s: context deadline exceeded").
type causeText struct {
	msg   string
	cause error
}

func (e *causeText) Error() string { return e.msg }
func (e *causeText) Unwrap() error { return e.cause }

// saidOnce is msg wrapping cause, with cause's text added only when msg does not say it.
func saidOnce(msg string, cause error) error {
	if !strings.Contains(msg, cause.Error()) {
		msg += ": " + cause.Error()
	}
	return &causeText{msg: msg, cause: cause}
}

// upstreamErr wraps a tool host error, keeping its text (which names the cause: the OS
// error of a missing command, the exit status of a crash, a missing variable).
func upstreamErr(id string, err error) error {
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.DeadlineExceeded:
			return fmt.Errorf("%w: %q: %w", ErrUpstream, id, saidOnce(st.Message(), context.DeadlineExceeded))
		case codes.Canceled:
			return fmt.Errorf("%w: %q: %w", ErrUpstream, id, saidOnce(st.Message(), context.Canceled))
		}
		return fmt.Errorf("%w: %q: %s", ErrUpstream, id, st.Message())
	}
	return fmt.Errorf("%w: %q: %w", ErrUpstream, id, err)
}
