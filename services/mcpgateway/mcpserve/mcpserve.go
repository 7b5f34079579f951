// Package mcpserve is the MCP server behind /mcp, and the contract of the three MCP endpoints
// (request.go: Request, mcphttp.ExchangeStream, mcphttp.ListenStream, mcphttp.Endpoint; Routes). The transport
// (package streamable) owns HTTP and calls the endpoint in-process with each request's parts;
// this package owns the meaning of /mcp's: protocol negotiation, session ids, and the
// methods, dispatched to mark3labs/mcp-go's MCPServer.
// Notifications a handler sends are streamed in order and all flushed before the result.
// Requests of MCP 2026-07-28 (classified per request by package mcpera) are served beside
// the session era without a session (modern.go).
package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/services/mcpgateway/fanout"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ServerName and ServerVersion are the serverInfo clients see of /mcp (as Lemonade answers)
// and, with the preset's name, of /mcp/presets/{id}.
const (
	ServerName    = "lemonade-mcp"
	ServerVersion = "0.1.0"
)

// Ended is the session state kept in the registry: sessions ended by DELETE, and the level a
// session chose with logging/setLevel. Both live until the session id expires.
type Ended interface {
	EndSession(ctx context.Context, sessionID string, expires time.Time) error
	SessionEnded(ctx context.Context, sessionID string) (bool, error)
	SetSessionLogLevel(ctx context.Context, sessionID, level string, expires time.Time) error
	SessionLogLevel(ctx context.Context, sessionID string) (string, error)
}

// DefaultLogLevel is the least level of the log messages (notifications/message) a session
// receives before it sends logging/setLevel: warnings and worse, so that an ordinary tool
// call is answered with plain JSON, and a client that asks for info or debug gets it.
const DefaultLogLevel = mcp.LoggingLevelWarning

// Handler serves /mcp's built-in tools (a mcphttp.Endpoint of Routes).
type Handler struct {
	srv      *server.MCPServer
	sessions *session.Codec
	ended    Ended
	tools    *toolcall.Pipeline
	log      *slog.Logger
	// listenCheck is how often an open GET stream checks that its session was not ended
	// elsewhere (DELETE may reach another replica).
	listenCheck time.Duration

	// The tool list is fixed once the server is built: its JSON is made once.
	toolsOnce sync.Once
	toolsJSON json.RawMessage
}

// New returns a handler serving srv's methods with sessions signed by codec; ended sessions
// are recorded in ended; every tools/call goes through tools (with srv's tools as its
// built-in provider: NewBuiltin).
func New(srv *server.MCPServer, codec *session.Codec, ended Ended, tools *toolcall.Pipeline, log *slog.Logger, opts ...Option) *Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{srv: srv, sessions: codec, ended: ended, tools: tools, log: log, listenCheck: DefaultListenCheck}
	for _, o := range opts {
		o(h)
	}
	return h
}

var _ mcphttp.Endpoint = (*Handler)(nil)

// DefaultListenCheck is how often an open GET stream of an MCP endpoint checks that its
// session was not ended elsewhere (and, of the federated endpoints, reads its log level and
// its preset again).
const DefaultListenCheck = 2 * time.Second

// Option configures a Handler.
type Option func(*Handler)

// WithListenCheck sets how often an open GET stream checks that its session was not ended
// elsewhere (DefaultListenCheck).
func WithListenCheck(d time.Duration) Option { return func(h *Handler) { h.listenCheck = d } }

// NewMCPServer builds the mcp-go server with Zest's identity and capabilities.
func NewMCPServer(version string) *server.MCPServer {
	hooks := &server.Hooks{}
	hooks.AddOnError(onError) // keeps params decoding errors, for answers that name the member
	return server.NewMCPServer(ServerName, version,
		server.WithToolCapabilities(false),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithHooks(hooks),
	)
}

// Exchange answers one POST of /mcp.
func (h *Handler) Exchange(req *mcphttp.Request, stream mcphttp.ExchangeStream) error {
	r, err := mcpera.Of(req)
	if err != nil {
		return err
	}
	if r.Modern {
		return h.modern(req, r, stream)
	}
	payload := bytes.TrimSpace(req.Body)
	if len(payload) > 0 && payload[0] == '[' {
		return h.batch(req, payload, stream)
	}
	env, code, problem := jsonrpc.Check(payload)
	if problem != "" {
		return sendMalformed(stream, jsonrpc.ErrorResponse(env.ID, code, problem))
	}
	if env.Method == string(mcp.MethodInitialize) && env.IsRequest() {
		return h.initialize(stream, payload, env.ID)
	}
	claims, err := h.sessionFor(stream.Context(), req)
	if err != nil {
		return err
	}
	sess := h.newSession(stream.Context(), req.SessionID(), claims)
	resp, err := h.dispatch(stream.Context(), sess, payload, env, stream.Message)
	if err != nil || resp == nil {
		return err
	}
	if !env.IsRequest() {
		// A notification or response that could not be accepted: an HTTP error status,
		// with the JSON-RPC error as its body (Streamable HTTP, "sending messages").
		return sendMalformed(stream, resp)
	}
	return sendFinal(stream, resp)
}

// sessionFor checks the request's session and its MCP-Protocol-Version header.
func (h *Handler) sessionFor(ctx context.Context, req *mcphttp.Request) (session.Claims, error) {
	return CheckSession(ctx, h.sessions, h.ended, req.SessionID(), "", req.ProtocolVersion())
}

// batch answers a JSON-RPC batch, accepted only in 2025-03-26 sessions.
func (h *Handler) batch(req *mcphttp.Request, payload []byte, stream mcphttp.ExchangeStream) error {
	ctx := stream.Context()
	var sess *clientSession
	final, malformed, err := Batch(ctx, payload, func() (string, error) {
		claims, err := h.sessionFor(ctx, req)
		if err != nil {
			return "", err
		}
		sess = h.newSession(ctx, req.SessionID(), claims)
		return claims.ProtocolVersion, nil
	}, func(item []byte, msg jsonrpc.Message) ([]byte, error) {
		return h.dispatch(ctx, sess, item, msg, stream.Message)
	})
	switch {
	case err != nil || final == nil:
		return err
	case malformed:
		return sendMalformed(stream, final)
	}
	return sendFinal(stream, final)
}

// initialize negotiates a version, issues the session id, and answers.
func (h *Handler) initialize(stream mcphttp.ExchangeStream, payload []byte, id json.RawMessage) error {
	if problem := checkInitializeParams(payload); problem != "" {
		// mcp-go would answer an initialize without params with 2025-03-26.
		return sendFinal(stream, jsonrpc.ErrorResponse(id, mcp.INVALID_PARAMS, problem))
	}
	sess := &clientSession{notes: make(chan mcp.JSONRPCNotification, 64), level: DefaultLogLevel, loaded: true}
	resp := h.srv.HandleMessage(h.srv.WithContext(stream.Context(), sess), payload)
	b, err := json.Marshal(resp)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	var ok struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &ok) == nil && ok.Result != nil {
		v := ok.Result.ProtocolVersion
		if !slices.Contains(mcpera.Versions, v) { // mcp-go answers only versions it knows; keep to ours
			return status.Errorf(codes.Internal, "negotiated protocol version %q is not served", v)
		}
		id, err := h.sessions.Issue(v)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		if err := stream.Session(id, v); err != nil {
			return err
		}
		h.log.Debug("session started", "protocol_version", v)
	}
	return sendFinal(stream, b)
}

// session checks a session id: signed by this deployment, not expired, not ended.
func (h *Handler) session(ctx context.Context, id string) (session.Claims, error) {
	return CheckSession(ctx, h.sessions, h.ended, id, "", "") // a session of /mcp/servers/{id} is not one of /mcp
}

// CheckSession checks a session id for the endpoint it must be bound to (binding: the
// session's Claims.Server, "" for /mcp): signed by this deployment, issued for that endpoint,
// not expired, not ended; and that header, the request's MCP-Protocol-Version when it sent
// one, names the version the session negotiated. Every refusal is a gRPC status the edge
// maps (400, 404).
//
// One exception: a header of 2025-03-26 is taken as no header. That revision predates the
// header, and the specification tells servers to assume it when the header is missing, so
// a client that sends it claims nothing about the session (the official conformance suite
// sends it on sessions of every version, on concurrent POSTs that must be served).
func CheckSession(ctx context.Context, codec *session.Codec, ended Ended, id, binding, header string) (session.Claims, error) {
	if id == "" {
		return session.Claims{}, status.Error(codes.InvalidArgument, ErrSessionRequired.Error())
	}
	cl, err := codec.Parse(id)
	if err != nil || cl.Server != binding {
		return session.Claims{}, status.Error(codes.NotFound, ErrSessionUnknown.Error())
	}
	done, err := ended.SessionEnded(ctx, id)
	if err != nil {
		return session.Claims{}, status.Errorf(codes.Internal, "session store: %v", err)
	}
	if done {
		return session.Claims{}, status.Error(codes.NotFound, ErrSessionUnknown.Error())
	}
	if header != "" && header != "2025-03-26" && header != cl.ProtocolVersion {
		return session.Claims{}, status.Errorf(codes.InvalidArgument, "%v: the header says %q, the session negotiated %q; send the version initialize returned",
			ErrProtocolMismatch, header, cl.ProtocolVersion)
	}
	return cl, nil
}

// dispatch runs one message through mcp-go, relaying notifications through send while the
// handler runs and flushing every one of them before it returns the response (nil for a
// notification or a client response).
func (h *Handler) dispatch(ctx context.Context, sess *clientSession, msg []byte, env jsonrpc.Message, send func([]byte) error) ([]byte, error) {
	if env.JSONRPC == "2.0" && env.Method == "server/discover" && env.IsRequest() && !sess.modern {
		// A session-era request: server/discover belongs to 2026-07-28 (see modern).
		return jsonrpc.ErrorResponse(env.ID, mcp.METHOD_NOT_FOUND, "Method not found: server/discover belongs to protocol 2026-07-28; send it with MCP-Protocol-Version: 2026-07-28 and params._meta"), nil
	}
	if env.JSONRPC != mcp.JSONRPC_VERSION {
		return jsonrpc.ErrorResponse(env.ID, mcp.INVALID_REQUEST, `Invalid Request: "jsonrpc" must be "2.0"`), nil
	}
	if env.IsRequest() && !sess.modern { // a modern result carries more (resultType, cache hints)
		switch env.Method {
		case "ping":
			return jsonrpc.Result(env.ID, json.RawMessage(`{}`)), nil
		case "tools/list":
			if cached := h.toolsList(ctx, sess); cached != nil && !hasCursor(msg) {
				return jsonrpc.Result(env.ID, cached), nil
			}
		}
	}
	if env.Method != "tools/call" && env.Method != "subscriptions/listen" {
		// Only tool handlers and subscriptions/listen send notifications: everything else is
		// answered in place.
		resp := clarify(env.Method, h.srv.HandleMessage(h.srv.WithContext(ctx, sess), msg), sess.takeDecodeErr())
		if err := sess.storeError(); err != nil { // logging/setLevel that could not be kept
			h.log.Error("storing a session's log level", "err", err)
			return jsonrpc.ErrorResponse(env.ID, mcp.INTERNAL_ERROR, "Internal error: the log level could not be stored: "+err.Error()), nil
		}
		return encodeFor(env.ID, resp)
	}
	return h.callTool(ctx, sess, msg, env, send)
}

// callTool answers a tools/call of a built-in tool through the tool-call pipeline (a
// subscriptions/listen, which also streams, goes to mcp-go as it is). Notifications the tool
// sends while it runs are relayed as they come, by a goroutine started with the first of them
// (most tools send none, and a goroutine per call costs ~15% of a small call); what is still
// queued when the tool returns is flushed here.
func (h *Handler) callTool(ctx context.Context, sess *clientSession, msg []byte, env jsonrpc.Message, send func([]byte) error) ([]byte, error) {
	r := &relay{notes: sess.notes, send: send, stop: make(chan struct{})}
	sess.setRelay(r)
	var out []byte
	if env.Method == "tools/call" && env.IsRequest() {
		params := env.Params
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(params, &p)
		cctx := context.WithValue(h.srv.WithContext(ctx, sess), requestIDKey{}, env.ID)
		res, err := h.tools.Invoke(cctx, &toolcall.Call{Entry: toolcall.EntryMCP,
			Server: serverconfig.LemonadeProvider, Tool: p.Name, Params: params})
		out = h.toolAnswer(ctx, env.ID, p.Name, res, err)
	} else {
		resp := clarify(env.Method, h.srv.HandleMessage(h.srv.WithContext(ctx, sess), msg), sess.takeDecodeErr())
		var err error
		if out, err = encodeFor(env.ID, resp); err != nil {
			sess.setRelay(nil)
			_ = r.end()
			return nil, err
		}
	}
	sess.setRelay(nil)
	if err := r.end(); err != nil {
		return nil, err
	}
	return out, nil
}

// toolAnswer renders the pipeline's answer to a tools/call of a built-in tool.
func (h *Handler) toolAnswer(ctx context.Context, id json.RawMessage, name string, res json.RawMessage, err error) []byte {
	var rpcErr *upstream.RPCError
	if refused, ok := ToolRefusal(id, name, err); ok {
		return refused
	}
	switch {
	case err == nil:
		return jsonrpc.Result(id, res)
	case errors.As(err, &rpcErr):
		return RPCErrorResponse(id, rpcErr)
	}
	h.log.ErrorContext(ctx, "a built-in tool failed", "tool", name, "err", err)
	return jsonrpc.ErrorResponse(id, mcp.INTERNAL_ERROR, "Internal error: "+err.Error())
}

// encodeFor renders mcp-go's answer to the request with id. A tool's CallToolResult is
// marshalled by its own MarshalJSON (json.Marshal of a map: compact and valid) and spliced
// behind the request's id: through encoding/json those bytes would be scanned and compacted
// once more, a tenth of the CPU of a small tool call.
func encodeFor(id json.RawMessage, resp mcp.JSONRPCMessage) ([]byte, error) {
	if r, ok := resp.(mcp.JSONRPCResponse); ok && len(id) > 0 {
		var res *mcp.CallToolResult
		switch v := r.Result.(type) {
		case *mcp.CallToolResult:
			res = v
		case mcp.CallToolResult:
			res = &v
		}
		if res != nil {
			if b, err := res.MarshalJSON(); err == nil {
				return jsonrpc.Result(id, b), nil
			}
		}
	}
	return encode(resp)
}

// encode renders mcp-go's answer (nil for a notification or a client's response).
func encode(resp mcp.JSONRPCMessage) ([]byte, error) {
	if resp == nil {
		return nil, nil
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return b, nil
}

// toolsList returns the JSON of the tools/list result, made once through mcp-go.
func (h *Handler) toolsList(ctx context.Context, sess *clientSession) json.RawMessage {
	h.toolsOnce.Do(func() {
		resp := h.srv.HandleMessage(h.srv.WithContext(ctx, sess), json.RawMessage(`{"jsonrpc":"2.0","id":0,"method":"tools/list"}`))
		b, err := json.Marshal(resp)
		if err != nil {
			return
		}
		var r struct {
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(b, &r) == nil && len(r.Result) > 0 {
			h.toolsJSON = r.Result
		}
	})
	return h.toolsJSON
}

// hasCursor reports whether a tools/list request asks for a later page.
func hasCursor(msg []byte) bool { return bytes.Contains(msg, []byte(`"cursor"`)) }

func sendNote(send func([]byte) error, n mcp.JSONRPCNotification) error {
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode notification: %w", err)
	}
	return send(b)
}

func sendFinal(stream mcphttp.ExchangeStream, msg []byte) error {
	return stream.Final(msg, http.StatusOK)
}

// sendMalformed answers a request that could not be read as JSON-RPC (HTTP 400).
func sendMalformed(stream mcphttp.ExchangeStream, msg []byte) error {
	return stream.Final(msg, http.StatusBadRequest)
}

// Listen serves GET /mcp: the server-to-client stream of a session, opened once the session
// is found valid; it then stays open until the client leaves, the session is ended or
// expires. The built-in tool set sends no server-initiated messages, so nothing else is sent
// yet; the transport keeps the HTTP stream alive.
func (h *Handler) Listen(req *mcphttp.Request, stream mcphttp.ListenStream) error {
	ctx := stream.Context()
	cl, err := h.session(ctx, req.SessionID())
	if err != nil {
		return err
	}
	if err := stream.Open(); err != nil {
		return err
	}
	return fanout.NewListener().Serve(ctx, fanout.Stream{ // no server: nothing is queued
		Expires: h.sessions.Expires(cl),
		Every:   h.listenCheck,
		Check: func() (bool, error) {
			ended, err := h.ended.SessionEnded(ctx, req.SessionID())
			return err != nil || !ended, nil
		},
	})
}

// EndSession serves DELETE /mcp: the session id is refused from then on, by every replica.
func (h *Handler) EndSession(ctx context.Context, req *mcphttp.Request) error {
	cl, err := h.session(ctx, req.SessionID())
	if err != nil {
		return err
	}
	exp := h.sessions.Expires(cl)
	if exp.IsZero() {
		exp = time.Now().Add(365 * 24 * time.Hour)
	}
	if err := h.ended.EndSession(ctx, req.SessionID(), exp); err != nil {
		return status.Errorf(codes.Internal, "session store: %v", err)
	}
	session.Ended(cl)
	return nil
}

// clientSession is the per-request view of a session that mcp-go's handlers see. Its log
// level is read from the registry the first time a log message asks for it, and
// logging/setLevel writes it there, so the level holds for the session's later requests.
type clientSession struct {
	modern  bool // a request of 2026-07-28: no session, its log level is in its _meta
	id      string
	version string
	notes   chan mcp.JSONRPCNotification
	ctx     context.Context
	store   Ended
	expires time.Time

	mu        sync.Mutex
	level     mcp.LoggingLevel
	loaded    bool
	setErr    error  // logging/setLevel could not be stored
	relay     *relay // the running tool call's notification relay
	decodeErr error  // mcp-go could not decode the params of the last message (onError)
}

// relay forwards a tool call's notifications while the tool runs.
type relay struct {
	notes <-chan mcp.JSONRPCNotification
	send  func([]byte) error
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	on    bool // the goroutine was started
	done  bool // the call returned: start no goroutine any more
	err   error
}

// start starts the relay goroutine once, unless the call has returned.
func (r *relay) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on || r.done {
		return
	}
	r.on = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case n := <-r.notes:
				r.relay(n)
			case <-r.stop:
				return
			}
		}
	}()
}

func (r *relay) relay(n mcp.JSONRPCNotification) {
	if r.err == nil {
		r.err = sendNote(r.send, n)
	}
}

// end stops the goroutine, if it was started, flushes what the handler queued just before
// it returned, and says whether a notification could not be sent.
func (r *relay) end() error {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	close(r.stop)
	r.wg.Wait()
	for {
		select {
		case n := <-r.notes:
			r.relay(n)
		default:
			return r.err
		}
	}
}

func (s *clientSession) setRelay(r *relay) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.relay = r
}

// UpgradeToSSEWhenReceiveNotification is how mcp-go announces a notification just before it
// queues it (server.SessionWithStreamableHTTPConfig): the relay starts then.
func (s *clientSession) UpgradeToSSEWhenReceiveNotification() {
	s.mu.Lock()
	r := s.relay
	s.mu.Unlock()
	if r != nil {
		r.start()
	}
}

func (h *Handler) newSession(ctx context.Context, id string, cl session.Claims) *clientSession {
	exp := h.sessions.Expires(cl)
	if exp.IsZero() {
		exp = time.Now().Add(365 * 24 * time.Hour)
	}
	return &clientSession{id: id, version: cl.ProtocolVersion, notes: make(chan mcp.JSONRPCNotification, 64),
		ctx: ctx, store: h.ended, expires: exp}
}

func (s *clientSession) Initialize()                                         {}
func (s *clientSession) Initialized() bool                                   { return true }
func (s *clientSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.notes }
func (s *clientSession) SessionID() string                                   { return s.id }

// SetLogLevel is logging/setLevel (mcp-go has validated the level).
func (s *clientSession) SetLogLevel(level mcp.LoggingLevel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.level, s.loaded = level, true
	if s.store != nil {
		s.setErr = s.store.SetSessionLogLevel(s.ctx, s.id, string(level), s.expires)
	}
}

// GetLogLevel is the session's level: the one it set, else DefaultLogLevel.
func (s *clientSession) GetLogLevel() mcp.LoggingLevel {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded {
		s.loaded, s.level = true, DefaultLogLevel
		if s.store != nil {
			if l, err := s.store.SessionLogLevel(s.ctx, s.id); err == nil && l != "" {
				s.level = mcp.LoggingLevel(l)
			}
		}
	}
	return s.level
}

func (s *clientSession) storeError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setErr
}

var (
	_ server.SessionWithLogging              = (*clientSession)(nil)
	_ server.SessionWithStreamableHTTPConfig = (*clientSession)(nil)
)

// BuiltinTools are the built-in tools as tools/list of /mcp lists them.
func (h *Handler) BuiltinTools(ctx context.Context) ([]json.RawMessage, error) {
	res := h.toolsList(ctx, &clientSession{notes: make(chan mcp.JSONRPCNotification, 1), level: DefaultLogLevel, loaded: true})
	var page struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(res, &page); err != nil {
		return nil, fmt.Errorf("the built-in tools/list: %w", err)
	}
	return page.Tools, nil
}
