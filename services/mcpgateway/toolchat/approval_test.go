package toolchat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/waitfor"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// chatEvents runs one chat calling fn and hands each tool event to onEvent; it returns the
// outcome, or nil when the stream ended with an error (ctx cancelled).
func chatEvents(t *testing.T, ctx context.Context, l *Loop, fn string, onEvent func(*mcpgatewayv1.ToolEvent)) *mcpgatewayv1.ChatDone {
	t.Helper()
	cc := grpctest.Loopback(t, func(s *grpc.Server) { mcpgatewayv1.RegisterChatServiceServer(s, l) })
	choice, _ := structpb.NewValue(map[string]any{"type": "function", "function": map[string]any{"name": fn}})
	st, err := mcpgatewayv1.NewChatServiceClient(cc).Chat(ctx, &mcpgatewayv1.ChatRequest{
		Providers: &mcpgatewayv1.Providers{Ids: []string{"every"}},
		Chat: &inferencev1.ChatRequest{Model: "m", ToolChoice: choice,
			Messages: []*inferencev1.ChatMessage{{Role: "user", Content: "go"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			t.Fatal("the chat ended without done")
		}
		if err != nil {
			return nil
		}
		if ev := r.GetEvent(); ev != nil {
			onEvent(ev)
		}
		if d := r.GetDone(); d != nil {
			return d
		}
	}
}

// twoCalls asks for two tools in one round (each with {"text":"x"}), then says what the
// tools returned.
type twoCalls struct {
	inferencev1.UnimplementedInferenceServiceServer
	names [2]string
}

func (m *twoCalls) Chat(req *inferencev1.ChatRequest, s grpc.ServerStreamingServer[inferencev1.ChatResponse]) error {
	msgs := req.GetMessages()
	if msgs[len(msgs)-1].GetRole() == "tool" {
		var said []string
		for _, x := range msgs {
			if x.GetRole() == "tool" {
				said = append(said, unwrapped(x.GetContent()))
			}
		}
		return s.Send(&inferencev1.ChatResponse{Id: "c", Model: "m", FinishReason: "stop",
			Delta: &inferencev1.ChatMessage{Role: "assistant", Content: strings.Join(said, " | ")}})
	}
	var calls []*inferencev1.ToolCall
	for i, n := range m.names {
		calls = append(calls, &inferencev1.ToolCall{Index: int32(i), Id: fmt.Sprintf("call_%d", i), Type: "function", Function: &inferencev1.FunctionCall{Name: n, Arguments: `{"text":"x"}`}})
	}
	return s.Send(&inferencev1.ChatResponse{Id: "c", Model: "m", FinishReason: "tool_calls", Delta: &inferencev1.ChatMessage{Role: "assistant", ToolCalls: calls}})
}

// TestApprovalHoldsOnlyItsCall: of two calls in one round, the one that waits for approval
// does not hold the other: the other has run on its server before the decision.
func TestApprovalHoldsOnlyItsCall(t *testing.T) {
	u, reg, up := upstreamFixture(t, mcptest.Options{Tools: []string{"get-sum", "rm"}})
	if err := reg.PutServer(t.Context(), &mcpgatewayv1.ServerConfig{Id: "every", Name: "every", Transport: "streamable-http", Url: u.URL,
		Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(30000), ApprovalTools: []string{"rm"}}); err != nil {
		t.Fatal(err)
	}
	model := &twoCalls{names: [2]string{"mcp_every__rm", "mcp_every__get-sum"}}
	inference := inferencev1.NewInferenceServiceClient(grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterInferenceServiceServer(s, model) }))
	gate := approval.New(reg, time.Minute, nil)
	l := newLoop(inference, reg, up, gate)
	d := chatEvents(t, t.Context(), l, "", func(ev *mcpgatewayv1.ToolEvent) {
		if ev.GetType() != "approval_required" {
			return
		}
		if _, err := waitfor.Poll(5*time.Second, func() error {
			if got := strings.Join(u.ToolCalls(), ","); got != "get-sum" {
				return fmt.Errorf("while rm waits, the server ran %q; want get-sum", got)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		if _, err := gate.Decide(t.Context(), ev.GetApprovalId(), true, ""); err != nil {
			t.Error(err)
		}
	})
	if got := d.GetMessage().GetContent(); got != "rm:x | get-sum:x" {
		t.Fatalf("the model read %q", got)
	}
}

// TestApprovalPausesTheCall: a tool of a server whose approval is required runs only once
// approved; denied, expired or withdrawn it is not run, and the model is told why.
func TestApprovalPausesTheCall(t *testing.T) {
	u, reg, up := upstreamFixture(t, mcptest.Options{Tools: []string{"get-sum", "rm"}})
	// rm needs approval (approval_tools); get-sum does not.
	cfg := &mcpgatewayv1.ServerConfig{Id: "every", Name: "every", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(30000),
		ApprovalTools: []string{"r?"}}
	if err := reg.PutServer(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	inference := inferencev1.NewInferenceServiceClient(grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterInferenceServiceServer(s, &fakeModel{}) }))
	gate := approval.New(reg, time.Minute, nil)
	l := newLoop(inference, reg, up, gate)

	// decide answers the approval_required event with approve or deny, and checks the event.
	decide := func(approve bool, reason string) func(*mcpgatewayv1.ToolEvent) {
		return func(ev *mcpgatewayv1.ToolEvent) {
			if ev.GetType() != "approval_required" {
				return
			}
			if ev.GetApprovalId() == "" || ev.GetCall().GetName() != "mcp_every__rm" || ev.GetCall().GetArguments() != `{"text":"x"}` ||
				!strings.Contains(ev.GetMessage(), "/internal/mcp/approvals/"+ev.GetApprovalId()+"/approve") {
				t.Errorf("event %v", ev)
			}
			if p, _ := gate.Pending(t.Context()); len(p) != 1 || p[0].GetId() != ev.GetApprovalId() || p[0].GetTool() != "rm" {
				t.Errorf("pending %v", p)
			}
			if _, err := gate.Decide(t.Context(), ev.GetApprovalId(), approve, reason); err != nil {
				t.Error(err)
			}
		}
	}
	ran := func() string { return strings.Join(u.ToolCalls(), ",") }

	t.Run("a tool that needs none runs without an event", func(t *testing.T) {
		d := chatEvents(t, t.Context(), l, "mcp_every__get-sum", func(ev *mcpgatewayv1.ToolEvent) {
			if ev.GetType() == "approval_required" {
				t.Errorf("event %v", ev)
			}
		})
		if calls := d.GetToolCalls(); len(calls) != 1 || calls[0].GetIsError() || calls[0].GetApproval() != "" || ran() != "get-sum" {
			t.Fatalf("done %v, ran %q", d, ran())
		}
	})
	t.Run("approved, it runs", func(t *testing.T) {
		d := chatEvents(t, t.Context(), l, "mcp_every__rm", decide(true, ""))
		if calls := d.GetToolCalls(); len(calls) != 1 || calls[0].GetIsError() || calls[0].GetApproval() != "approved" ||
			d.GetMessage().GetContent() != "The tool returned: rm:x" || ran() != "get-sum,rm" {
			t.Fatalf("done %v, ran %q", d, ran())
		}
	})
	t.Run("denied, it does not run and the model is told the reason", func(t *testing.T) {
		d := chatEvents(t, t.Context(), l, "mcp_every__rm", decide(false, "not on prod"))
		if calls := d.GetToolCalls(); len(calls) != 1 || !calls[0].GetIsError() || calls[0].GetApproval() != "denied" ||
			!strings.Contains(d.GetMessage().GetContent(), "an administrator denied it (approval_denied): not on prod") || ran() != "get-sum,rm" {
			t.Fatalf("done %v, ran %q", d, ran())
		}
	})
	t.Run("undecided, it expires", func(t *testing.T) {
		l = newLoop(inference, reg, up, approval.New(reg, 100*time.Millisecond, nil))
		defer func() { l = newLoop(inference, reg, up, gate) }()
		d := chatEvents(t, t.Context(), l, "mcp_every__rm", func(*mcpgatewayv1.ToolEvent) {})
		if calls := d.GetToolCalls(); len(calls) != 1 || !calls[0].GetIsError() || calls[0].GetApproval() != "expired" ||
			!strings.Contains(d.GetMessage().GetContent(), "nobody approved it within 100ms (approval_expired; ZEST_APPROVAL_TIMEOUT)") || ran() != "get-sum,rm" {
			t.Fatalf("done %v, ran %q", d, ran())
		}
	})
	t.Run("a cancelled chat withdraws its approval", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		id := ""
		d := chatEvents(t, ctx, l, "mcp_every__rm", func(ev *mcpgatewayv1.ToolEvent) {
			if ev.GetType() == "approval_required" {
				id = ev.GetApprovalId()
				cancel()
			}
		})
		if d != nil || id == "" {
			t.Fatalf("done %v after cancel, approval %q", d, id)
		}
		waitfor.True(t, 5*time.Second, "the approval of a cancelled chat withdrawn", func() bool {
			_, err := reg.GetApproval(t.Context(), id)
			return errors.Is(err, registry.ErrNotFound)
		})
		if _, err := gate.Decide(t.Context(), id, true, ""); !errors.Is(err, approval.ErrNotFound) {
			t.Fatalf("approving a withdrawn call: %v", err)
		}
		if ran() != "get-sum,rm" {
			t.Fatalf("ran %q", ran())
		}
	})
	t.Run("without a gate it is refused", func(t *testing.T) {
		l = newLoop(inference, reg, up, nil)
		defer func() { l = newLoop(inference, reg, up, gate) }()
		d := chatEvents(t, t.Context(), l, "mcp_every__rm", func(*mcpgatewayv1.ToolEvent) {})
		if calls := d.GetToolCalls(); len(calls) != 1 || !calls[0].GetIsError() || !strings.Contains(d.GetMessage().GetContent(), `tool "rm" of MCP server "every" requires approval, and this mcpgateway cannot ask for one`) {
			t.Fatalf("done %v", d)
		}
	})
}
