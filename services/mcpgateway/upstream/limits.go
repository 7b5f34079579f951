package upstream

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/zestmcp/zest/lib/ratelimit"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// Limits per server (docs/untrusted-tools.md). A server's rate_limit and max_concurrency
// bound its tool calls, all callers together, on every path: the admin API and the chat loop
// call through Call (CallTool), /mcp/servers/{id} and presets through CallWith, progress
// through CallProgress — each admits a tools/call here before it connects. A call resumed
// after input_required (Resume) was admitted when it began. The state is this replica's: N
// replicas of mcpgateway let a server up to N times its limits.

// LimitError is a tools/call refused by its server's limits. As a *RPCError (errors.As) it is
// the JSON-RPC error an MCP client gets (ratelimit.JSONRPCCode, data.retry_after_ms); the
// admin API turns it into ResourceExhausted with RetryInfo, the chat loop into a tool result
// with isError that tells the model to retry later.
type LimitError struct {
	Server string
	// Reason is ratelimit.ReasonRate or ratelimit.ReasonConcurrency.
	Reason      string
	Rate        ratelimit.Rate
	Concurrency int
	RetryAfter  time.Duration
}

func (e *LimitError) Error() string {
	secs := ratelimit.RetryAfterSeconds(e.RetryAfter)
	if e.Reason == ratelimit.ReasonConcurrency {
		return fmt.Sprintf("MCP server %q has %d tool calls in flight, its max_concurrency: retry when one has finished, after %d s", e.Server, e.Concurrency, secs)
	}
	return fmt.Sprintf("MCP server %q is over its rate_limit of %s: retry after %d s", e.Server, e.Rate.Words("tool calls"), secs)
}

// As makes a LimitError a *RPCError for errors.As: every MCP path that passes a server's
// JSON-RPC errors on passes this one on too.
func (e *LimitError) As(target any) bool {
	p, ok := target.(**RPCError)
	if ok {
		data, _ := json.Marshal(map[string]any{"retry_after_ms": max(1, e.RetryAfter.Milliseconds()), "reason": e.Reason, "server": e.Server})
		*p = &RPCError{Code: ratelimit.JSONRPCCode, Message: e.Error(), Data: data}
	}
	return ok
}

// ServerLimits reads a stored config's rate_limit and max_concurrency (serverconfig checked
// them: a rate that does not parse here is no limit).
func ServerLimits(cfg *mcpgatewayv1.ServerConfig) ratelimit.Limits {
	r, _ := ratelimit.ParseSetting(cfg.GetRateLimit())
	return ratelimit.Limits{Rate: r, Concurrency: int(cfg.GetMaxConcurrency())}
}

// admit applies the limits of cfg's server to one call of method (only tools/call is
// limited); release ends an admitted call.
func (m *Manager) admit(cfg *mcpgatewayv1.ServerConfig, method string) (release func(), err error) {
	if method != "tools/call" {
		return func() {}, nil
	}
	l := ServerLimits(cfg)
	d := m.limits.Admit(cfg.GetId(), l)
	if !d.OK {
		return nil, &LimitError{Server: cfg.GetId(), Reason: d.Reason, Rate: l.Rate, Concurrency: l.Concurrency, RetryAfter: d.RetryAfter}
	}
	return d.Release, nil
}
