// Package federate serves one registered MCP server through Zest's MCP endpoint:
// /mcp/servers/{id}, with session-era MCP (protocols 2025-11-25 to 2024-11-05) and, request by
// request beside it, MCP 2026-07-28 without sessions (modern.go). The edge owns
// HTTP as for /mcp and passes the server id with each exchange; this package answers
// initialize itself, with a session id bound to the server and the upstream's serverInfo,
// capabilities and instructions, answers ping and logging/setLevel, and forwards every other
// request to the upstream as JSON-RPC (method and params unchanged), applying the server's
// tool filters to tools/list and tools/call. Progress of a call comes back on the POST's SSE
// stream with the client's token; what the upstream sends outside a call (list_changed,
// logging, resources/updated) reaches the GET streams of that server's sessions.
package federate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/keyauth"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/fanout"
	"github.com/zestmcp/zest/services/mcpgateway/incident"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Servers is where server configs are read (the registry).
type Servers interface {
	GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error)
}

// Upstreams are the connections to the servers (upstream.Manager).
type Upstreams interface {
	Connect(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error
	State(id string) upstream.State
	Info(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) (upstream.Info, error)
	ListTools(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, refresh bool) ([]json.RawMessage, error)
	Call(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error)
	// CallWith is Call with the progress and the server requests of the call going to hooks.
	CallWith(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, method string, params json.RawMessage, timeout time.Duration, hooks upstream.Hooks) (json.RawMessage, error)
	// Answer takes a client's answer to a relayed server request back to the server.
	Answer(ctx context.Context, ref string, result json.RawMessage, rpcErr *upstream.RPCError) error
	// Resume goes on with a call parked for a modern client's answers (Hooks.Park).
	Resume(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, method, call string, answers []upstream.ClientAnswer, hooks upstream.Hooks) (json.RawMessage, error)
}

// Handler serves /mcp/servers/{id} (mcphttp.Endpoint).
type Handler struct {
	servers  Servers
	up       Upstreams
	sessions *session.Codec
	store    mcpserve.Ended
	keys     keyauth.Keys
	log      *slog.Logger
	hub      *fanout.Hub
	// listenCheck is how often an open GET stream checks that its session was not ended
	// elsewhere, and reads its log level again.
	listenCheck time.Duration
	// tools is the tool-call pipeline every tools/call goes through (CallTool), and the one
	// rule of which servers a caller may reach (server).
	tools *toolcall.Pipeline

	// inflight holds the cancel functions of forwarded requests, by session and request id,
	// for notifications/cancelled (which reaches the replica that runs the request only).
	inflight sync.Map
}

// Option configures a Handler.
type Option func(*Handler)

// WithListenCheck sets how often an open GET stream checks that its session was not ended
// elsewhere and reads its log level again (mcpserve.DefaultListenCheck).
func WithListenCheck(d time.Duration) Option { return func(h *Handler) { h.listenCheck = d } }

// New returns the handler: every tools/call goes through tools, the tool-call pipeline, whose
// rule says which servers a caller may reach. Call Notify with every upstream notification
// (see upstream.Manager.OnNotification).
func New(servers Servers, up Upstreams, tools *toolcall.Pipeline, codec *session.Codec, store mcpserve.Ended, keys keyauth.Keys, log *slog.Logger, opts ...Option) *Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{servers: servers, up: up, tools: tools, sessions: codec, store: store, keys: keys, log: log,
		listenCheck: mcpserve.DefaultListenCheck, hub: fanout.NewHub()}
	for _, o := range opts {
		o(h)
	}
	return h
}

var _ mcphttp.Endpoint = (*Handler)(nil)

// server returns the config of id when the caller may reach it here (toolcall.Resolve, the
// one rule: registered, enabled, and exposed or asked for with the admin key). Every other
// case is the same NotFound, so that a hidden server's existence is not revealed.
func (h *Handler) server(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error) {
	cfg, err := h.tools.Resolve(ctx, toolcall.EntryServer, id)
	var unknown *toolcall.UnknownServerError
	switch {
	case errors.As(err, &unknown):
		return nil, status.Errorf(codes.NotFound, "%v: %q", ErrUnknownServer, id)
	case err != nil:
		return nil, status.Errorf(codes.Internal, "registry: %v", err)
	}
	return cfg, nil
}

// session checks a session id for server: signed by this deployment, issued for this server,
// not expired, not ended.
func (h *Handler) session(ctx context.Context, id, server string) (session.Claims, error) {
	return mcpserve.CheckSession(ctx, h.sessions, h.store, id, server, "")
}

func (h *Handler) expires(cl session.Claims) time.Time {
	if exp := h.sessions.Expires(cl); !exp.IsZero() {
		return exp
	}
	return time.Now().Add(365 * 24 * time.Hour)
}

// Exchange answers one POST body of /mcp/servers/{id}.
func (h *Handler) Exchange(req *mcphttp.Request, stream mcphttp.ExchangeStream) error {
	ctx := stream.Context()
	r, err := mcpera.Of(req)
	if err != nil {
		return err
	}
	cfg, err := h.server(ctx, req.ServerID)
	if err != nil {
		return err
	}
	out := &output{stream: stream}
	if r.Modern {
		return h.modern(ctx, req, r, cfg, out)
	}
	payload := bytes.TrimSpace(req.Body)
	if len(payload) > 0 && payload[0] == '[' {
		return h.batch(ctx, req, cfg, payload, out)
	}
	msg, code, problem := jsonrpc.Check(payload)
	if problem != "" {
		return out.malformed(jsonrpc.ErrorResponse(msg.ID, code, problem))
	}
	if msg.Method == string(mcp.MethodInitialize) && msg.IsRequest() {
		return h.initialize(ctx, cfg, payload, msg.ID, out)
	}
	cl, err := h.sessionFor(ctx, req)
	if err != nil {
		return err
	}
	c := &call{h: h, cfg: cfg, sessionID: req.SessionID(), claims: cl, out: out}
	resp := c.dispatch(ctx, payload, msg)
	if resp == nil {
		return out.err()
	}
	if !msg.IsRequest() {
		return out.malformed(resp)
	}
	return out.final(resp)
}

// sessionFor checks the session and its MCP-Protocol-Version header as /mcp does (2025-03-26
// counts as no header).
func (h *Handler) sessionFor(ctx context.Context, req *mcphttp.Request) (session.Claims, error) {
	return mcpserve.CheckSession(ctx, h.sessions, h.store, req.SessionID(), req.ServerID, req.ProtocolVersion())
}

// batch answers a JSON-RPC batch of a 2025-03-26 session, item by item.
func (h *Handler) batch(ctx context.Context, req *mcphttp.Request, cfg *mcpgatewayv1.ServerConfig, payload []byte, out *output) error {
	var c *call
	return out.End(mcpserve.Batch(ctx, payload, func() (string, error) {
		cl, err := h.sessionFor(ctx, req)
		c = &call{h: h, cfg: cfg, sessionID: req.SessionID(), claims: cl, out: out}
		return cl.ProtocolVersion, err
	}, func(item []byte, msg jsonrpc.Message) ([]byte, error) {
		return c.dispatch(ctx, item, msg), out.err()
	}))
}

// initialize connects the upstream (on demand), negotiates the client's version as /mcp does,
// issues a session id bound to the server and answers with the upstream's serverInfo,
// capabilities and instructions.
func (h *Handler) initialize(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, payload, id json.RawMessage, out *output) error {
	if problem := mcpserve.CheckInitializeParams(payload); problem != "" {
		return out.final(jsonrpc.ErrorResponse(id, mcp.INVALID_PARAMS, problem))
	}
	version := mcpserve.Negotiate(payload)
	inf, err := h.up.Info(ctx, cfg)
	if err != nil {
		return out.final(jsonrpc.ErrorResponse(id, mcp.INTERNAL_ERROR, h.failure(ctx, cfg.GetId(), "connecting", err)))
	}
	result := map[string]any{"protocolVersion": version, "capabilities": orEmpty(inf.Capabilities), "serverInfo": orEmpty(inf.ServerInfo)}
	if inf.Instructions != "" {
		result["instructions"] = inf.Instructions
	}
	h.log.DebugContext(ctx, "federated session started", "server", cfg.GetId(), "protocol_version", version)
	return h.StartSession(out, payload, id, version, cfg.GetId(), result)
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// failure is what a caller reads of an upstream failure: the cause for an administrator,
// else an incident id that mcpgateway's log line carries with the cause (a server's stderr
// and exit status are for administrators).
func (h *Handler) failure(ctx context.Context, serverID, what string, err error) string {
	return incident.Describe(ctx, h.log, h.keys.CallerIsAdmin(ctx), serverID, fmt.Sprintf("Internal error: %s MCP server %q failed", what, serverID), err)
}

// EndSession serves DELETE /mcp/servers/{id}: the session id is refused from then on.
func (h *Handler) EndSession(ctx context.Context, req *mcphttp.Request) error {
	if _, err := h.server(ctx, req.ServerID); err != nil {
		return err
	}
	cl, err := h.session(ctx, req.SessionID(), req.ServerID)
	if err != nil {
		return err
	}
	if err := h.store.EndSession(ctx, req.SessionID(), h.expires(cl)); err != nil {
		return status.Errorf(codes.Internal, "session store: %v", err)
	}
	session.Ended(cl)
	return nil
}

// output serializes what one exchange sends: progress notifications may come from another
// goroutine (the HTTP upstream's stream reader) than the call's, even after the call has
// returned; once the final item is sent, they are dropped.
type output struct {
	mu     sync.Mutex
	stream mcphttp.ExchangeStream
	failed error
	done   bool // the final item was sent: nothing follows it
}

// do makes one call of the stream (final: the one that ends the exchange), unless a call
// failed or the answer was sent.
func (o *output) do(final bool, f func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed != nil {
		return o.failed
	}
	if o.done {
		return nil
	}
	if err := f(); err != nil {
		o.failed = err
		return err
	}
	o.done = final
	return nil
}

// message sends one message before the answer.
func (o *output) message(msg []byte) error {
	return o.do(false, func() error { return o.stream.Message(msg) })
}

// note sends one notification before the answer (and drops it after).
func (o *output) note(msg []byte) { _ = o.message(msg) }

func (o *output) session(id, version string) error {
	return o.do(false, func() error { return o.stream.Session(id, version) })
}

func (o *output) finalStatus(msg []byte, code int) error {
	return o.do(true, func() error { return o.stream.Final(msg, code) })
}

func (o *output) final(msg []byte) error { return o.finalStatus(msg, http.StatusOK) }

func (o *output) malformed(msg []byte) error { return o.finalStatus(msg, http.StatusBadRequest) }

// modern sends the answer to a request of 2026-07-28, with the status the revision ties to
// its error code.
func (o *output) modern(msg []byte) error { return o.finalStatus(msg, mcpera.Status(msg)) }

func (o *output) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed
}
