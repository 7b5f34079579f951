package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/envref"
	"github.com/zestmcp/zest/lib/sse"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

// ProtocolVersion is the session-era version offered to HTTP upstreams in initialize.
const ProtocolVersion = "2025-11-25"

// ModernVersion is the version without sessions an HTTP upstream is first probed for
// (server/discover); an upstream that serves it is driven without a session.
const ModernVersion = mcp.ProtocolVersion20260728

// clientInfo is how Zest names itself to upstreams.
var clientInfo = mcp.Implementation{Name: "zest-mcpgateway", Version: "0.1.0"}

// methodToolsListChanged is the notification a server sends when its tools change.
const methodToolsListChanged = "notifications/tools/list_changed"

// httpSession is a Streamable HTTP server reached directly with mcp-go's transport. It
// answers the server's own requests (ping; sampling, elicitation and roots/list relayed to the
// client of the call whose response stream carried them, see answerServerRequest), follows
// notifications/tools/list_changed (on the GET stream or on a response stream), and starts a
// new MCP session after the server has forgotten the old one (HTTP 404): the call that met
// the 404 fails with SessionExpiredError, the next call initializes again.
type httpSession struct {
	cfg     *mcpgatewayv1.ServerConfig
	headers map[string]string
	log     *slog.Logger
	nextID  atomic.Int64
	cache   toolCache
	lists   relister
	// emit receives the server's notifications but the progress of calls (Manager.emit).
	emit func(serverID string, msg []byte)
	// progress maps the progress tokens Zest gave the calls in flight to their callers.
	progress   sync.Map // string → *progressCall
	progressID atomic.Int64
	// waiting are the server's requests relayed to clients (shared by the manager's sessions).
	waiting *waiters
	// client is mcp-go's HTTP client: the lines and events of the server's event streams are
	// bounded by MaxEventBytes.
	client *http.Client

	mu sync.Mutex
	cl *client.Client
	tr *transport.StreamableHTTP
	// sid is the session id the server gave tr ("" for a server without sessions).
	sid string
	// expired is set when the server answered 404 for tr's session.
	expired bool
	// renewing is a new initialize in progress, which concurrent calls wait for.
	renewing *renewal
	closed   bool
	inf      Info
	// modern is set when the server answered server/discover with 2026-07-28: requests go
	// without a session, each with its _meta and headers (tr has no client then: cl is nil).
	modern bool
	// stopListen ends the subscriptions/listen stream of a server driven without a session.
	stopListen context.CancelFunc
	// listening is what that stream asks for: the list_changed notifications the server
	// declares (listenFilter), and resources is the resources session-era clients subscribed
	// to (resources/subscribe, bridged to the stream's resourceSubscriptions; see subscribe).
	listening map[string]bool
	resources map[string]bool
	// started is the first request of the current listen stream; listenSeq numbers the
	// listen requests; acks maps the id of one not yet acknowledged to its listenStart, which
	// its notifications/subscriptions/acknowledged finishes.
	started   *listenStart
	listenSeq atomic.Int64
	acks      sync.Map // string → *listenStart
	// subscribing serializes subscribe: one change of the listen stream at a time.
	subscribing sync.Mutex
	// dualEra is set when the server, driven without a session, also listed a session-era
	// version in server/discover: the calls of session-era clients that it may ask something
	// then go through a session of their own (sessionSide), so that the server asks in the
	// client's era.
	dualEra bool
	// sessionOnly marks that session (it never probes server/discover, and leaves the lists to
	// the server's own connection); flight are its calls in flight (answerSideRequest).
	sessionOnly bool
	flightMu    sync.Mutex
	flight      map[*httpRelay]context.Context
	// side is that session, opened by the first call that needs it; sideFailed is set when
	// the server refused it (initialize failed): such calls are bridged instead (modern.go).
	sideMu     sync.Mutex
	side       *httpSession
	sideFailed bool
}

// renewal is one initialize after an expired session; done closes once err is set.
type renewal struct {
	done chan struct{}
	err  error
}

func openHTTP(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, lookupEnv func(string) (string, bool), emit func(string, []byte), waiting *waiters, maxEvent int, admit admitFunc, signer *oauthclient.Signer, log *slog.Logger) (*httpSession, error) {
	if emit == nil {
		emit = func(string, []byte) {}
	}
	if waiting == nil {
		waiting = newWaiters()
	}
	s := &httpSession{cfg: cfg, log: log, headers: map[string]string{}, emit: emit, waiting: waiting}
	s.cache.admit = admit
	s.client = &http.Client{Transport: sse.Transport(nil, maxEvent, func(r *http.Request) {
		s.log.Warn("an MCP server sent an event-stream line over the limit: the stream is given up and its request fails",
			"server", cfg.GetId(), "method", r.Method, "limit_bytes", maxEvent)
	})}
	if cfg.GetOauth() != nil {
		if signer == nil {
			return nil, fmt.Errorf("%w: %q signs in by OAuth, and this mcpgateway has no OAuth client (%s)", ErrUpstream, cfg.GetId(), oauthclient.ErrNoSecretKey)
		}
		// A server Zest holds no token for fails here, with the error that says how to sign in,
		// rather than deep in the first request; one called on behalf of each caller connects
		// on a caller's request only (its token is exchanged for the connect and the listing).
		if err := oauthclient.CheckCaller(ctx, cfg); err != nil {
			return nil, err
		}
		if !oauthclient.OnBehalf(cfg) {
			if _, err := signer.AccessToken(ctx, cfg, false); err != nil {
				return nil, err
			}
		}
		// Every request, mcp-go's and Zest's own (modern.go), goes through the signer.
		s.client.Transport = &oauthclient.Transport{Base: s.client.Transport, Signer: signer, Config: cfg}
	}
	if ref := cfg.GetBearerToken(); ref != "" {
		name, err := envref.Variable(ref)
		if err != nil {
			return nil, fmt.Errorf("%w: bearer_token %w", ErrUpstream, err)
		}
		// Registration refuses such a reference (serverconfig); a config stored before that
		// never sends one of mcpgateway's own keys to a server either.
		if err := envref.CheckNotReserved("bearer_token", ref, "MCP_BEARER_TOKEN", "mcpgateway's environment"); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUpstream, err)
		}
		v, ok := lookupEnv(name)
		if !ok {
			return nil, fmt.Errorf("%w: %w: %s", ErrUpstream, envref.ErrNotSet, name)
		}
		s.headers["Authorization"] = "Bearer " + v
	}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	if _, err := s.tools(ctx, true); err != nil {
		s.close(ctx)
		return nil, err
	}
	return s, nil
}

// connect probes the server with server/discover (2026-07-28) and drives it without a
// session if it serves that revision; otherwise it opens a new MCP session (initialize, then
// notifications/initialized) on a new transport. Either becomes the session's current one.
func (s *httpSession) connect(ctx context.Context) error {
	if !s.sessionOnly && s.discover(ctx) {
		return nil
	}
	var listen []transport.StreamableHTTPCOption
	if !oauthclient.OnBehalf(s.cfg) {
		// The GET stream carries what the server sends outside a request, such as
		// notifications/tools/list_changed (and, from mcp-go, sampling/createMessage); a
		// server without one answers 405 and is not asked again. A server called on behalf
		// of each caller has none: no caller's token would carry it.
		listen = append(listen, transport.WithContinuousListening()) //nolint:staticcheck // session-era servers still have the GET stream (2026-07-28 removed it; modern.go serves that era)
	}
	tr, err := transport.NewStreamableHTTP(s.cfg.GetUrl(), s.transportOptions(listen...)...)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrUpstream, s.cfg.GetId(), err)
	}
	cl := client.NewClient(tr, client.WithProtocolVersion(ProtocolVersion))
	// The transport's background work (the GET stream) lives until Close, not until ctx ends.
	if err := cl.Start(context.Background()); err != nil {
		return fmt.Errorf("%w: %q: start: %v", ErrUpstream, s.cfg.GetId(), err)
	}
	// Start installed the client's own handler, which answers roots/list, sampling and
	// elicitation with -32603 when no handler of theirs is configured; ours replaces it.
	tr.SetRequestHandler(answerServerRequest)
	if s.sessionOnly {
		tr.SetRequestHandler(s.answerSideRequest)
	}
	cl.OnNotification(s.onNotification)
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = ProtocolVersion
	req.Params.ClientInfo = clientInfo
	req.Params.Capabilities = clientCapabilities()
	res, err := cl.Initialize(ctx, req)
	if err != nil {
		cl.Close()
		return fmt.Errorf("%w: %q: initialize: %v", ErrUpstream, s.cfg.GetId(), err)
	}
	inf := Info{ProtocolVersion: res.ProtocolVersion, ServerInfo: toMap(res.ServerInfo), Capabilities: toMap(res.Capabilities),
		Instructions: res.Instructions}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cl.Close()
		return fmt.Errorf("%w: %q", ErrNotConnected, s.cfg.GetId())
	}
	oldCl, oldTr := s.cl, s.tr
	s.cl, s.tr, s.sid, s.expired, s.inf, s.modern = cl, tr, tr.GetSessionId(), false, inf, false
	stop := s.stopListen
	s.stopListen = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	closeOld(oldCl, oldTr)
	return nil
}

// closeOld closes a connection that was replaced: its client (which closes its transport), or
// the transport alone for a server driven without a session.
func closeOld(cl *client.Client, tr *transport.StreamableHTTP) {
	switch {
	case cl != nil:
		_ = cl.Close()
	case tr != nil:
		_ = tr.Close()
	}
}

func toMap(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func (s *httpSession) info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inf
}

const maxToolPages = 100

func (s *httpSession) tools(ctx context.Context, refresh bool) ([]json.RawMessage, error) {
	if cached, ok := s.cache.get(); ok && !refresh {
		return cached, nil
	}
	ticket := s.cache.begin()
	if !declaresTools(s.info()) {
		return s.cache.put(ticket, nil), nil
	}
	var all []json.RawMessage
	cursor := ""
	for range maxToolPages {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		raw, err := s.call(ctx, "tools/list", params, 0)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("%w: %q: tools/list result: %v", ErrUpstream, s.cfg.GetId(), err)
		}
		all = append(all, page.Tools...)
		if page.NextCursor == "" {
			return s.cache.put(ticket, s.cache.admitted(ctx, all)), nil
		}
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("%w: %q: tools/list has more than %d pages", ErrUpstream, s.cfg.GetId(), maxToolPages)
}

// listChanged lists the tools again after notifications/tools/list_changed.
func (s *httpSession) listChanged() {
	s.lists.trigger(func() {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeoutOf(s.cfg))
		defer cancel()
		if _, err := s.tools(ctx, true); err != nil {
			s.log.Warn("re-listing tools after list_changed failed", "server", s.cfg.GetId(), "err", err)
		}
	})
}

// call sends one request as raw JSON and returns the raw result. A session the server has
// forgotten (HTTP 404) fails this call with SessionExpiredError; the next call initializes a
// new session first.
func (s *httpSession) call(ctx context.Context, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	if subscription(method) && s.isModern() {
		return s.subscribe(ctx, method, params, timeout)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	tr, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.send(ctx, tr, method, params)
	return s.answer(ctx, tr, method, resp, err)
}

// answer turns the transport's answer to one request into a result or an error.
func (s *httpSession) answer(ctx context.Context, tr *transport.StreamableHTTP, method string, resp *transport.JSONRPCResponse, err error) (json.RawMessage, error) {
	if errors.Is(err, transport.ErrSessionTerminated) && s.isModern() {
		// Without sessions a 404 means an unknown method (mcp-go's transport reads every 404
		// as a forgotten session and drops the body).
		return nil, &RPCError{Code: mcp.METHOD_NOT_FOUND, Message: "Method not found: " + method}
	}
	if errors.Is(err, transport.ErrSessionTerminated) {
		s.expire(tr)
		s.log.InfoContext(ctx, "upstream forgot the session; the next call initializes again", "server", s.cfg.GetId())
		return nil, &SessionExpiredError{ID: s.cfg.GetId()}
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: %q: %s timed out: %w", ErrUpstream, s.cfg.GetId(), method, err)
		}
		return nil, fmt.Errorf("%w: %q: %s: %w", ErrUpstream, s.cfg.GetId(), method, err)
	}
	if resp.Error != nil {
		data, _ := json.Marshal(resp.Error.Data)
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message, Data: data}
	}
	return resp.Result, nil
}

// current returns the transport to send on, after initializing a new session when the
// server has forgotten the last one (a 404 met by an earlier call, or on the GET stream).
// Concurrent callers share one initialize, each waiting with its own context.
func (s *httpSession) current(ctx context.Context) (*transport.StreamableHTTP, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrNotConnected, s.cfg.GetId())
	}
	// mcp-go clears the session id when the server answers 404 for it.
	if !s.expired && (s.sid == "" || s.tr.GetSessionId() != "") {
		tr := s.tr
		s.mu.Unlock()
		return tr, nil
	}
	r := s.renewing
	if r == nil {
		r = &renewal{done: make(chan struct{})}
		s.renewing = r
		go s.renew(context.WithoutCancel(ctx), r)
	}
	s.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %q: initializing a new session: %w", ErrUpstream, s.cfg.GetId(), ctx.Err())
	}
	if r.err != nil {
		return nil, r.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tr, nil
}

// renew initializes a new session, bounded by the server's timeout.
func (s *httpSession) renew(ctx context.Context, r *renewal) {
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(s.cfg))
	defer cancel()
	s.log.InfoContext(ctx, "initializing a new upstream session", "server", s.cfg.GetId())
	r.err = s.connect(ctx)
	s.mu.Lock()
	s.renewing = nil
	s.mu.Unlock()
	close(r.done)
}

// expire records that the server has forgotten the session of tr.
func (s *httpSession) expire(tr *transport.StreamableHTTP) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tr == tr {
		s.expired = true
	}
}

func (s *httpSession) send(ctx context.Context, tr *transport.StreamableHTTP, method string, params json.RawMessage) (*transport.JSONRPCResponse, error) {
	id := fmt.Sprintf("zest-%d", s.nextID.Add(1))
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Method: method}
	if len(params) > 0 {
		req.Params = params
	}
	if s.isModern() {
		req.Params, req.Header = modernRequest(method, params)
		if method == string(mcp.MethodToolsCall) {
			s.paramHeaders(req.Header, params)
		}
	}
	resp, err := tr.SendRequest(ctx, req)
	if err != nil && ctx.Err() != nil && method != string(mcp.MethodInitialize) {
		// The caller gave up (cancelled, or out of time): tell the server, as the tool host
		// tells a stdio child, so that it can stop working on it.
		reason := "the client cancelled the request"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = "the request timed out"
		}
		go s.cancelUpstream(context.WithoutCancel(ctx), tr, id, reason)
	}
	return resp, err
}

// cancelUpstream sends notifications/cancelled for the request id.
func (s *httpSession) cancelUpstream(ctx context.Context, tr *transport.StreamableHTTP, id, reason string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: "notifications/cancelled",
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": reason}}}}
	if err := tr.SendNotification(ctx, n); err != nil {
		s.log.DebugContext(ctx, "notifications/cancelled could not be sent", "server", s.cfg.GetId(), "err", err)
	}
}

// close ends the session (mcp-go sends DELETE with the session id, and ends the GET stream);
// a server driven without a session has only its transport closed.
func (s *httpSession) close(context.Context) error {
	s.mu.Lock()
	cl, tr, stop := s.cl, s.tr, s.stopListen
	s.cl, s.tr, s.closed, s.stopListen = nil, nil, true, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	closeOld(cl, tr)
	s.sideMu.Lock()
	side := s.side
	s.side, s.sideFailed = nil, true
	s.sideMu.Unlock()
	if side != nil {
		_ = side.close(context.Background())
	}
	return nil
}

// MaxEventBytes bounds a line, and an event, of an HTTP server's event stream (package sse): a
// server that sends an endless line fails its request instead of taking mcpgateway's memory.
// It is twice the largest output bound (serverconfig.MaxMaxOutputBytes), so that a result
// over any server's bound is still read and answered as too large (toolcall's output cap).
const MaxEventBytes = 2 * serverconfig.MaxMaxOutputBytes

// transportOptions are the options of every mcp-go transport to the server: its headers, its
// bounded HTTP client, its logger; then more.
func (s *httpSession) transportOptions(more ...transport.StreamableHTTPCOption) []transport.StreamableHTTPCOption {
	return append([]transport.StreamableHTTPCOption{transport.WithHTTPHeaders(s.headers), transport.WithHTTPBasicClient(s.client),
		transport.WithHTTPLogger(slog.New(transportLog{s.log.Handler()}).With("server", s.cfg.GetId()))}, more...)
}

// transportLog is the slog handler given to mcp-go's transport. Everything it logs is
// debug, tagged component=mcp-go: its routine lines ("listening to server forever", a server
// without a GET stream) are no news, and what fails is either returned to the caller, who
// reports it, or a benign race of its own (an answer to a server request whose response
// stream had just ended).
type transportLog struct{ h slog.Handler }

func (t transportLog) Enabled(ctx context.Context, _ slog.Level) bool {
	return t.h.Enabled(ctx, slog.LevelDebug)
}

func (t transportLog) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	r.AddAttrs(slog.String("component", "mcp-go"))
	return t.h.Handle(ctx, r)
}

func (t transportLog) WithAttrs(as []slog.Attr) slog.Handler { return transportLog{t.h.WithAttrs(as)} }
func (t transportLog) WithGroup(name string) slog.Handler    { return transportLog{t.h.WithGroup(name)} }

// progressCall is the caller of one call that asked for progress.
type progressCall struct {
	token      json.RawMessage // the caller's own progressToken, as JSON
	onProgress func([]byte)
}

// callWith gives the call a progress token of Zest's own (callers of one connection may use
// the same tokens), and hands the server's progress notifications carrying it to
// hooks.OnProgress with the caller's token. mcp-go reads a response stream in order, so every
// notification the server sent before its answer is handed over before this returns. The
// server's requests on the call's response stream belong to this call: those its client
// accepts go to hooks.OnRequest (see answerServerRequest).
func (s *httpSession) callWith(ctx context.Context, method string, params json.RawMessage, timeout time.Duration, hooks Hooks) (json.RawMessage, error) {
	if subscription(method) && s.isModern() {
		return s.subscribe(ctx, method, params, timeout)
	}
	if hooks.Park > 0 && hooks.Relays.Any() && !s.isModern() {
		return s.callParked(ctx, method, params, timeout, hooks)
	}
	if hooks.Bridge && hooks.OnRequest != nil && hooks.Relays.Any() && mayAsk(method) {
		if side := s.sessionSide(ctx); side != nil {
			return side.callWith(ctx, method, params, timeout, hooks)
		}
	}
	if hooks.OnRequest != nil {
		rl := &httpRelay{hooks: hooks, waiting: s.waiting}
		ctx = context.WithValue(ctx, httpRelayKey{}, rl)
		if s.sessionOnly {
			defer s.fly(ctx, rl)()
		}
	}
	if hooks.OnProgress != nil {
		token := fmt.Sprintf("zest-progress-%d", s.progressID.Add(1))
		if rewritten, original, err := rewriteProgressToken(params, token); err == nil && original != nil {
			s.progress.Store(token, &progressCall{token: original, onProgress: hooks.OnProgress})
			defer s.progress.Delete(token)
			params = rewritten
		}
	}
	if hooks.Bridge && hooks.OnRequest != nil && s.isModern() {
		return s.callInputRounds(ctx, method, params, timeout, hooks)
	}
	return s.call(ctx, method, params, timeout)
}

// onNotification takes every notification of the server: progress goes to the call that
// asked for it (or is dropped), tools/list_changed lists the tools again, and everything
// else but progress is handed to the manager's OnNotification function.
func (s *httpSession) onNotification(n mcp.JSONRPCNotification) {
	if n.Method == "notifications/progress" {
		s.deliverProgress(n)
		return
	}
	if s.sessionOnly && n.Method != "notifications/message" {
		// The lists and their news belong to the server's own connection, which follows them.
		return
	}
	if n.Method == methodToolsListChanged || n.Method == mcp.MethodNotificationSubscriptionsAcknowledged {
		s.listChanged()
	}
	if n.Method == mcp.MethodNotificationSubscriptionsAcknowledged {
		if ack, ok := s.acks.LoadAndDelete(fmt.Sprint(n.Params.Meta[mcp.MetaKeySubscriptionID])); ok {
			ack.(*listenStart).finish(nil)
		}
		return // Zest's own subscription (listen), not the server's news
	}
	b, err := json.Marshal(n)
	if err != nil {
		s.log.Debug("an upstream notification could not be encoded", "server", s.cfg.GetId(), "err", err)
		return
	}
	s.emit(s.cfg.GetId(), b)
}

func (s *httpSession) deliverProgress(n mcp.JSONRPCNotification) {
	tok, ok := n.Params.AdditionalFields["progressToken"].(string)
	if !ok {
		return
	}
	v, ok := s.progress.Load(tok)
	if !ok {
		return
	}
	pc := v.(*progressCall)
	params := map[string]any{}
	for k, x := range n.Params.AdditionalFields {
		params[k] = x
	}
	if n.Params.Meta != nil {
		params["_meta"] = n.Params.Meta
	}
	params["progressToken"] = pc.token
	b, err := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "method": n.Method, "params": params})
	if err == nil {
		pc.onProgress(b)
	}
}

// rewriteProgressToken returns params with _meta.progressToken replaced by token, and the
// token it held as JSON (nil, and params unchanged, when it held none).
func rewriteProgressToken(params json.RawMessage, token string) (json.RawMessage, json.RawMessage, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return params, nil, err
	}
	var meta map[string]json.RawMessage
	if raw, ok := p["_meta"]; !ok || json.Unmarshal(raw, &meta) != nil {
		return params, nil, nil
	}
	original, ok := meta["progressToken"]
	if !ok || string(original) == "null" {
		return params, nil, nil
	}
	meta["progressToken"], _ = json.Marshal(token)
	p["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(p)
	if err != nil {
		return params, nil, err
	}
	return out, original, nil
}
