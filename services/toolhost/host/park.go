package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/stdio"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Parked calls: a caller whose MCP client cannot hold a stream open while it answers (MCP
// 2026-07-28, where the answer comes in a new request, to any mcpgateway replica) asks for
// CallRequest.park_ms. The call then runs apart from its stream: when the child asks the
// client something, the stream ends after that ServerRequest, and the call waits, parked, for
// Resume with the answer; Resume streams the rest of the call. A call whose park passes, or
// whose caller went away with nothing asked, is cancelled as any call whose caller left.

// MaxPark bounds CallRequest.park_ms: a longer park is cut to it. The call's own timeout
// bounds it further.
const MaxPark = 10 * time.Minute

// parkTable holds the calls run apart from their streams, by call id.
type parkTable struct {
	mu sync.Mutex
	m  map[string]*parkedCall
}

// parkedCall is one call run apart from its stream: what it produced and nobody has read yet.
type parkedCall struct {
	id     string
	park   time.Duration
	cancel context.CancelFunc
	ids    *callRelays

	mu       sync.Mutex
	queue    []*toolhostv1.CallStreamResponse
	done     bool  // the answer (or failure) is queued last
	failure  error // the call failed with this gRPC status instead of an answer
	wake     chan struct{}
	attached bool
	timer    *time.Timer
}

func (t *parkTable) add(c *parkedCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*parkedCall{}
	}
	t.m[c.id] = c
}

func (t *parkTable) get(id string) *parkedCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

func (t *parkTable) remove(c *parkedCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[c.id] == c {
		delete(t.m, c.id)
	}
}

// Parked counts the calls run apart from their streams (attached or parked).
func (h *Host) Parked() int {
	h.parked.mu.Lock()
	defer h.parked.mu.Unlock()
	return len(h.parked.m)
}

func (c *parkedCall) push(item *toolhostv1.CallStreamResponse) {
	c.mu.Lock()
	c.queue = append(c.queue, item)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *parkedCall) finish(answer *toolhostv1.CallResponse, err error) {
	c.mu.Lock()
	c.done, c.failure = true, err
	if err == nil {
		c.queue = append(c.queue, &toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Answer{Answer: answer}})
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// callParkable runs a CallStream with park_ms apart from its stream.
func (h *Host) callParkable(req *toolhostv1.CallStreamRequest, stream toolhostv1.ToolHostService_CallStreamServer) error {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	park := min(time.Duration(req.GetCall().GetParkMs())*time.Millisecond, MaxPark)
	ctx, cancel := context.WithCancel(context.WithoutCancel(stream.Context()))
	c := &parkedCall{id: hex.EncodeToString(b), park: park, cancel: cancel, ids: h.relays.forCall(), wake: make(chan struct{}, 1), attached: true}
	rl := req.GetCall().GetRelays()
	hooks := stdio.Hooks{
		OnProgress: func(n []byte) {
			c.push(&toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Notification{Notification: n}})
		},
		Accepts: func(method string) bool {
			return method == stdio.MethodSampling && rl.GetSampling() || method == stdio.MethodElicitation && rl.GetElicitation() ||
				method == stdio.MethodRoots && rl.GetRoots()
		},
		OnRequest: func(method string, params json.RawMessage, reply stdio.Reply) {
			id := c.ids.add(reply)
			c.push(&toolhostv1.CallStreamResponse{Kind: &toolhostv1.CallStreamResponse_Request{Request: &toolhostv1.ServerRequest{
				RelayId: id, Method: method, Params: params, CallId: c.id}}})
		},
	}
	h.parked.add(c)
	go func() {
		defer cancel()
		answer, err := h.call(ctx, req.GetCall(), hooks)
		c.ids.end() // the child's requests still waiting were answered by stdio with an error
		c.finish(answer, err)
	}()
	return h.serveParkable(stream.Context(), stream.Send, c)
}

// serveParkable streams what the call produces until its answer, or until a request of the
// child for the client, after which the call is parked. A caller that goes away with nothing
// asked cancels the call.
func (h *Host) serveParkable(ctx context.Context, send func(*toolhostv1.CallStreamResponse) error, c *parkedCall) error {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 && c.done {
			c.mu.Unlock()
			h.parked.remove(c)
			return c.failure
		}
		var item *toolhostv1.CallStreamResponse
		if len(c.queue) > 0 {
			item = c.queue[0]
			c.queue = c.queue[1:]
		}
		c.mu.Unlock()
		if item == nil {
			select {
			case <-c.wake:
			case <-ctx.Done():
				h.leave(c, false)
				return status.FromContextError(ctx.Err()).Err()
			}
			continue
		}
		if item.GetRequest() != nil {
			// Parked before the caller can see the request: its retry may come at once. A
			// send that fails leaves the call parked until its park passes.
			h.leave(c, true)
			return send(item)
		}
		if err := send(item); err != nil {
			h.leave(c, false)
			return err
		}
		if item.GetAnswer() != nil {
			h.parked.remove(c)
			return nil
		}
	}
}

// leave detaches the call from its stream: parked (asked) for its park time, after which it
// is cancelled; cancelled at once when its caller went away with nothing asked.
func (h *Host) leave(c *parkedCall, asked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attached = false
	if !asked || c.park <= 0 {
		c.cancel()
		h.parked.remove(c)
		return
	}
	c.timer = time.AfterFunc(c.park, func() {
		c.mu.Lock()
		attached := c.attached
		c.mu.Unlock()
		if !attached {
			c.cancel()
			h.parked.remove(c)
		}
	})
}

// Resume implements ToolHostService: the client's answers go to the parked call's waiting
// requests, then the rest of the call is streamed as CallStream streams it.
func (h *Host) Resume(req *toolhostv1.ResumeRequest, stream toolhostv1.ToolHostService_ResumeServer) error {
	c := h.parked.get(req.GetCallId())
	if c == nil {
		return status.Error(codes.NotFound, fmt.Sprintf("call_id %q: no parked call (it ended, its park time passed, or it was parked by another tool host)", req.GetCallId()))
	}
	c.mu.Lock()
	if c.attached {
		c.mu.Unlock()
		return status.Error(codes.FailedPrecondition, fmt.Sprintf("call_id %q was resumed already", req.GetCallId()))
	}
	c.attached = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	for _, a := range req.GetAnswers() {
		if _, err := h.Answer(stream.Context(), a); err != nil && status.Code(err) != codes.NotFound {
			h.leave(c, true)
			return err
		}
	}
	return h.serveParkable(stream.Context(), func(r *toolhostv1.CallStreamResponse) error {
		return stream.Send(&toolhostv1.ResumeResponse{Item: r})
	}, c)
}
