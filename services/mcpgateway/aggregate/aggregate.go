// Package aggregate serves a preset's providers together on one MCP endpoint:
// /mcp/presets/{id}, and /mcp itself when the operator names a preset for it
// (ZEST_MCP_PRESET). Session-era MCP, as /mcp/servers/{id}, and request by request beside it
// MCP 2026-07-28 without sessions (modern.go).
//
// Tools and prompts of a registered server are served under their chat_name (catalog.ChatName,
// the name the chat loop gives them); the built-in "lemonade" provider's tools keep their own
// names and are served by /mcp's own implementation. The preset's tools field shapes them
// (toolshape: renamed, described anew, hidden, arguments fixed or defaulted), and a call of a
// shaped name reaches the tool itself. Resources keep their URIs, and a request
// about a URI goes to the provider that listed it (or whose template matches it). Each request
// reaches its provider through federate.Handler.Forward, as on /mcp/servers/{id}: progress with
// the client's token, cancellation, the server's timeout, failures hidden from non-admins behind
// an incident id. A server that is down is left out of the lists (logged, and named in the
// list result's _meta); the others keep serving. A server with "expose": false is a provider
// for administrators only; a disabled server is no provider.
package aggregate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/keyauth"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/fanout"
	"github.com/zestmcp/zest/services/mcpgateway/federate"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"github.com/zestmcp/zest/services/mcpgateway/toolshape"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Registry is where presets and server configs are read.
type Registry interface {
	GetPreset(ctx context.Context, id string) (*mcpgatewayv1.Preset, error)
	GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error)
}

// Upstreams are the connections to the servers (upstream.Manager).
type Upstreams interface {
	federate.Upstreams
	ListTools(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, refresh bool) ([]json.RawMessage, error)
}

// Builtin serves the "lemonade" provider: /mcp's own tools (mcpserve.Handler). Their calls
// go through the tool-call pipeline with the session WithSession gives the context.
type Builtin interface {
	WithSession(ctx context.Context, sessionID string, cl session.Claims, send func([]byte) error) (context.Context, func() error)
	BuiltinTools(ctx context.Context) ([]json.RawMessage, error)
}

// Handler serves the preset endpoints.
type Handler struct {
	reg      Registry
	up       Upstreams
	builtin  Builtin
	fed      *federate.Handler
	sessions *session.Codec
	store    mcpserve.Ended
	keys     keyauth.Keys
	log      *slog.Logger
	hub      *fanout.Hub
	owners   owners
	// bell wakes the GET streams to read their preset again at once (PresetChanged).
	bell fanout.Bell
	// names of the built-in tools: fixed once the server is built, read once.
	namesOnce sync.Once
	names     []string
	// listenCheck is how often an open GET stream checks that its session was not ended,
	// reads its log level again, and reads its preset again (a changed provider set is
	// announced with list_changed).
	listenCheck time.Duration
	// tools is the tool-call pipeline every tools/call goes through, and the one rule of
	// which servers a caller may reach (providers).
	tools *toolcall.Pipeline
	// search is the shared tool-search index of presets with tool_search (nil: none).
	search *toolsearch.Shared
}

// Option configures a Handler.
type Option func(*Handler)

// WithListenCheck sets how often an open GET stream checks that its session was not ended,
// reads its log level and its preset again (mcpserve.DefaultListenCheck).
func WithListenCheck(d time.Duration) Option { return func(h *Handler) { h.listenCheck = d } }

// New returns the handler: every tools/call goes through tools, the tool-call pipeline, whose
// rule says which servers a caller may reach; builtin is the "lemonade" provider's tools, fed
// the other providers' calls. Call Notify with every upstream notification.
func New(reg Registry, up Upstreams, tools *toolcall.Pipeline, builtin Builtin, fed *federate.Handler, codec *session.Codec, store mcpserve.Ended, keys keyauth.Keys, log *slog.Logger, opts ...Option) *Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{reg: reg, up: up, tools: tools, builtin: builtin, fed: fed, sessions: codec, store: store, keys: keys, log: log,
		listenCheck: mcpserve.DefaultListenCheck, hub: fanout.NewHub(), owners: owners{m: map[string]string{}}}
	for _, o := range opts {
		o(h)
	}
	return h
}

// builtinNames are the names of the built-in tools.
func (h *Handler) builtinNames(ctx context.Context) []string {
	h.namesOnce.Do(func() {
		tools, err := h.builtin.BuiltinTools(ctx)
		if err != nil {
			h.log.ErrorContext(ctx, "reading the built-in tools", "err", err)
		}
		h.names = itemNames(tools, "name")
	})
	return h.names
}

// endpoint is one way into a preset: /mcp/presets/{id}, or /mcp serving it (own).
type endpoint struct {
	preset string
	own    bool
}

// binding is the Claims.Server of the endpoint's sessions. Server ids cannot hold ':', so a
// preset's session is never one of a server, and a session of /mcp/presets/{id} is not one of
// /mcp (and the other way round).
func (e endpoint) binding() string {
	if e.own {
		return "mcp+preset:" + e.preset
	}
	return "preset:" + e.preset
}

func (e endpoint) path() string {
	if e.own {
		return "/mcp"
	}
	return "/mcp/presets/" + e.preset
}

var _ mcphttp.Endpoint = (*Handler)(nil)

// Exchange answers one POST body of /mcp/presets/{id}.
func (h *Handler) Exchange(req *mcphttp.Request, stream mcphttp.ExchangeStream) error {
	return h.exchange(endpoint{preset: req.PresetID}, req, stream)
}

// Listen serves GET /mcp/presets/{id}.
func (h *Handler) Listen(req *mcphttp.Request, stream mcphttp.ListenStream) error {
	return h.listen(endpoint{preset: req.PresetID}, req.SessionID(), stream)
}

// EndSession serves DELETE /mcp/presets/{id}.
func (h *Handler) EndSession(ctx context.Context, req *mcphttp.Request) error {
	return h.end(ctx, endpoint{preset: req.PresetID}, req.SessionID())
}

// ForMCP serves /mcp with preset id's providers in place of the built-in tools
// (ZEST_MCP_PRESET): the Federation mcpserve.NewRoutes serves /mcp with.
func (h *Handler) ForMCP(id string) mcphttp.Endpoint {
	return own{h: h, ep: endpoint{preset: id, own: true}}
}

type own struct {
	h  *Handler
	ep endpoint
}

func (o own) Exchange(req *mcphttp.Request, stream mcphttp.ExchangeStream) error {
	return o.h.exchange(o.ep, req, stream)
}

func (o own) Listen(req *mcphttp.Request, stream mcphttp.ListenStream) error {
	return o.h.listen(o.ep, req.SessionID(), stream)
}

func (o own) EndSession(ctx context.Context, req *mcphttp.Request) error {
	return o.h.end(ctx, o.ep, req.SessionID())
}

// provider is one provider of a preset as this caller may use it: a registered server
// (cfg), or the built-in tools (cfg nil).
type provider struct {
	id  string
	cfg *mcpgatewayv1.ServerConfig
	// shape is the preset's tool shaping (Preset.tools), the same for each of its providers.
	shape *toolshape.Shape
}

func (p provider) builtin() bool { return p.cfg == nil }

// providers reads the preset and returns the providers the caller may use, in the preset's
// order. A server that is not registered or not enabled is no provider (logged); one with
// "expose": false is one for administrators only, and invisible to everyone else.
func (h *Handler) providers(ctx context.Context, ep endpoint) ([]provider, error) {
	p, err := h.reg.GetPreset(ctx, ep.preset)
	switch {
	case errors.Is(err, registry.ErrNotFound) || ep.preset == "":
		if ep.own {
			return nil, ownPresetError(ep.preset)
		}
		return nil, status.Errorf(codes.NotFound, "%v: %q", ErrUnknownPreset, ep.preset)
	case err != nil:
		return nil, status.Errorf(codes.Internal, "registry: %v", err)
	}
	var out []provider
	shape := toolshape.New(p.GetTools())
	for _, id := range p.GetMcpServerIds() {
		if id == serverconfig.LemonadeProvider {
			out = append(out, provider{id: id, shape: shape})
			continue
		}
		// The one rule of who reaches a server: one that is not registered, disabled or
		// hidden from this caller is left out alike.
		cfg, err := h.tools.Resolve(ctx, toolcall.EntryPreset, id)
		var unknown *toolcall.UnknownServerError
		switch {
		case errors.As(err, &unknown):
			h.log.DebugContext(ctx, "a preset names a server this caller cannot reach: left out", "preset", ep.preset, "server", id)
		case err != nil:
			return nil, status.Errorf(codes.Internal, "registry: %v", err)
		default:
			out = append(out, provider{id: id, cfg: cfg, shape: shape})
		}
	}
	return out, nil
}

// rpcError is err as a gRPC status: a missing preset of /mcp (ZEST_MCP_PRESET) is the
// operator's to fix, not the client's (Internal: HTTP 500 with the message).
func rpcError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// session checks a session id for the endpoint, and its MCP-Protocol-Version header.
func (h *Handler) session(ctx context.Context, ep endpoint, id, header string) (session.Claims, error) {
	return mcpserve.CheckSession(ctx, h.sessions, h.store, id, ep.binding(), header)
}

func (h *Handler) expires(cl session.Claims) time.Time {
	if exp := h.sessions.Expires(cl); !exp.IsZero() {
		return exp
	}
	return time.Now().Add(365 * 24 * time.Hour)
}

// exchange answers one POST body of the endpoint.
func (h *Handler) exchange(ep endpoint, req *mcphttp.Request, stream mcphttp.ExchangeStream) error {
	ctx := stream.Context()
	r, err := mcpera.Of(req)
	if err != nil {
		return err
	}
	out := federate.NewOutput(stream)
	payload := bytes.TrimSpace(req.Body)
	provs, err := h.providers(ctx, ep)
	if errors.Is(err, ErrUnknownPreset) { // /mcp's preset is missing: every request is told why
		h.log.ErrorContext(ctx, "ZEST_MCP_PRESET names a preset that is not in the registry", "preset", ep.preset)
		msg, _, _ := jsonrpc.Check(payload)
		if !msg.IsRequest() {
			return out.Malformed(jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, "Internal error: "+err.Error()))
		}
		return out.Final(jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, "Internal error: "+err.Error()))
	}
	if err != nil {
		return err
	}
	if r.Modern {
		return h.modern(ctx, ep, req, r, provs, out)
	}
	if len(payload) > 0 && payload[0] == '[' {
		return h.batch(ctx, ep, req, provs, payload, out)
	}
	msg, code, problem := jsonrpc.Check(payload)
	if problem != "" {
		return out.Malformed(jsonrpc.ErrorResponse(msg.ID, code, problem))
	}
	if msg.Method == string(mcp.MethodInitialize) && msg.IsRequest() {
		return h.initialize(ctx, ep, provs, payload, msg.ID, out)
	}
	cl, err := h.session(ctx, ep, req.SessionID(), req.ProtocolVersion())
	if err != nil {
		return err
	}
	c := &call{h: h, ep: ep, provs: provs, sessionID: req.SessionID(), claims: cl, out: out}
	resp := c.dispatch(ctx, payload, msg)
	if resp == nil {
		return out.Err()
	}
	if !msg.IsRequest() {
		return out.Malformed(resp)
	}
	return out.Final(resp)
}

// batch answers a JSON-RPC batch of a 2025-03-26 session, item by item.
func (h *Handler) batch(ctx context.Context, ep endpoint, req *mcphttp.Request, provs []provider, payload []byte, out *federate.Output) error {
	var c *call
	return out.End(mcpserve.Batch(ctx, payload, func() (string, error) {
		cl, err := h.session(ctx, ep, req.SessionID(), req.ProtocolVersion())
		c = &call{h: h, ep: ep, provs: provs, sessionID: req.SessionID(), claims: cl, out: out}
		return cl.ProtocolVersion, err
	}, func(item []byte, msg jsonrpc.Message) ([]byte, error) {
		return c.dispatch(ctx, item, msg), out.Err()
	}))
}

// ServerName is the serverInfo.name of a preset's endpoint.
func ServerName(preset string) string { return "zest-preset-" + preset }

// initialize negotiates the client's version as /mcp does, issues a session id bound to the
// endpoint and answers with Zest's serverInfo, the union of the providers' capabilities and
// instructions that name the providers (describe).
func (h *Handler) initialize(ctx context.Context, ep endpoint, provs []provider, payload, id json.RawMessage, out *federate.Output) error {
	if problem := mcpserve.CheckInitializeParams(payload); problem != "" {
		return out.Final(jsonrpc.ErrorResponse(id, mcp.INVALID_PARAMS, problem))
	}
	version := mcpserve.Negotiate(payload)
	caps, instr := h.describe(ctx, ep, provs)
	result := map[string]any{"protocolVersion": version, "capabilities": caps,
		"serverInfo": serverInfo(ep), "instructions": instr}
	h.log.DebugContext(ctx, "preset session started", "preset", ep.preset, "endpoint", ep.path(), "protocol_version", version)
	return h.fed.StartSession(out, payload, id, version, ep.binding(), result)
}

// serverInfo is Zest's identity on the endpoint.
func serverInfo(ep endpoint) map[string]any {
	return map[string]any{"name": ServerName(ep.preset), "version": mcpserve.ServerVersion}
}

// describe is what the endpoint says of itself (initialize, and server/discover of
// 2026-07-28): the union of the providers' capabilities, and instructions that name the
// providers. A provider that cannot be reached is left out (and logged, and named as
// unavailable): the others are served.
func (h *Handler) describe(ctx context.Context, ep endpoint, provs []provider) (map[string]any, string) {
	infos := h.infos(ctx, provs)
	caps := map[string]any{"logging": map[string]any{}}
	var names []string
	for i, pr := range provs {
		if pr.builtin() {
			caps["tools"] = map[string]any{"listChanged": true}
			names = append(names, fmt.Sprintf("%q (Zest's built-in lemonade_* tools, under their own names)", pr.id))
			continue
		}
		inf := infos[i]
		if inf == nil {
			names = append(names, fmt.Sprintf("%q (unavailable when this was answered)", pr.id))
			continue
		}
		line := fmt.Sprintf("%q (%s)", pr.id, serverName(pr, inf))
		if inf.Instructions != "" {
			line += ": " + strings.Join(strings.Fields(inf.Instructions), " ")
		}
		names = append(names, line)
		union(caps, inf.Capabilities)
	}
	instr := fmt.Sprintf("Zest preset %q: the tools and prompts of its MCP servers, named mcp_<server>__<name> (the names Zest's chat loop gives them), and their resources with their own URIs.", ep.preset)
	if len(provs) > 0 && provs[0].shape != nil {
		instr += " The preset renames, describes or hides some tools: call them by the names tools/list gives."
	}
	if len(names) > 0 {
		instr += " Providers: " + strings.Join(names, "; ") + "."
	} else {
		instr += " It has no provider you may use."
	}
	return caps, instr
}

func serverName(p provider, inf *upstream.Info) string {
	if n, _ := inf.ServerInfo["name"].(string); n != "" {
		return n
	}
	if n := p.cfg.GetName(); n != "" {
		return n
	}
	return p.id
}

// infos connects the servers among provs (concurrently, on demand) and returns their
// handshakes, nil for the built-in provider and for a server that cannot be reached (logged).
func (h *Handler) infos(ctx context.Context, provs []provider) []*upstream.Info {
	out := make([]*upstream.Info, len(provs))
	var wg sync.WaitGroup
	for i, p := range provs {
		if p.builtin() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			inf, err := h.up.Info(ctx, p.cfg)
			if err != nil {
				h.log.WarnContext(ctx, "a provider of a preset cannot be reached: left out", "server", p.id, "err", err)
				return
			}
			out[i] = &inf
		}()
	}
	wg.Wait()
	return out
}

// union adds what a provider's capabilities declare to caps: tools, prompts and resources
// (always with listChanged: any provider's change is announced), resources.subscribe when
// one provider offers it, and completions.
func union(caps, provider map[string]any) {
	for _, k := range []string{"tools", "prompts", "resources"} {
		if c, ok := provider[k]; ok && c != nil {
			m, _ := caps[k].(map[string]any)
			if m == nil {
				m = map[string]any{"listChanged": true}
				caps[k] = m
			}
			if k == "resources" {
				if pm, _ := c.(map[string]any); pm != nil && pm["subscribe"] == true {
					m["subscribe"] = true
				}
			}
		}
	}
	if c, ok := provider["completions"]; ok && c != nil {
		caps["completions"] = map[string]any{}
	}
}

// end serves DELETE: the session id is refused from then on, by every replica.
func (h *Handler) end(ctx context.Context, ep endpoint, id string) error {
	if _, err := h.providers(ctx, ep); err != nil && !ep.own {
		return err
	}
	cl, err := h.session(ctx, ep, id, "")
	if err != nil {
		return err
	}
	if err := h.store.EndSession(ctx, id, h.expires(cl)); err != nil {
		return status.Errorf(codes.Internal, "session store: %v", err)
	}
	session.Ended(cl)
	return nil
}
