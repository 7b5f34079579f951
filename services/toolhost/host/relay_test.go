package host

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/internal/fixturebin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// startFixture registers mcpfixture (the tool host's own test server) as "fx".
func startFixture(t *testing.T, c toolhostv1.ToolHostServiceClient) {
	t.Helper()
	bin, cleanup, err := fixturebin.Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	if _, err := c.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: &toolhostv1.ServerSpec{Id: "fx", Command: bin, TimeoutMs: 30000}}); err != nil {
		t.Fatal(err)
	}
}

// TestCallStreamRelaysRequests: a request of the child during the only call in flight goes to
// that call's stream under a relay id, and Answer takes the client's answer back to the child.
func TestCallStreamRelaysRequests(t *testing.T) {
	c := startHost(t)
	startFixture(t, c)
	stream, err := c.CallStream(t.Context(), &toolhostv1.CallStreamRequest{Call: &toolhostv1.CallRequest{
		Id: "fx", Method: "tools/call", Params: json.RawMessage(`{"name":"ask","arguments":{"method":"sampling/createMessage"}}`),
		Relays: &toolhostv1.Relays{Sampling: true}}})
	if err != nil {
		t.Fatal(err)
	}
	item, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	req := item.GetRequest()
	if req == nil || req.GetMethod() != "sampling/createMessage" || len(req.GetRelayId()) != 32 || !strings.Contains(string(req.GetParams()), `"asked"`) {
		t.Fatalf("first item %v, want the child's sampling request", item)
	}
	if _, err := c.Answer(t.Context(), &toolhostv1.AnswerRequest{RelayId: req.GetRelayId(),
		Answer: &toolhostv1.AnswerRequest_Result{Result: []byte(`{"role":"assistant","content":{"type":"text","text":"answered"}}`)}}); err != nil {
		t.Fatal(err)
	}
	item, err = stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if res := string(item.GetAnswer().GetResult()); !strings.Contains(res, "answered") {
		t.Fatalf("answer %v", item)
	}
	// The relay id is spent: a second answer, and an unknown id, are NotFound.
	for _, id := range []string{req.GetRelayId(), "0123"} {
		_, err := c.Answer(t.Context(), &toolhostv1.AnswerRequest{RelayId: id, Answer: &toolhostv1.AnswerRequest_Result{Result: []byte(`{}`)}})
		if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "no request of a server waits for it") {
			t.Fatalf("answer to %q: %v, want NotFound", id, err)
		}
	}
	_, err = c.Answer(t.Context(), &toolhostv1.AnswerRequest{RelayId: "x"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("answer without result or error: %v", err)
	}
}

// TestRelayIDExpiresWithItsCall: once the call that caused a request ends, its relay id is
// unknown, and the unary Call relays nothing (the tool host answers the child).
func TestRelayIDExpiresWithItsCall(t *testing.T) {
	// The cancelled call stays in flight until the child answers it, or for the orphan window:
	// a child that honours notifications/cancelled never answers (MCP says it should not),
	// which CI once saw outlast 10 s of waiting on the 30 s default.
	h, c := startHostAnd(t, func(c *Config) { c.OrphanWindow = time.Second })
	startFixture(t, c)
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := c.CallStream(ctx, &toolhostv1.CallStreamRequest{Call: &toolhostv1.CallRequest{
		Id: "fx", Method: "tools/call", Params: json.RawMessage(`{"name":"ask","arguments":{"method":"elicitation/create"}}`),
		Relays: &toolhostv1.Relays{Elicitation: true}}})
	if err != nil {
		t.Fatal(err)
	}
	item, err := stream.Recv()
	if err != nil || item.GetRequest() == nil {
		t.Fatalf("%v %v", item, err)
	}
	cancel()
	deadlineNotFound := func() bool {
		_, err := c.Answer(t.Context(), &toolhostv1.AnswerRequest{RelayId: item.GetRequest().GetRelayId(), Answer: &toolhostv1.AnswerRequest_Result{Result: []byte(`{}`)}})
		return status.Code(err) == codes.NotFound
	}
	waitfor.True(t, 10*time.Second, "the relay forgotten", deadlineNotFound)
	// The child answers the cancelled call once its elicitation failed (or, having seen the
	// cancellation first, never: then the orphan window ends it); until then that call still
	// counts as in flight and a new request of the child could not be attributed.
	waitfor.True(t, 10*time.Second, "no orphaned call of fx", func() bool { return h.orphans(t, "fx") == 0 })
	r, err := call(t.Context(), c, "fx", "ask", map[string]any{"method": "elicitation/create"})
	if err != nil || !strings.Contains(text(r), "no client of the call in flight accepts elicitation/create") {
		t.Fatalf("unary call: %v %v", r, err)
	}
}

// orphans counts the calls to server id given up on that its child has not answered yet.
func (h *Host) orphans(t *testing.T, id string) int {
	t.Helper()
	srv, err := h.sup.Conn(id)
	if err != nil {
		t.Fatal(err)
	}
	return srv.Orphans()
}
