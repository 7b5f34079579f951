package toolcall

import (
	"github.com/zestmcp/zest/lib/ratelimit"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// Limits per server (docs/operator/untrusted-tools.md): a server's rate_limit and max_concurrency bound
// its tool calls, all callers and entry points together, each call counted once (a batch's
// calls each count). The state is this replica's: N replicas of mcpgateway let a server up to
// N times its limits.

// ServerLimits reads a stored config's rate_limit and max_concurrency (serverconfig checked
// them: a rate that does not parse here is no limit).
func ServerLimits(cfg *mcpgatewayv1.ServerConfig) ratelimit.Limits {
	r, _ := ratelimit.ParseSetting(cfg.GetRateLimit())
	return ratelimit.Limits{Rate: r, Concurrency: int(cfg.GetMaxConcurrency())}
}

// admit applies the limits of cfg's server to one call; release ends an admitted call.
func (p *Pipeline) admit(cfg *mcpgatewayv1.ServerConfig) (release func(), err error) {
	l := ServerLimits(cfg)
	d := p.limits.Admit(cfg.GetId(), l)
	if !d.OK {
		return nil, &LimitError{Server: cfg.GetId(), Reason: d.Reason, Rate: l.Rate, Concurrency: l.Concurrency, RetryAfter: d.RetryAfter}
	}
	return d.Release, nil
}
