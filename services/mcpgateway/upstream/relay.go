package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/park"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Requests a server may send its client that Zest relays to the MCP client whose call caused
// them.
const (
	MethodSampling    = "sampling/createMessage"
	MethodElicitation = "elicitation/create"
	MethodRoots       = "roots/list"
)

// Relays are the requests of a server a caller's MCP client accepts, from the capabilities
// it declared.
type Relays struct{ Sampling, Elicitation, Roots bool }

// Any reports whether the client accepts at least one kind.
func (r Relays) Any() bool { return r.Sampling || r.Elicitation || r.Roots }

// Accepts reports whether the client accepts a request of method.
func (r Relays) Accepts(method string) bool {
	return method == MethodSampling && r.Sampling || method == MethodElicitation && r.Elicitation || method == MethodRoots && r.Roots
}

// Hooks are what a caller of Manager.CallWith takes from the server during one call.
type Hooks struct {
	// OnProgress receives the call's notifications/progress with the caller's own token (nil:
	// the caller asked for none).
	OnProgress func([]byte)
	// Relays are the kinds of requests of the server the caller's client accepts.
	Relays Relays
	// OnRequest receives a request of the server attributed to this call, for the caller's
	// client; it must not block. The client's answer goes back with Manager.Answer(req.Ref).
	OnRequest func(req ServerRequest)
	// Bridge is set by a caller whose MCP client is of the session era: a server of
	// 2026-07-28 is told the client's capabilities (Relays), and its input_required results
	// are fulfilled through OnRequest and the request retried (modern.go, callInputRounds).
	// Unset, such a result is returned as it is (a modern client answers it itself).
	Bridge bool
	// Park is set by a caller whose MCP client is of 2026-07-28, which cannot be sent a
	// request: a stdio server's request attributed to the call ends the call with an
	// *InputRequiredError, and the call waits in the tool host (parked) up to Park for
	// Manager.Resume with the client's answers. Zero: requests go to OnRequest.
	Park time.Duration
	// Ordered is set by a caller that relays the server's notifications (Manager's
	// OnNotification) to the same MCP client as the answer, on other streams (the GET streams
	// of /mcp/servers/{id} and /mcp/presets/{id}): a stdio server's answer waits, at most
	// NotificationWait, until this replica has passed on the notifications the server wrote
	// before it (order.go). Unset (the chat loop), the answer never waits.
	Ordered bool
}

// InputRequiredError ends a call made with Hooks.Park when the server asked the client
// something: the call waits (parked) for Manager.Resume with the answers.
type InputRequiredError struct {
	// Call names the parked call for Manager.Resume ("t:<call id>" in the tool host).
	Call string
	// Requests are the server's requests, each answered by its Ref.
	Requests []ServerRequest
}

func (e *InputRequiredError) Error() string {
	return fmt.Sprintf("the MCP server asked the client %d request(s); the call waits for the answers", len(e.Requests))
}

// ClientAnswer is a client's answer to one server request (ServerRequest.Ref).
type ClientAnswer struct {
	Ref    string
	Result json.RawMessage
	Err    *RPCError
}

// Resume goes on with a call that ended with *InputRequiredError: the client's answers reach
// the server, then the call is read as CallWith reads it (it may end with *InputRequiredError
// again). ErrRelayUnknown: the call no longer waits (answered, its park time passed, or the
// tool host restarted). method is the parked call's: a tools/call is refused (ErrBypass), as
// ResumeToolCall is the tool-call pipeline's.
func (m *Manager) Resume(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, method, call string, answers []ClientAnswer, hooks Hooks) (json.RawMessage, error) {
	if err := bypass(method); err != nil {
		return nil, err
	}
	return m.resume(ctx, cfg, call, answers, hooks)
}

// resume is Resume of any method.
func (m *Manager) resume(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, call string, answers []ClientAnswer, hooks Hooks) (json.RawMessage, error) {
	kind, id, _ := splitRef(call)
	if kind == "h" {
		return m.waiting.resumeParked(ctx, id, answers, hooks)
	}
	if kind != "t" {
		return nil, fmt.Errorf("%w: %q is not a parked call", ErrRelayUnknown, call)
	}
	s, _, err := m.ready(ctx, cfg, 0)
	if err != nil {
		return nil, err
	}
	st, ok := s.(*stdioSession)
	if !ok {
		return nil, fmt.Errorf("%w: MCP server %q is not a stdio server now", ErrRelayUnknown, cfg.GetId())
	}
	// The call waits on the tool host that parked it, wherever the server runs by now.
	name, id := splitToolHostRef(id)
	if st.host.Name != name {
		h, ok := m.hosts.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("%w: the call of MCP server %q waited on the tool host %q, which is gone", ErrRelayUnknown, cfg.GetId(), name)
		}
		st = &stdioSession{th: h.Client, host: h, hosts: m.hosts, relayed: &m.relayed, spec: st.spec, log: m.log}
	}
	req := &toolhostv1.ResumeRequest{CallId: id}
	for _, a := range answers {
		k, rest, _ := strings.Cut(a.Ref, ":")
		holder, relayID := splitToolHostRef(rest)
		if k != "t" || holder != name {
			return nil, fmt.Errorf("%w: %q is not a request of the tool host %q that holds the call", ErrRelayUnknown, a.Ref, name)
		}
		ar := &toolhostv1.AnswerRequest{RelayId: relayID}
		if a.Err != nil {
			ar.Answer = &toolhostv1.AnswerRequest_Error{Error: &toolhostv1.JsonRpcError{Code: int32(a.Err.Code), Message: a.Err.Message, Data: a.Err.Data}}
		} else {
			ar.Answer = &toolhostv1.AnswerRequest_Result{Result: a.Result}
		}
		req.Answers = append(req.Answers, ar)
	}
	return st.resume(ctx, req, hooks)
}

// ServerRequest is a request of a server for the client of one call.
type ServerRequest struct {
	// Ref names the request until it is answered: "t:<relay id>" for a stdio server (held
	// by the tool host, answerable from any replica), "h:<id>" for an HTTP server (held by
	// this replica, whose call waits for it).
	Ref    string
	Method string
	Params json.RawMessage
}

// Answer delivers a client's answer (a result, or a JSON-RPC error) to the server request
// named by ref. ErrRelayUnknown: nothing waits for it (answered already, its call ended, or,
// for an HTTP server, it waits on another mcpgateway replica).
func (m *Manager) Answer(ctx context.Context, ref string, result json.RawMessage, rpcErr *RPCError) error {
	kind, id, _ := strings.Cut(ref, ":")
	switch kind {
	case "t":
		name, relay := splitToolHostRef(id)
		h, ok := m.hosts.Lookup(name)
		if !ok {
			return fmt.Errorf("%w: the tool host %q that holds the request is gone (its call failed with it)", ErrRelayUnknown, name)
		}
		req := &toolhostv1.AnswerRequest{RelayId: relay}
		if rpcErr != nil {
			req.Answer = &toolhostv1.AnswerRequest_Error{Error: &toolhostv1.JsonRpcError{Code: int32(rpcErr.Code), Message: rpcErr.Message, Data: rpcErr.Data}}
		} else {
			req.Answer = &toolhostv1.AnswerRequest_Result{Result: result}
		}
		_, err := h.Client.Answer(ctx, req)
		if status.Code(err) == codes.NotFound {
			return fmt.Errorf("%w: it was answered already, or the call that caused it ended", ErrRelayUnknown)
		}
		return err
	case "h":
		return m.waiting.deliver(id, relayAnswer{result: result, err: rpcErr})
	}
	return fmt.Errorf("%w: %q is not a relay reference", ErrRelayUnknown, ref)
}

// relayAnswer is a client's answer to an HTTP server's request.
type relayAnswer struct {
	result json.RawMessage
	err    *RPCError
}

// waiters are the HTTP servers' requests waiting in this replica for their client's answer.
type waiters struct {
	mu sync.Mutex
	m  map[string]chan relayAnswer
	// parked are the HTTP servers' calls parked for modern clients (park.go).
	parked *park.Calls[parkedItem]
}

func newWaiters() *waiters { return &waiters{parked: park.New(parkedItem.kind)} }

func (w *waiters) add() (string, chan relayAnswer) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	ch := make(chan relayAnswer, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string]chan relayAnswer{}
	}
	w.m[id] = ch
	w.mu.Unlock()
	return id, ch
}

func (w *waiters) remove(id string) {
	w.mu.Lock()
	delete(w.m, id)
	w.mu.Unlock()
}

func (w *waiters) deliver(id string, a relayAnswer) error {
	w.mu.Lock()
	ch := w.m[id]
	delete(w.m, id)
	w.mu.Unlock()
	if ch == nil {
		return fmt.Errorf("%w on this mcpgateway replica: an HTTP server's request waits on the replica that runs the call that caused it (send the answer there), or it was answered already, or that call ended", ErrRelayUnknown)
	}
	ch <- a
	return nil
}

// httpRelayKey carries the hooks of a call in the context of its request to an HTTP server:
// mcp-go hands the server's requests read from that request's SSE stream a context derived
// from it (requests on the GET stream get none: they belong to no call).
type httpRelayKey struct{}

type httpRelay struct {
	hooks   Hooks
	waiting *waiters
}

// clientCapabilities are declared to HTTP servers: their requests are relayed to the client
// of the call that caused them, when it accepts them.
func clientCapabilities() mcp.ClientCapabilities {
	var c mcp.ClientCapabilities
	c.Sampling = &mcp.SamplingCapability{}
	c.Elicitation = &mcp.ElicitationCapability{}
	c.Roots = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{}
	return c
}

// answerServerRequest answers the requests an HTTP server sends its client. ping gets an
// empty result. A request read from the SSE stream of a call made for an MCP client
// (CallWith with OnRequest) belongs to that call: when the client accepts its kind it is
// relayed and waits for the client's answer (bounded by the call, and by mcp-go's 30 s for
// one server request); otherwise roots/list gets no roots, and sampling and elicitation an
// error that says why. Every other request — on the GET stream, or during a request of Zest's
// own (connecting, the admin API, the chat loop), where no MCP client could answer — gets
// -32601, as before relays existed (Lemonade's smoke mock checks exactly that). Errors are
// responses, not Go errors, which mcp-go would answer with -32603 and a text of its own.
func answerServerRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if req.Method == string(mcp.MethodPing) {
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`)), nil
	}
	rl, _ := ctx.Value(httpRelayKey{}).(*httpRelay)
	if rl == nil || req.Method != MethodSampling && req.Method != MethodElicitation && req.Method != MethodRoots {
		msg := "Method not found"
		if rl == nil && (req.Method == MethodSampling || req.Method == MethodElicitation || req.Method == MethodRoots) {
			msg = "Method not found: Zest relays " + req.Method + " only to the MCP client of the call that caused it, on that call's response stream; this one came on the GET stream or during a request of Zest's own"
		}
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, msg, map[string]string{"method": req.Method}), nil
	}
	if !rl.hooks.Relays.Accepts(req.Method) {
		if req.Method == MethodRoots {
			return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{"roots":[]}`)), nil
		}
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR,
			"Internal error: the MCP client of the call that caused this request does not accept "+req.Method+" (it did not declare the capability)", nil), nil
	}
	params, _ := json.Marshal(req.Params)
	id, ch := rl.waiting.add()
	defer rl.waiting.remove(id)
	rl.hooks.OnRequest(ServerRequest{Ref: "h:" + id, Method: req.Method, Params: params})
	select {
	case a := <-ch:
		if a.err != nil {
			var data any
			if len(a.err.Data) > 0 {
				data = json.RawMessage(a.err.Data)
			}
			return transport.NewJSONRPCErrorResponse(req.ID, a.err.Code, a.err.Message, data), nil
		}
		return transport.NewJSONRPCResultResponse(req.ID, a.result), nil
	case <-ctx.Done():
		why := "the call that caused this request ended before its client answered"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = "its client did not answer in time"
		}
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, "Internal error: "+why, nil), nil
	}
}

// CallWith sends one request to the server of cfg as Call does, with the hooks of a caller
// that wants the call's progress (hooks.OnProgress) or relays the server's requests to its MCP
// client (hooks.Relays, hooks.OnRequest).
func (m *Manager) CallWith(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, method string, params json.RawMessage, timeout time.Duration, hooks Hooks) (json.RawMessage, error) {
	if err := bypass(method); err != nil {
		return nil, err
	}
	res, err := m.onSession(ctx, cfg, timeout, func(s session, timeout time.Duration) (json.RawMessage, error) {
		return s.callWith(ctx, method, params, timeout, hooks)
	})
	return m.admitPage(ctx, cfg, method, res, err)
}

// splitRef splits a ref into its kind ("t": the tool host's, "h": this replica's) and id.
func splitRef(ref string) (kind, id string, ok bool) { return strings.Cut(ref, ":") }
