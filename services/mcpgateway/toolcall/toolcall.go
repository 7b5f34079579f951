// Package toolcall is the one door of every tool call mcpgateway makes. Each entry point —
// the admin API's CallTool (REST and gRPC), the built-in tools of /mcp, /mcp/servers/{id},
// /mcp/presets/{id} and the chat loop — builds a Call and hands it to Pipeline.Invoke, whose
// chain is, in order:
//
//	resolve     the server exists and this caller may see it (Resolve: one rule for every path)
//	filters     the server's tools_allow / tools_deny
//	on behalf   a server of oauth.grant token_exchange needs a caller with an access token
//	pinning     a tool whose definition changed since it was pinned is held, one never listed refused (pins.Gate)
//	approval    a person decides, bound to the server, the tool and the arguments (approve.go)
//	limits      the server's rate_limit and max_concurrency, each call counted (limits.go)
//	dispatch    the server through upstream, or the built-in tools in process (Builtin)
//	output cap  the server's max_output_bytes (output.go)
//	record      the log line, the span, the activity record (and with it the audit trail and
//	            the metrics) (record.go)
//
// No other code sends tools/call to a server: upstream's generic calls refuse the method, and
// a test (onedoor_test.go) fails when a package outside this one reaches the dispatch.
package toolcall

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/ratelimit"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"github.com/zestmcp/zest/services/mcpgateway/audit"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/pins"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// Entry names the way a tool call came in.
type Entry string

// The entry points. Entries lists them all.
const (
	// EntryAdmin is AdminService.CallTool: POST /internal/mcp/servers/{id}/tools/call and gRPC.
	EntryAdmin Entry = "admin"
	// EntryMCP is a tools/call of a built-in tool on /mcp.
	EntryMCP Entry = "mcp"
	// EntryServer is a tools/call on /mcp/servers/{id}.
	EntryServer Entry = "server"
	// EntryPreset is a tools/call on /mcp/presets/{id} (and on /mcp with ZEST_MCP_PRESET).
	EntryPreset Entry = "preset"
	// EntryChat is a tool call of the chat loop.
	EntryChat Entry = "chat"
	// EntrySearch is a call_tool of a preset with tool_search, on /mcp/presets/{id} (and on
	// /mcp with ZEST_MCP_PRESET): the tool search_tools found, called through the meta-tool.
	EntrySearch Entry = "search"
)

// Entries are every entry point, each used by exactly one package (onedoor_test.go).
var Entries = []Entry{EntryAdmin, EntryMCP, EntryServer, EntryPreset, EntryChat, EntrySearch}

// Call is one tool call as an entry point hands it in.
type Call struct {
	Entry Entry
	// Server is the server's id; serverconfig.LemonadeProvider for a built-in tool.
	Server string
	// Tool is the tool's own name on its server.
	Tool string
	// ChatName is the name the caller used when it differs (a preset's or the chat's
	// chat_name).
	ChatName string
	// Preset is the preset the call came through, if any.
	Preset string
	// CallID is the model's id of the call (the chat loop).
	CallID string
	// Params are the tools/call params as the server gets them (their name is Tool).
	Params json.RawMessage
	// Timeout bounds the call (0: the server's timeout_ms).
	Timeout time.Duration
	// Hooks take the server's progress and requests during the call (the MCP endpoints).
	Hooks upstream.Hooks
	// Approver involves the caller in an approval; nil: the call waits for an administrator,
	// told to nobody but the log.
	Approver Approver
	// Retry is a client's retry that answers an earlier input_required result (MCP
	// 2026-07-28); nil for a first call.
	Retry *Retry
}

// Retry is what a client's retry answers: an approval the call asked of it, or the requests
// of a call parked in the tool host.
type Retry struct {
	// Approval is the approval a requestState named, and Answer the client's answer to its
	// elicitation.
	Approval string
	Answer   json.RawMessage
	// Parked names the parked call (upstream.InputRequiredError.Call), and Answers are the
	// client's answers to its requests.
	Parked  string
	Answers []upstream.ClientAnswer
}

// Servers are where the configs are read (the registry's cache).
type Servers interface {
	GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error)
}

// Upstreams dispatch a call to a registered server (upstream.Manager).
type Upstreams interface {
	DispatchToolCall(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, params json.RawMessage, timeout time.Duration, hooks upstream.Hooks) (json.RawMessage, error)
	ResumeToolCall(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, call string, answers []upstream.ClientAnswer, hooks upstream.Hooks) (json.RawMessage, error)
	Listed(id string) (tools []json.RawMessage, version uint64, ok bool)
}

// Builtin runs the built-in tools in process, as an upstream of their own: the tools/call
// params go in, the CallToolResult (or a *upstream.RPCError) comes out. The built-in tools'
// notifications go to the MCP session ctx carries, if any (mcpserve.Handler).
type Builtin interface {
	CallBuiltin(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
	// IsBuiltin reports whether name is a built-in tool.
	IsBuiltin(name string) bool
}

// Config is the pipeline's configuration.
type Config struct {
	// MaxOutputBytes bounds one result of a server whose config sets no max_output_bytes
	// (ZEST_TOOL_OUTPUT_MAX_BYTES; 0: serverconfig.DefaultMaxOutputBytes).
	MaxOutputBytes int
}

// Option sets what a pipeline records and asks.
type Option func(*Pipeline)

// WithActivity records each call in log (and, through it, in the audit trail and metrics).
func WithActivity(log *activity.Log) Option { return func(p *Pipeline) { p.activity = log } }

// WithApprovals holds the calls that need approval in gate; without it they are refused.
func WithApprovals(gate *approval.Gate) Option { return func(p *Pipeline) { p.gate = gate } }

// WithAudit records the decisions MCP clients take on approvals in the audit trail (an
// administrator's are recorded by its own interceptor).
func WithAudit(trail *audit.Log) Option { return func(p *Pipeline) { p.audit = trail } }

// WithPins refuses the calls of tools that gate holds (their definition changed since it
// was pinned); without it no tool is held.
func WithPins(gate *pins.Gate) Option { return func(p *Pipeline) { p.pins = gate } }

// WithLogger sets the logger (slog.Default when absent).
func WithLogger(log *slog.Logger) Option { return func(p *Pipeline) { p.log = log } }

// WithBuiltin serves the built-in tools (the provider "lemonade").
func WithBuiltin(b Builtin) Option { return func(p *Pipeline) { p.builtin = b } }

// Pipeline is the one chain every tool call takes.
type Pipeline struct {
	cfg      Config
	servers  Servers
	up       Upstreams
	keys     keyauth.Keys
	builtin  Builtin
	gate     *approval.Gate
	pins     *pins.Gate
	audit    *audit.Log
	activity *activity.Log
	log      *slog.Logger
	// limits are the servers' rate_limit and max_concurrency state (limits.go).
	limits *ratelimit.Keyed
	// listed names the tools each server listed last, for the metrics' tool label (record.go).
	listed listedNames
}

// New returns the pipeline over the server configs, the upstreams and the keys that tell
// administrators apart.
func New(cfg Config, servers Servers, up Upstreams, keys keyauth.Keys, opts ...Option) *Pipeline {
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = serverconfig.DefaultMaxOutputBytes
	}
	p := &Pipeline{cfg: cfg, servers: servers, up: up, keys: keys, limits: ratelimit.NewKeyed(0), log: slog.Default()}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Approvals is the gate of the calls that wait for approval (nil: none are held).
func (p *Pipeline) Approvals() *approval.Gate { return p.gate }

// Invoke runs one tool call through the chain and returns the CallToolResult as the server
// (or the chain: an output over its limit) answered it. A call the chain refuses returns
// one of this package's errors (errors.go); an answer to end the request with at once (an
// input_required result asking for approval) comes back as the result.
func (p *Pipeline) Invoke(ctx context.Context, c *Call) (json.RawMessage, error) {
	r := p.begin(ctx, c)
	res, err := p.chain(r.ctx, c)
	p.end(r, c, res, err)
	return res, err
}

// chain is the links of Invoke, in their order.
func (p *Pipeline) chain(ctx context.Context, c *Call) (json.RawMessage, error) {
	cfg, err := p.resolve(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := serverconfig.CheckTool(cfg, c.Tool); err != nil {
		return nil, err
	}
	// A server called on behalf of each caller (oauth.grant token_exchange) is called with the
	// caller's own access token, which ctx carries from the edge (keyauth.CallerTokenOf) to
	// the upstream's transport: a caller without one is refused here, before anyone approves
	// or any limit counts the call, never called as another identity.
	if err := oauthclient.CheckCaller(ctx, cfg); err != nil {
		return nil, err
	}
	if cfg != builtinConfig {
		if err := p.pins.Check(ctx, cfg, c.Tool); err != nil {
			return nil, err
		}
	}
	if c.Retry != nil && c.Retry.Parked != "" {
		// The parked call passed approval and limits when it began; its answers only
		// supply what the server asked.
		res, err := p.up.ResumeToolCall(ctx, cfg, c.Retry.Parked, c.Retry.Answers, c.Hooks)
		return p.limitOutput(cfg, res, err)
	}
	if answer, err := p.approve(ctx, c, cfg); answer != nil || err != nil {
		return answer, err
	}
	release, err := p.admit(cfg)
	if err != nil {
		return nil, err
	}
	defer release()
	var res json.RawMessage
	if cfg == builtinConfig {
		res, err = p.builtin.CallBuiltin(ctx, c.Params)
	} else {
		res, err = p.up.DispatchToolCall(ctx, cfg, c.Params, c.Timeout, c.Hooks)
	}
	return p.limitOutput(cfg, res, err)
}
