package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
)

// discoverTimeout bounds the server/discover probe of an HTTP upstream (and the server's own
// timeout bounds it further): a server that ignores an unknown method must not hold a
// connection for long before initialize is tried.
const discoverTimeout = 5 * time.Second

// discover probes the server with server/discover, as MCP 2026-07-28 asks a client to do
// first. A server that answers with 2026-07-28 among its supportedVersions becomes the
// session's current connection, driven without a session; any other answer (-32601, HTTP 404,
// 400 or 405, a transport error, a result without that version) leaves it to initialize.
func (s *httpSession) discover(ctx context.Context) bool {
	began := time.Now()
	tr, err := transport.NewStreamableHTTP(s.cfg.GetUrl(), s.transportOptions()...)
	if err != nil {
		return false
	}
	if err := tr.Start(context.Background()); err != nil {
		return false
	}
	tr.SetProtocolVersion(ModernVersion)
	// 2026-07-28 has no server requests and no GET stream: what the server sends comes on the
	// response stream of a request (progress) and is read like a session's.
	tr.SetRequestHandler(answerServerRequest)
	tr.SetNotificationHandler(s.onNotification)
	pctx, cancel := context.WithTimeout(ctx, min(discoverTimeout, timeoutOf(s.cfg)))
	defer cancel()
	params, header := modernRequest(string(mcp.MethodServerDiscover), nil)
	resp, err := tr.SendRequest(pctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
		ID: mcp.NewRequestId("zest-discover"), Method: string(mcp.MethodServerDiscover), Params: params, Header: header})
	var res struct {
		SupportedVersions []string       `json:"supportedVersions"`
		Capabilities      map[string]any `json:"capabilities"`
		Instructions      string         `json:"instructions"`
		ServerInfo        map[string]any `json:"serverInfo"`
		Meta              map[string]any `json:"_meta"`
	}
	if err != nil || resp == nil || resp.Error != nil || json.Unmarshal(resp.Result, &res) != nil || !slices.Contains(res.SupportedVersions, ModernVersion) {
		_ = tr.Close()
		s.log.DebugContext(ctx, "upstream probe: no MCP 2026-07-28, initializing a session", "server", s.cfg.GetId(), "took", time.Since(began), "err", err)
		return false
	}
	info := res.ServerInfo
	if m, ok := res.Meta[mcp.MetaKeyServerInfo].(map[string]any); ok {
		info = m
	}
	inf := Info{ProtocolVersion: ModernVersion, ServerInfo: info, Capabilities: res.Capabilities, Instructions: res.Instructions}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = tr.Close()
		return false
	}
	oldCl, oldTr := s.cl, s.tr
	s.cl, s.tr, s.sid, s.expired, s.inf, s.modern = nil, tr, "", false, inf, true
	s.dualEra = slices.ContainsFunc(res.SupportedVersions, func(v string) bool { return v < ModernVersion && mcp.IsValidProtocolVersion(v) })
	s.listening = listenFilter(res.Capabilities)
	s.relisten() // unlocks s.mu
	closeOld(oldCl, oldTr)
	s.log.DebugContext(ctx, "upstream serves MCP 2026-07-28: driven without a session", "server", s.cfg.GetId(), "took", time.Since(began))
	return true
}

// mayAsk reports whether a server may ask the client something while it answers method.
func mayAsk(method string) bool {
	return method == string(mcp.MethodToolsCall) || method == string(mcp.MethodPromptsGet) || method == string(mcp.MethodResourcesRead)
}

// sessionSide returns the session through which a session-era client's call of a server that
// serves both eras goes (nil for a server of one era, or when the server refused a session):
// Zest follows the client's era, so a tool that asks the client the session era's way
// (sampling/createMessage sent as a request, which mcp-go refuses to send in 2026-07-28)
// reaches the client, as does one that answers input_required (the server's SDK turns it into
// requests in a session). The session is opened by the first such call, and is the server's
// own apart from that: its notifications but logging are dropped (the server's own connection
// follows the lists), progress reaches the call.
func (s *httpSession) sessionSide(ctx context.Context) *httpSession {
	s.mu.Lock()
	dual := s.modern && s.dualEra && !s.closed
	s.mu.Unlock()
	if !dual {
		return nil
	}
	s.sideMu.Lock()
	defer s.sideMu.Unlock()
	if s.side != nil || s.sideFailed {
		return s.side
	}
	side := &httpSession{cfg: s.cfg, log: s.log, headers: s.headers, emit: s.emit, waiting: s.waiting, client: s.client, sessionOnly: true}
	if err := side.connect(ctx); err != nil {
		if ctx.Err() == nil {
			s.sideFailed = true
			s.log.WarnContext(ctx, "the upstream lists a session-era version but refused a session: the calls of session-era clients are bridged (input_required)",
				"server", s.cfg.GetId(), "err", err)
		}
		return nil
	}
	s.log.InfoContext(ctx, "upstream serves both eras: session-era clients' calls go through a session", "server", s.cfg.GetId(), "version", side.info().ProtocolVersion)
	s.side = side
	return side
}

// fly records a call in flight on the session of sessionSide until the returned func runs.
func (s *httpSession) fly(ctx context.Context, rl *httpRelay) func() {
	s.flightMu.Lock()
	defer s.flightMu.Unlock()
	if s.flight == nil {
		s.flight = map[*httpRelay]context.Context{}
	}
	s.flight[rl] = ctx
	return func() {
		s.flightMu.Lock()
		defer s.flightMu.Unlock()
		delete(s.flight, rl)
	}
}

// answerSideRequest answers a request of the server on the session of sessionSide. One on a
// call's response stream is that call's (answerServerRequest). mcp-go sends
// sampling/createMessage on the GET stream instead; such a request is attributed to the call
// in flight on the session when there is exactly one, as the tool host does for a shared stdio
// child, and otherwise refused with the reason: Zest never guesses.
func (s *httpSession) answerSideRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if rl, _ := ctx.Value(httpRelayKey{}).(*httpRelay); rl != nil || req.Method != MethodSampling && req.Method != MethodElicitation && req.Method != MethodRoots {
		return answerServerRequest(ctx, req)
	}
	s.flightMu.Lock()
	n := len(s.flight)
	var callCtx context.Context
	var only *httpRelay
	for rl, c := range s.flight {
		only, callCtx = rl, c
	}
	s.flightMu.Unlock()
	if n != 1 {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, fmt.Sprintf(
			"Internal error: %s came outside a call's response stream while %d calls are in flight on Zest's session with this server; Zest cannot tell which client it is for", req.Method, n), nil), nil
	}
	return answerServerRequest(context.WithValue(callCtx, httpRelayKey{}, only), req)
}

func (s *httpSession) isModern() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modern
}

// modernRequest gives params what a request of 2026-07-28 carries: in _meta the protocol
// version, and the client's identity and capabilities unless the request has its own (a
// modern client's request forwarded as it came keeps them; a session-era client's declares
// none); and the Mcp-Method and Mcp-Name headers mirroring the body.
func modernRequest(method string, params json.RawMessage) (json.RawMessage, http.Header) {
	var obj map[string]json.RawMessage
	if len(params) == 0 || string(params) == "null" || json.Unmarshal(params, &obj) != nil || obj == nil {
		obj = map[string]json.RawMessage{}
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(obj["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[mcp.MetaKeyProtocolVersion], _ = json.Marshal(ModernVersion)
	if _, ok := meta[mcp.MetaKeyClientCapabilities]; !ok {
		meta[mcp.MetaKeyClientCapabilities] = json.RawMessage(`{}`)
	}
	if _, ok := meta[mcp.MetaKeyClientInfo]; !ok {
		meta[mcp.MetaKeyClientInfo], _ = json.Marshal(clientInfo)
	}
	obj["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(obj)
	if err != nil {
		out = params
	}
	header := http.Header{}
	for k, v := range mcp.StandardHeaders(ModernVersion, mcp.MCPMethod(method), out) {
		header.Set(k, v)
	}
	return out, header
}

// listenRetry is the wait before a subscriptions/listen stream that ended is opened again.
const listenRetry = time.Second

// listenFilter is what Zest subscribes to on a server of 2026-07-28: the list_changed
// notifications its capabilities declare (what a session-era server sends on its GET stream).
func listenFilter(caps map[string]any) map[string]bool {
	filter := map[string]bool{}
	for kind, flag := range map[string]string{"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"} {
		if c, ok := caps[kind].(map[string]any); ok {
			if v, _ := c["listChanged"].(bool); v {
				filter[flag] = true
			}
		}
	}
	return filter
}

// listenStart is the first request of a subscriptions/listen stream: done closes when the
// server acknowledged it (err nil) or it ended first (err says why; errSuperseded when Zest
// replaced the stream).
type listenStart struct {
	done chan struct{}
	once sync.Once
	err  error
}

func newListenStart() *listenStart { return &listenStart{done: make(chan struct{})} }

func (l *listenStart) finish(err error) {
	l.once.Do(func() { l.err = err; close(l.done) })
}

// errSuperseded ends the first request of a listen stream that Zest replaced by another.
var errSuperseded = errors.New("subscriptions/listen stream replaced")

// relisten replaces the subscriptions/listen stream of a server driven without a session by
// one that asks for what s.listening and s.resources name (none when both are empty). It is
// called with s.mu held and unlocks it. It returns the new stream's first request.
func (s *httpSession) relisten() *listenStart {
	oldStop := s.stopListen
	s.stopListen = nil
	filter := map[string]any{}
	for k, v := range s.listening {
		filter[k] = v
	}
	if len(s.resources) > 0 {
		filter["resourceSubscriptions"] = slices.Sorted(maps.Keys(s.resources))
	}
	tr := s.tr
	start := newListenStart()
	s.started = start
	switch {
	case len(filter) > 0 && oauthclient.OnBehalf(s.cfg):
		// No caller's token would carry the stream: Zest hears such a server on the response
		// streams of its callers' requests only.
		start.finish(fmt.Errorf("%w: %q is called on behalf of each caller (oauth.grant token_exchange): Zest keeps no subscriptions/listen stream of its own open to it",
			ErrUpstream, s.cfg.GetId()))
	case len(filter) > 0 && tr != nil && !s.closed:
		lctx, stop := context.WithCancel(context.Background())
		s.stopListen = stop
		go s.listen(lctx, tr, filter, start)
	default:
		start.finish(nil)
	}
	s.mu.Unlock()
	if oldStop != nil {
		oldStop()
	}
	return start
}

// listen keeps a subscriptions/listen request open on tr, the 2026-07-28 replacement of the
// GET stream: its notifications reach onNotification as a session's do (list_changed lists
// the tools again and goes to the manager's OnNotification). Each acknowledgement lists the
// tools again too, for what changed while no stream was open. The first request finishes
// start. It ends with ctx (the connection was replaced or closed, or the filter changed).
func (s *httpSession) listen(ctx context.Context, tr *transport.StreamableHTTP, filter map[string]any, start *listenStart) {
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("zest-listen-%d", s.listenSeq.Add(1))
		ack := start
		if n > 0 {
			ack = newListenStart()
		}
		s.acks.Store(id, ack)
		params, header := modernRequest(string(mcp.MethodSubscriptionsListen), mustJSON(map[string]any{"notifications": filter}))
		resp, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
			ID: mcp.NewRequestId(id), Method: string(mcp.MethodSubscriptionsListen), Params: params, Header: header})
		s.acks.Delete(id)
		if n == 0 {
			switch {
			case ctx.Err() != nil:
				err = errSuperseded
			case err == nil && resp != nil && resp.Error != nil:
				data, _ := json.Marshal(resp.Error.Data)
				err = &RPCError{Code: resp.Error.Code, Message: resp.Error.Message, Data: data}
			case err == nil:
				err = fmt.Errorf("%w: %q: subscriptions/listen ended before it was acknowledged", ErrUpstream, s.cfg.GetId())
			}
			start.finish(err) // no news if it was acknowledged
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Debug("the subscriptions/listen stream ended; opening it again", "server", s.cfg.GetId(), "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(listenRetry):
		}
	}
}

// subscription reports whether method is one of the session era's resource subscription
// requests, which 2026-07-28 replaced by subscriptions/listen.
func subscription(method string) bool {
	return method == string(mcp.MethodResourcesSubscribe) || method == string(mcp.MethodResourcesUnsubscribe)
}

// subscribe bridges a session-era client's resources/subscribe or resources/unsubscribe to a
// server of 2026-07-28, which has neither: the resource is added to (or removed from) the
// resourceSubscriptions of Zest's subscriptions/listen stream, which is opened again with it,
// and the request is answered once the server acknowledges that stream; the server's
// notifications/resources/updated then come on it, as on a session's GET stream. A server
// that refuses the resource fails the request with its error, and the stream goes on without
// it. The connection is shared, as a session-era server's session is: an unsubscribe ends the
// resource's updates for every client of the server.
func (s *httpSession) subscribe(ctx context.Context, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" {
		return nil, &RPCError{Code: mcp.INVALID_PARAMS, Message: "Invalid params: " + method + " requires params.uri, the URI of a resource"}
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	add := method == string(mcp.MethodResourcesSubscribe)
	s.subscribing.Lock()
	defer s.subscribing.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrNotConnected, s.cfg.GetId())
	}
	if s.resources == nil {
		s.resources = map[string]bool{}
	}
	if add == s.resources[p.URI] { // nothing changes
		s.mu.Unlock()
		return json.RawMessage(`{}`), nil
	}
	if add {
		s.resources[p.URI] = true
	} else {
		delete(s.resources, p.URI)
	}
	start := s.relisten()
	for {
		select {
		case <-start.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %q: %s: the server did not acknowledge the subscription: %w", ErrUpstream, s.cfg.GetId(), method, ctx.Err())
		}
		if errors.Is(start.err, errSuperseded) { // reconnected meanwhile: the new stream has it too
			s.mu.Lock()
			next, closed := s.started, s.closed
			s.mu.Unlock()
			if closed || next == start {
				return nil, fmt.Errorf("%w: %q", ErrNotConnected, s.cfg.GetId())
			}
			start = next
			continue
		}
		if start.err == nil {
			return json.RawMessage(`{}`), nil
		}
		s.mu.Lock()
		if add {
			delete(s.resources, p.URI)
		}
		s.relisten()
		return nil, start.err
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// paramHeaders adds to a tools/call of a server of 2026-07-28 the Mcp-Param-* headers its
// tool's x-mcp-header annotations ask for, from the tools listed (cached) and the arguments.
func (s *httpSession) paramHeaders(header http.Header, params json.RawMessage) {
	tools, ok := s.cache.get()
	if !ok {
		return
	}
	var p struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	tool := mcpera.Tool(tools, p.Name)
	if tool == nil {
		return
	}
	for k, v := range mcp.GenerateParamHeaders(tool, params) {
		header.Set(k, v)
	}
}

// MaxInputRounds bounds the input_required rounds of one request bridged for a session-era
// client (callInputRounds): a server that still asks for input after this many answered
// rounds fails the request.
const MaxInputRounds = 10

// callInputRounds sends a session-era client's request to a server of 2026-07-28, which has
// no server requests: it asks for input by answering input_required (SEP-2322). The request
// declares the client's capabilities (hooks.Relays) in _meta, so that the server asks only
// for what the client can give. Each inputRequests member is relayed to the client through
// hooks.OnRequest as an ordinary request (waiting in this replica for its answer, as an HTTP
// server's request on a call's stream does), and once every one is answered the request is
// sent again with the answers as inputResponses and the server's requestState as it was.
// timeout bounds the whole exchange, the client's answers included. A request the client did
// not declare the capability for fails with -32021 (MISSING_REQUIRED_CLIENT_CAPABILITY), as
// the revision has a server answer such a client; a client's error answer fails the request
// with that error (an input response cannot carry one).
func (s *httpSession) callInputRounds(ctx context.Context, method string, params json.RawMessage, timeout time.Duration, hooks Hooks) (json.RawMessage, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	params = withClientCapabilities(params, hooks.Relays)
	sent := params
	for round := 0; ; round++ {
		res, err := s.call(ctx, method, sent, 0)
		if err != nil {
			return nil, err
		}
		var ir struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  *string                    `json:"requestState"`
		}
		if !bytes.Contains(res, []byte(`"input_required"`)) || json.Unmarshal(res, &ir) != nil || ir.ResultType != string(mcp.ResultTypeInputRequired) {
			return res, nil
		}
		if round == MaxInputRounds {
			return nil, &RPCError{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf(
				"Internal error: MCP server %q still asked for input (input_required) after %d rounds answered by the client; Zest gives up a request after that many", s.cfg.GetId(), MaxInputRounds)}
		}
		responses, err := s.fulfil(ctx, method, ir.InputRequests, hooks)
		if err != nil {
			return nil, err
		}
		if sent, err = withInputResponses(params, responses, ir.RequestState); err != nil {
			return nil, fmt.Errorf("%w: %q: %s: %v", ErrUpstream, s.cfg.GetId(), method, err)
		}
	}
}

// fulfil relays the input requests of one input_required result to the client and returns
// its answers by key.
func (s *httpSession) fulfil(ctx context.Context, method string, requests map[string]json.RawMessage, hooks Hooks) (map[string]json.RawMessage, error) {
	type pending struct {
		key, method, waiter string
		ch                  chan relayAnswer
	}
	var asked []pending
	defer func() {
		for _, p := range asked {
			s.waiting.remove(p.waiter)
		}
	}()
	keys := slices.Sorted(maps.Keys(requests))
	var reqs []ServerRequest
	for _, key := range keys {
		var r struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(requests[key], &r); err != nil || r.Method == "" {
			return nil, fmt.Errorf("%w: %q: %s: input request %q of its input_required result has no method", ErrUpstream, s.cfg.GetId(), method, key)
		}
		if r.Method != MethodSampling && r.Method != MethodElicitation && r.Method != MethodRoots {
			return nil, fmt.Errorf("%w: %q: %s: input request %q asks for %s, which is not one a client answers (sampling/createMessage, elicitation/create, roots/list)", ErrUpstream, s.cfg.GetId(), method, key, r.Method)
		}
		if !hooks.Relays.Accepts(r.Method) {
			capability := strings.SplitN(r.Method, "/", 2)[0]
			data, _ := json.Marshal(map[string]string{"capability": capability})
			return nil, &RPCError{Code: mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, Data: data, Message: fmt.Sprintf(
				"Missing required client capability: MCP server %q asks the client for %s, and the client did not declare the %q capability in initialize", s.cfg.GetId(), r.Method, capability)}
		}
		id, ch := s.waiting.add()
		asked = append(asked, pending{key: key, method: r.Method, waiter: id, ch: ch})
		reqs = append(reqs, ServerRequest{Ref: "h:" + id, Method: r.Method, Params: r.Params})
	}
	for _, r := range reqs {
		hooks.OnRequest(r)
	}
	out := make(map[string]json.RawMessage, len(asked))
	for _, p := range asked {
		select {
		case a := <-p.ch:
			if a.err != nil {
				return nil, &RPCError{Code: a.err.Code, Data: a.err.Data,
					Message: fmt.Sprintf("the client answered %s (asked by MCP server %q) with an error: %s", p.method, s.cfg.GetId(), a.err.Message)}
			}
			out[p.key] = a.result
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %q: %s: waiting for the client's answer to %s: %w", ErrUpstream, s.cfg.GetId(), method, p.method, ctx.Err())
		}
	}
	return out, nil
}

// withClientCapabilities declares in params' _meta the capabilities of a session-era client
// (what it accepts of the server's requests), which modernRequest keeps.
func withClientCapabilities(params json.RawMessage, r Relays) json.RawMessage {
	caps := map[string]any{}
	if r.Sampling {
		caps["sampling"] = map[string]any{}
	}
	if r.Elicitation {
		caps["elicitation"] = map[string]any{}
	}
	if r.Roots {
		caps["roots"] = map[string]any{}
	}
	out, err := setMembers(params, map[string]any{}, map[string]any{mcp.MetaKeyClientCapabilities: caps})
	if err != nil {
		return params
	}
	return out
}

// withInputResponses is the retry of a request: its params with inputResponses and the
// server's requestState (absent when the server gave none).
func withInputResponses(params json.RawMessage, responses map[string]json.RawMessage, state *string) (json.RawMessage, error) {
	members := map[string]any{"inputResponses": responses}
	if state != nil {
		members["requestState"] = *state
	}
	return setMembers(params, members, nil)
}

// setMembers sets members of a params object, and members of its _meta.
func setMembers(params json.RawMessage, members, meta map[string]any) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &obj); err != nil {
			return nil, err
		}
	}
	if obj == nil {
		obj = map[string]json.RawMessage{}
	}
	for k, v := range members {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		obj[k] = b
	}
	if len(meta) > 0 {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(obj["_meta"], &m)
		if m == nil {
			m = map[string]json.RawMessage{}
		}
		for k, v := range meta {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			m[k] = b
		}
		obj["_meta"], _ = json.Marshal(m)
	}
	return json.Marshal(obj)
}
