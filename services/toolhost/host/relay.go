package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/stdio"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// relayTable holds the children's requests relayed to callers and not yet answered, by relay
// id: random, so that an id is never reused, not even across restarts of the tool host.
type relayTable struct {
	mu      sync.Mutex
	waiting map[string]stdio.Reply
}

// callRelays are the relay ids of one CallStream, forgotten when it ends (the child's
// requests still waiting are then answered by stdio with an error).
type callRelays struct {
	t   *relayTable
	mu  sync.Mutex
	ids []string
}

func (t *relayTable) forCall() *callRelays { return &callRelays{t: t} }

// add registers reply under a new relay id.
func (c *callRelays) add(reply stdio.Reply) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	id := hex.EncodeToString(b)
	c.t.mu.Lock()
	c.t.waiting[id] = reply
	c.t.mu.Unlock()
	c.mu.Lock()
	c.ids = append(c.ids, id)
	c.mu.Unlock()
	return id
}

func (c *callRelays) end() {
	c.mu.Lock()
	ids := c.ids
	c.mu.Unlock()
	c.t.mu.Lock()
	for _, id := range ids {
		delete(c.t.waiting, id)
	}
	c.t.mu.Unlock()
}

// take removes and returns the reply of id (nil when unknown).
func (t *relayTable) take(id string) stdio.Reply {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.waiting[id]
	delete(t.waiting, id)
	return r
}

// Answer implements ToolHostService: the client's answer to a relayed request goes to the
// child with the child's own id.
func (h *Host) Answer(_ context.Context, req *toolhostv1.AnswerRequest) (*toolhostv1.AnswerResponse, error) {
	var result json.RawMessage
	var rpcErr *stdio.RPCError
	switch a := req.GetAnswer().(type) {
	case *toolhostv1.AnswerRequest_Result:
		if !json.Valid(a.Result) {
			return nil, status.Error(codes.InvalidArgument, "result must be JSON text (the client's JSON-RPC result)")
		}
		result = a.Result
	case *toolhostv1.AnswerRequest_Error:
		rpcErr = &stdio.RPCError{Code: int(a.Error.GetCode()), Message: a.Error.GetMessage()}
		if d := a.Error.GetData(); len(d) > 0 && json.Valid(d) {
			rpcErr.Data = d
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "answer is required: set result or error")
	}
	reply := h.relays.take(req.GetRelayId())
	if reply == nil || !reply(result, rpcErr) {
		return nil, status.Error(codes.NotFound, fmt.Sprintf("relay id %q: no request of a server waits for it (answered already, or the call that caused it ended)", req.GetRelayId()))
	}
	return &toolhostv1.AnswerResponse{}, nil
}
