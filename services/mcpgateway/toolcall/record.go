package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/zestmcp/zest/lib/tracing"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// What the chain records of every call, once, whatever link ended it: the log line (server,
// tool, duration, outcome; never the arguments or the result), the span, and the activity
// record, which feeds the audit trail and the metrics.

// running is a call between begin and end.
type running struct {
	ctx   context.Context
	began time.Time
	span  trace.Span
}

// spanName names a call's span: "execute_tool TOOL" for one the chat loop runs, else
// "tools/call TOOL" (OpenTelemetry's GenAI and MCP conventions).
func spanName(c *Call) string {
	name := c.ChatName
	if name == "" {
		name = c.Tool
	}
	if c.Entry == EntryChat {
		return "execute_tool " + name
	}
	return "tools/call " + name
}

func (p *Pipeline) begin(ctx context.Context, c *Call) running {
	ctx, span := tracing.Start(ctx, spanName(c))
	if span.IsRecording() { // attributes built only for a span that keeps them
		span.SetAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", c.Tool),
			attribute.String("zest.server.id", c.Server), attribute.String("zest.entry", string(c.Entry)))
		if c.CallID != "" {
			span.SetAttributes(attribute.String("gen_ai.tool.call.id", c.CallID))
		}
	}
	return running{ctx: ctx, began: time.Now(), span: span}
}

// endSpan ends a call's span with its outcome; every outcome but ok and input_required marks
// it failed.
func endSpan(span trace.Span, outcome string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("zest.outcome", outcome))
	if outcome != upstream.OutcomeOK && outcome != upstream.OutcomeInputRequired {
		tracing.Fail(span, "tool call "+outcome)
	}
	span.End()
}

// end records the call that began with r and ended with res, err.
func (p *Pipeline) end(r running, c *Call, res json.RawMessage, err error) {
	outcome := upstream.Outcome(res, err)
	d := time.Since(r.began)
	endSpan(r.span, outcome)
	// The line of the call: server, tool, duration_ms and outcome, never the arguments or the
	// result.
	p.log.InfoContext(r.ctx, "tool call", "server", c.Server, "tool", c.Tool, "duration_ms", d.Milliseconds(), "outcome", outcome)
	rec := activity.Call{Path: pathOf(c.Entry), Server: c.Server, Tool: c.Tool, ChatName: c.ChatName, Preset: c.Preset,
		Began: r.began, Outcome: activity.FromUpstream(outcome), Err: err, Params: c.Params, Result: res,
		Unlisted: !p.listed.has(p, c.Server, c.Tool)}
	var refused *ApprovalError
	if errors.As(err, &refused) {
		rec.Message = refused.Text
	}
	p.activity.Add(r.ctx, rec)
}

// pathOf is the activity's path of an entry point.
func pathOf(e Entry) string {
	switch e {
	case EntryAdmin:
		return activity.PathAdmin
	case EntryChat:
		return activity.PathChat
	}
	return activity.PathMCP
}

// listedNames remembers the tool names each server listed last, by the version of its list,
// so that the metrics name only tools a server has: a caller cannot grow their label sets
// with names of its own making.
type listedNames struct {
	mu      sync.Mutex
	servers map[string]listedSet
}

type listedSet struct {
	version uint64
	names   map[string]struct{}
}

// has reports whether tool is among the tools server listed last (a built-in tool, for the
// built-in provider).
func (l *listedNames) has(p *Pipeline, server, tool string) bool {
	if server == serverconfig.LemonadeProvider {
		return p.builtin != nil && p.builtin.IsBuiltin(tool)
	}
	if p.up == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.servers[server]
	tools, version, listed := p.up.Listed(server)
	if !listed {
		return false
	}
	if !ok || cur.version != version {
		cur = listedSet{version: version, names: make(map[string]struct{}, len(tools))}
		for _, t := range tools {
			var named struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(t, &named) == nil {
				cur.names[named.Name] = struct{}{}
			}
		}
		if l.servers == nil {
			l.servers = map[string]listedSet{}
		}
		l.servers[server] = cur
	}
	_, ok = cur.names[tool]
	return ok
}
