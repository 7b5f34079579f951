package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/zestmcp/zest/lib/tracing"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Outcomes of a tool call, as its log line names them.
const (
	OutcomeOK       = "ok"        // a result
	OutcomeIsError  = "is_error"  // a result with isError: true
	OutcomeRPCError = "rpc_error" // a JSON-RPC error answered by the server
	OutcomeFailed   = "failed"    // no answer: the server could not be reached, started or understood
	OutcomeTimeout  = "timeout"   // no answer in time
	OutcomeCanceled = "canceled"  // the caller gave up before the answer
	// OutcomeInputRequired: the server asked the client something; the call waits, parked, for
	// the client's retry (a round of a client of MCP 2026-07-28), or the server's result was
	// input_required.
	OutcomeInputRequired = "input_required"
)

// CallTool calls tool on the server of cfg (tools/call with params, connecting first when
// needed) and logs one line at info with the call's context: server, tool, duration_ms and
// outcome — never the arguments or the result. Its callers (the admin API, the chat loop)
// have no MCP client: the server's sampling, elicitation and roots requests during the call
// are relayed to nobody (a stdio server gets no roots, or an error; an HTTP server -32601).
func (m *Manager) CallTool(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, tool string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	began := time.Now()
	raw, err := m.Call(ctx, cfg, "tools/call", params, timeout)
	LogToolCall(ctx, m.log, cfg.GetId(), tool, time.Since(began), Outcome(raw, err))
	return raw, err
}

// LogToolCall writes the line of one tool call (also used for the built-in tools the chat
// loop runs in process).
func LogToolCall(ctx context.Context, log *slog.Logger, server, tool string, d time.Duration, outcome string) {
	log.InfoContext(ctx, "tool call", "server", server, "tool", tool, "duration_ms", d.Milliseconds(), "outcome", outcome)
}

// StartToolCall starts the span of one tool call of tool on server (a no-op span when tracing
// is off): name is "tools/call TOOL" for a call a client sends, "execute_tool TOOL" for one
// the chat loop runs (OpenTelemetry's MCP and GenAI conventions). End it with EndToolCall.
func StartToolCall(ctx context.Context, name, server, tool string) (context.Context, trace.Span) {
	ctx, span := tracing.Start(ctx, name)
	if span.IsRecording() { // attributes built only for a span that keeps them
		span.SetAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", tool),
			attribute.String("zest.server.id", server))
	}
	return ctx, span
}

// EndToolCall ends a StartToolCall span with the call's outcome; every outcome but ok and
// input_required marks it failed.
func EndToolCall(span trace.Span, outcome string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("zest.outcome", outcome))
	if outcome != OutcomeOK && outcome != OutcomeInputRequired {
		tracing.Fail(span, "tool call "+outcome)
	}
	span.End()
}

// Outcome classifies the answer of a tools/call.
func Outcome(result json.RawMessage, err error) string {
	var rpcErr *RPCError
	var asked *InputRequiredError
	switch {
	case errors.As(err, &asked):
		return OutcomeInputRequired
	case err == nil && inputRequired(result):
		return OutcomeInputRequired
	case err == nil:
		// Most results say nothing of isError; only those that do are decoded.
		if bytes.Contains(result, []byte(`"isError"`)) {
			var r struct {
				IsError bool `json:"isError"`
			}
			if json.Unmarshal(result, &r) == nil && r.IsError {
				return OutcomeIsError
			}
		}
		return OutcomeOK
	case errors.As(err, &rpcErr):
		return OutcomeRPCError
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	}
	return OutcomeFailed
}

// inputRequired reports whether a result is input_required (MCP 2026-07-28).
func inputRequired(result json.RawMessage) bool {
	if !bytes.Contains(result, []byte(`"input_required"`)) {
		return false
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(result, &r) == nil && r.ResultType == "input_required"
}
