package toolcall

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/zestmcp/zest/lib/ratelimit"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// The refusals of the chain. Each entry point words them for its caller in one place (its
// errors.go or its rendering of an answer); the texts here are for people and models alike.

// UnknownServerError means the call names no server its caller may reach through its entry point:
// not registered, disabled, or hidden (expose false) from a caller without the admin key. The
// three read alike. It is a registry.ErrNotFound for errors.Is.
type UnknownServerError struct{ ID string }

func (e *UnknownServerError) Error() string {
	return fmt.Sprintf("MCP server %q is not registered", e.ID)
}

// Unwrap makes it a registry.ErrNotFound.
func (e *UnknownServerError) Unwrap() error { return registry.ErrNotFound }

// LimitError is a call refused by its server's limits. As a *upstream.RPCError (errors.As) it
// is the JSON-RPC error an MCP client gets (ratelimit.JSONRPCCode, data.retry_after_ms); the
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

// As makes a LimitError a *upstream.RPCError for errors.As: every MCP path that passes a
// server's JSON-RPC errors on passes this one on too.
func (e *LimitError) As(target any) bool {
	p, ok := target.(**upstream.RPCError)
	if ok {
		data, _ := json.Marshal(map[string]any{"retry_after_ms": max(1, e.RetryAfter.Milliseconds()), "reason": e.Reason, "server": e.Server})
		*p = &upstream.RPCError{Code: ratelimit.JSONRPCCode, Message: e.Error(), Data: data}
	}
	return ok
}

// ApprovalError is a call that needs approval and was not run: its State says why
// (registry.ApprovalDenied, ApprovalExpired, ApprovalWithdrawn, or one of this package's
// Approval* states), Text says so to the caller, and Approval names the approval when one
// was opened.
type ApprovalError struct {
	State    string
	Approval string
	Text     string
}

func (e *ApprovalError) Error() string { return e.Text }

// Approval states of an ApprovalError beside the registry's decisions.
const (
	// ApprovalUnavailable: this mcpgateway holds no approvals.
	ApprovalUnavailable = "unavailable"
	// ApprovalTooMany: approval.MaxPending calls already wait.
	ApprovalTooMany = "too_many"
	// ApprovalNoClient: the server lets the client decide (approval_by client) and this
	// client cannot be asked (no elicitation).
	ApprovalNoClient = "no_elicitation"
	// ApprovalMismatch: a retry carries an approval that was given for another call (another
	// server, tool or arguments).
	ApprovalMismatch = "mismatch"
	// ApprovalNotAsked: a retry answers an approval that no longer waits, or one an
	// administrator decides (approval_by admin).
	ApprovalNotAsked = "not_asked"
)
