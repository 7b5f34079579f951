package federate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// Bridging a session-era stdio server's requests to a client of MCP 2026-07-28, which cannot
// be sent a request: the call's first request of the server for the client ends the client's
// request with an input_required result, while the call waits parked in the tool host; the
// client's retry, carrying inputResponses and the requestState Zest signed, may reach any
// replica, which resumes the call in the tool host with the answers.

// ParkWindow is how long a call waits for a modern client's retry after an input_required
// result (the tool host parks it that long; the requestState expires with it). The server's
// timeout_ms bounds the call further.
const ParkWindow = time.Minute

// relaysOfMeta reads the requests a modern client accepts from its request's _meta
// clientCapabilities.
func relaysOfMeta(params json.RawMessage) upstream.Relays {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(p.Meta[mcp.MetaKeyClientCapabilities], &caps)
	has := func(k string) bool { v := caps[k]; return len(v) > 0 && v[0] == '{' }
	return upstream.Relays{Sampling: has("sampling"), Elicitation: has("elicitation"), Roots: has("roots")}
}

// parks reports whether the call parks on a request of the server: a modern client's does
// (a stdio server's call in the tool host, where any replica resumes it; a session-era HTTP
// server's in this replica, whose transport holds the request: a retry elsewhere gets an
// error; a modern HTTP server sends no requests).
func (c *call) parks() bool { return c.modern }

// inputRequired renders a parked call's requests as an input_required result.
func (c *call) inputRequired(msg jsonrpc.Message, ir *upstream.InputRequiredError) []byte {
	st := session.InputState{Server: c.cfg.GetId(), Method: msg.Method, Call: ir.Call, Refs: map[string]string{},
		Expires: time.Now().Add(ParkWindow).Unix()}
	requests := map[string]any{}
	for i, r := range ir.Requests {
		key := fmt.Sprintf("zest-%d", i+1)
		st.Refs[key] = r.Ref
		q := map[string]any{"method": r.Method}
		if len(r.Params) > 0 && string(r.Params) != "null" {
			q["params"] = r.Params
		}
		requests[key] = q
	}
	res, err := json.Marshal(map[string]any{"resultType": mcp.ResultTypeInputRequired, "inputRequests": requests, "requestState": c.h.sessions.SignState(st)})
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, "Internal error: "+err.Error())
	}
	return jsonrpc.Result(msg.ID, res)
}

// resumeParked answers a modern client's retry that carries a requestState Zest issued (ok
// false: it carries none, and the request goes its ordinary way). A tools/call's retry is
// not one of these: it is the tool-call pipeline's (CallTool).
func (c *call) resumeParked(ctx context.Context, msg jsonrpc.Message, params json.RawMessage) ([]byte, bool) {
	var p struct {
		RequestState   *string         `json:"requestState"`
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil, false
	}
	// inputResponses, when present, is an object of results: anything else is a protocol
	// error, whatever the state (a session-era server would never see it).
	var responses map[string]json.RawMessage
	if len(p.InputResponses) > 0 {
		bad := json.Unmarshal(p.InputResponses, &responses) != nil || responses == nil
		for _, v := range responses {
			bad = bad || len(v) == 0 || v[0] != '{'
		}
		if bad {
			return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: inputResponses must be an object whose members are the client's results (objects), by the keys of inputRequests"), true
		}
	}
	if p.RequestState == nil || !strings.HasPrefix(*p.RequestState, session.StatePrefix) {
		return nil, false
	}
	st, err := c.h.sessions.OpenState(*p.RequestState, c.cfg.GetId(), msg.Method, time.Now())
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: "+err.Error()), true
	}
	var answers []upstream.ClientAnswer
	for key, ref := range st.Refs {
		a, ok := responses[key]
		if !ok {
			return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("Invalid params: inputResponses has no answer to input request %q; answer every request of the input_required result", key)), true
		}
		answers = append(answers, upstream.ClientAnswer{Ref: ref, Result: a})
	}
	res, err := c.h.up.Resume(ctx, c.cfg, msg.Method, st.Call, answers, c.hooks(params))
	if errors.Is(err, upstream.ErrRelayUnknown) {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: requestState names a call that no longer waits ("+err.Error()+"); send the request again without it"), true
	}
	return c.answer(ctx, msg, res, err), true
}
