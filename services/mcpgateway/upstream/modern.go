package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/services/mcpgateway/stateless"
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
	tr, err := transport.NewStreamableHTTP(s.cfg.GetUrl(), transport.WithHTTPHeaders(s.headers),
		transport.WithHTTPLogger(slog.New(transportLog{s.log.Handler()}).With("server", s.cfg.GetId())))
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
	lctx, stop := context.WithCancel(context.Background())
	oldStop := s.stopListen
	s.stopListen = stop
	s.mu.Unlock()
	if oldStop != nil {
		oldStop()
	}
	closeOld(oldCl, oldTr)
	if filter := listenFilter(res.Capabilities); len(filter) > 0 {
		go s.listen(lctx, tr, filter)
	}
	s.log.DebugContext(ctx, "upstream serves MCP 2026-07-28: driven without a session", "server", s.cfg.GetId(), "took", time.Since(began))
	return true
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

// listen keeps a subscriptions/listen request open on tr, the 2026-07-28 replacement of the
// GET stream: its notifications reach onNotification as a session's do (list_changed lists
// the tools again and goes to the manager's OnNotification). Each acknowledgement lists the
// tools again too, for what changed while no stream was open. It ends with ctx (the
// connection was replaced or closed).
func (s *httpSession) listen(ctx context.Context, tr *transport.StreamableHTTP, filter map[string]bool) {
	for n := 0; ctx.Err() == nil; n++ {
		params, header := modernRequest(string(mcp.MethodSubscriptionsListen), mustJSON(map[string]any{"notifications": filter}))
		_, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
			ID: mcp.NewRequestId(fmt.Sprintf("zest-listen-%d", n)), Method: string(mcp.MethodSubscriptionsListen), Params: params, Header: header})
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
	tool := stateless.Tool(tools, p.Name)
	if tool == nil {
		return
	}
	for k, v := range mcp.GenerateParamHeaders(tool, params) {
		header.Set(k, v)
	}
}
