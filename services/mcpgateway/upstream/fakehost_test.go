package upstream

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpctest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fakeHost is an in-process tool host: its servers' tools are whatever the test sets, its
// Watch streams carry whatever the test sends, and tools/call answers by tool name.
type fakeHost struct {
	toolhostv1.UnimplementedToolHostServiceServer

	mu      sync.Mutex
	tools   map[string][]json.RawMessage
	started map[string]int
	stopped map[string]int
	lists   map[string]int
	lost    map[string]bool // servers the tool host "forgot" (as after a restart)
	watches int
	events  chan *toolhostv1.WatchResponse
	breakW  chan struct{} // a send ends the current Watch stream with an error
	// startGate, when set, holds EnsureStarted until it is closed.
	startGate chan struct{}
	// noteSeq is the notification_seq of the answers of the tool "logged"; answered counts
	// those answers.
	noteSeq  uint64
	answered int
}

func newFakeHost(t *testing.T) (*fakeHost, toolhostv1.ToolHostServiceClient) {
	t.Helper()
	f := &fakeHost{tools: map[string][]json.RawMessage{}, started: map[string]int{}, stopped: map[string]int{}, lists: map[string]int{}, lost: map[string]bool{},
		events: make(chan *toolhostv1.WatchResponse, 16), breakW: make(chan struct{})}
	cc := grpctest.Loopback(t, func(g *grpc.Server) { toolhostv1.RegisterToolHostServiceServer(g, f) })
	return f, toolhostv1.NewToolHostServiceClient(cc)
}

func tools(names ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(names))
	for i, n := range names {
		out[i] = json.RawMessage(`{"name":"` + n + `","inputSchema":{"type":"object"}}`)
	}
	return out
}

func (f *fakeHost) setTools(id string, t []json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tools[id] = t
}

// lose makes the tool host forget a server, as a restart of the tool host does.
func (f *fakeHost) lose(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost[id] = true
}

func (f *fakeHost) count(m map[string]int, id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return m[id]
}

func (f *fakeHost) watchCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watches
}

func (f *fakeHost) EnsureStarted(ctx context.Context, req *toolhostv1.EnsureStartedRequest) (*toolhostv1.EnsureStartedResponse, error) {
	f.mu.Lock()
	gate := f.startGate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started[req.GetSpec().GetId()]++
	delete(f.lost, req.GetSpec().GetId())
	return &toolhostv1.EnsureStartedResponse{Status: &toolhostv1.ServerStatus{Id: req.GetSpec().GetId(),
		State: toolhostv1.ServerState_SERVER_STATE_READY, ProtocolVersion: "2025-11-25"}}, nil
}

func (f *fakeHost) Stop(_ context.Context, req *toolhostv1.StopRequest) (*toolhostv1.StopResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped[req.GetId()]++
	return &toolhostv1.StopResponse{}, nil
}

func (f *fakeHost) ListTools(_ context.Context, req *toolhostv1.ListToolsRequest) (*toolhostv1.ListToolsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists[req.GetId()]++
	if f.lost[req.GetId()] {
		return nil, status.Errorf(codes.NotFound, "server %q is not known", req.GetId())
	}
	out := &toolhostv1.ListToolsResponse{}
	for _, t := range f.tools[req.GetId()] {
		out.Tools = append(out.Tools, t)
	}
	return out, nil
}

// Call answers tools/call by tool name: ok, is_error, rpc_error, unavailable, slow (never
// answers within the call's timeout), logged (a result after the notifications up to noteSeq).
func (f *fakeHost) Call(ctx context.Context, req *toolhostv1.CallRequest) (*toolhostv1.CallResponse, error) {
	f.mu.Lock()
	lost := f.lost[req.GetId()]
	f.mu.Unlock()
	if lost {
		return nil, status.Errorf(codes.NotFound, "server %q is not known", req.GetId())
	}
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(req.GetParams(), &p)
	switch p.Name {
	case "ok":
		return &toolhostv1.CallResponse{Answer: &toolhostv1.CallResponse_Result{Result: []byte(`{"content":[{"type":"text","text":"result-text-secret"}]}`)}}, nil
	case "is_error":
		return &toolhostv1.CallResponse{Answer: &toolhostv1.CallResponse_Result{Result: []byte(`{"content":[{"type":"text","text":"bad"}],"isError":true}`)}}, nil
	case "rpc_error":
		return &toolhostv1.CallResponse{Answer: &toolhostv1.CallResponse_Error{Error: &toolhostv1.JsonRpcError{Code: -32602, Message: "Unknown tool"}}}, nil
	case "logged":
		f.mu.Lock()
		defer f.mu.Unlock()
		f.answered++
		return &toolhostv1.CallResponse{Answer: &toolhostv1.CallResponse_Result{Result: []byte(`{"content":[{"type":"text","text":"logged"}]}`)},
			NotificationSeq: f.noteSeq}, nil
	case "slow":
		select {
		case <-time.After(time.Duration(req.GetTimeoutMs()) * time.Millisecond):
			return nil, status.Error(codes.DeadlineExceeded, "tools/call timed out")
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return nil, status.Error(codes.Unavailable, "the server crashed")
}

// Watch sends its headers (the watcher is registered), then the test's events, until the
// test breaks the stream.
func (f *fakeHost) Watch(_ *toolhostv1.WatchRequest, stream toolhostv1.ToolHostService_WatchServer) error {
	f.mu.Lock()
	f.watches++
	f.mu.Unlock()
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-f.breakW:
			return status.Error(codes.Unavailable, "watch broken by the test")
		case ev := <-f.events:
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

func stdioConfig(id string) *mcpgatewayv1.ServerConfig {
	return &mcpgatewayv1.ServerConfig{Id: id, Name: id, Transport: serverconfig.TransportStdio, Command: "fake", Enabled: proto.Bool(true), TimeoutMs: proto.Int32(5000)}
}
