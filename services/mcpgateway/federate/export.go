package federate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What other endpoints of the same transport reuse of this one: the preset endpoint
// (package aggregate) sends each request to the one provider that owns it exactly as
// /mcp/servers/{id} sends it to its server, with the same progress relay, cancellation,
// timeouts and hiding of failures.

// Output is what one exchange sends, in order (see output).
type Output = output

// NewOutput returns the output of one exchange.
func NewOutput(stream mcphttp.ExchangeStream) *Output { return &output{stream: stream} }

// Note sends one notification before the answer (and drops it after).
func (o *output) Note(msg []byte) { o.note(msg) }

// Final sends the answer.
func (o *output) Final(msg []byte) error { return o.final(msg) }

// Malformed sends the answer to a message that could not be accepted (HTTP 400).
func (o *output) Malformed(msg []byte) error { return o.malformed(msg) }

// End sends what mcpserve.Batch returned: nothing, the answer, or the answer to a batch that
// could not be accepted; or it returns Batch's error.
func (o *output) End(final []byte, malformed bool, err error) error {
	switch {
	case err != nil || final == nil:
		return err
	case malformed:
		return o.malformed(final)
	}
	return o.final(final)
}

// Message sends one message before the answer (a subscriptions/listen's notifications).
func (o *output) Message(msg []byte) error { return o.message(msg) }

// Modern sends the answer to a request of 2026-07-28 (its status: mcpera.Status).
func (o *output) Modern(msg []byte) error { return o.modern(msg) }

// Err is the error of a send that failed (the client went away).
func (o *output) Err() error { return o.err() }

// StartSession answers an initialize request (payload, its id) with result: it issues a
// session id for version bound to binding (the session's Claims.Server), with the server
// requests the client accepts (its capabilities: Claims.Relays), sends it, then the result.
func (h *Handler) StartSession(out *Output, payload, id json.RawMessage, version, binding string, result any) error {
	b, err := json.Marshal(result)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	sid, err := h.sessions.IssueWith(version, binding, relaysOf(payload))
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if err := out.session(sid, version); err != nil {
		return err
	}
	return out.final(jsonrpc.Result(id, b))
}

// Forward sends one request (msg, with params as given) of session sessionID to cfg's server
// and renders its answer with the client's id (nil when the client cancelled it). It is the
// one way another endpoint reaches a server for a client's request, with forward's per-call
// hooks: progress, and the server's own requests relayed to the client on out.
func (h *Handler) Forward(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, sessionID string, cl session.Claims, out *Output, msg jsonrpc.Message, params json.RawMessage) []byte {
	c := &call{h: h, cfg: cfg, sessionID: sessionID, claims: cl, out: out}
	res, err := c.forward(ctx, msg, params)
	return c.answer(ctx, msg, res, err)
}

// ForwardModern is Forward for a request of MCP 2026-07-28 (no session), whose params as the
// client sent them (clientParams) carry the client's capabilities in _meta: a session-era
// server's requests the client accepts park the call and end the request with an
// input_required result whose requestState names cfg's server, as on /mcp/servers/{id}
// (bridge.go); a modern server's input_required result reaches the client as it is.
func (h *Handler) ForwardModern(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, out *Output, msg jsonrpc.Message, params, clientParams json.RawMessage) []byte {
	c := &call{h: h, cfg: cfg, out: out, modern: true, modernRelays: relaysOfMeta(clientParams)}
	res, err := c.forward(ctx, msg, params)
	return c.answer(ctx, msg, res, err)
}

// ResumeModern answers a modern client's retry (params as the client sent them) that carries
// a requestState Zest issued for a call of cfg's server (a session-era one) parked on it: the
// call resumes, from any replica, as on /mcp/servers/{id}. A state issued for another server
// or method is refused. A tools/call's retry goes through CallTool instead. ok is false when the request carries no requestState of Zest's: it
// goes its ordinary way.
func (h *Handler) ResumeModern(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, out *Output, msg jsonrpc.Message, params json.RawMessage) ([]byte, bool) {
	c := &call{h: h, cfg: cfg, out: out, modern: true, modernRelays: relaysOfMeta(params)}
	return c.resumeParked(ctx, msg, params)
}

// Cancel acts on a notifications/cancelled of session sessionID: the forwarded request it
// names is cancelled.
func (h *Handler) Cancel(sessionID string, payload []byte) {
	(&call{h: h, sessionID: sessionID}).cancelled(payload)
}

// Track makes a notifications/cancelled of session sessionID that names request id cancel a
// call another endpoint runs itself (the built-in tools of a preset) with a cause that
// Cancelled recognizes; call the function it returns when the call ends.
func (h *Handler) Track(sessionID string, id json.RawMessage, cancel context.CancelCauseFunc) (done func()) {
	key, entry := sessionID+"\n"+string(id), &inflight{cancel: cancel}
	h.inflight.Store(key, entry)
	return func() { h.inflight.CompareAndDelete(key, entry) }
}

// Cancelled reports whether cause is that of a call the client cancelled.
func Cancelled(cause error) bool { return errors.Is(cause, errCancelled) }

// AnswerRelay takes a client's response POSTed to a session whose requests go to several
// servers (a preset's): the answer to a relayed request goes to the server among cfgs whose
// signed relay id it carries, as on /mcp/servers/{id}; a response to anything else is
// accepted and dropped (nil, HTTP 202).
func (h *Handler) AnswerRelay(ctx context.Context, cfgs []*mcpgatewayv1.ServerConfig, sessionID string, cl session.Claims, payload []byte, msg jsonrpc.Message) []byte {
	var id string
	if json.Unmarshal(msg.ID, &id) != nil || !strings.HasPrefix(id, session.RelayPrefix) {
		return nil
	}
	for _, cfg := range cfgs {
		if _, err := h.sessions.OpenRelay(id, sessionID, cfg.GetId()); err == nil {
			return (&call{h: h, cfg: cfg, sessionID: sessionID, claims: cl}).clientAnswer(ctx, payload, msg)
		}
	}
	return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, "Invalid Request: this response answers no request sent to this session (its id was not issued for it)")
}

// SetLevel answers logging/setLevel of session sessionID (the level is kept in the registry).
func (h *Handler) SetLevel(ctx context.Context, sessionID string, cl session.Claims, id, params json.RawMessage) []byte {
	return (&call{h: h, sessionID: sessionID, claims: cl}).setLevel(ctx, id, params)
}

// Failure is what a caller reads of a server's failure (the cause for an administrator, else
// an incident id).
func (h *Handler) Failure(ctx context.Context, serverID, what string, err error) string {
	return h.failure(ctx, serverID, what, err)
}

// Declares reports whether a server's capabilities allow method.
func Declares(caps map[string]any, method string) bool { return declares(caps, method) }

// Relayed reports whether a server's notification of method reaches the GET streams of the
// sessions that use the server.
func Relayed(method string) bool { return relayed[method] }
