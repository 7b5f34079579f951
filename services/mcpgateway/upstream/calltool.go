package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
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

// ErrBypass refuses a tools/call sent through a generic call (Call, CallWith, CallProgress,
// Resume): a tool call reaches a server only through the tool-call pipeline (package toolcall),
// whose dispatch is DispatchToolCall, so that no path skips a server's policy.
var ErrBypass = errors.New("tools/call goes through the tool-call pipeline (package toolcall): a generic call refuses it")

// bypass refuses method when it is tools/call.
func bypass(method string) error {
	if method == "tools/call" {
		return ErrBypass
	}
	return nil
}

// DispatchToolCall sends tools/call with params to the server of cfg, connecting first when
// needed, with the hooks of a caller that relays the call's progress or the server's requests
// (zero hooks: none, a unary call). It is the tool-call pipeline's dispatch (package toolcall),
// which has applied the server's filters, approval and limits, and caps the output after it:
// nothing else calls it.
func (m *Manager) DispatchToolCall(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, params json.RawMessage, timeout time.Duration, hooks Hooks) (json.RawMessage, error) {
	return m.onSession(ctx, cfg, timeout, func(s session, timeout time.Duration) (json.RawMessage, error) {
		return s.callWith(ctx, "tools/call", params, timeout, hooks)
	})
}

// ResumeToolCall goes on with a tools/call parked for a modern client's answers, as Resume
// does for other methods: the tool-call pipeline's dispatch of a retry.
func (m *Manager) ResumeToolCall(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, call string, answers []ClientAnswer, hooks Hooks) (json.RawMessage, error) {
	return m.resume(ctx, cfg, call, answers, hooks)
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
