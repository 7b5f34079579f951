package toolchat

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/tooloutput"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// fakeModel calls the function its request's tool_choice names (once the tool answered, it
// says what the tool returned), recording the tools each request offered; beforeCall runs
// before it answers with a call.
type fakeModel struct {
	inferencev1.UnimplementedInferenceServiceServer

	mu         sync.Mutex
	offered    [][]string
	tools      [][]any // the tool definitions each request offered
	beforeCall func()
	// args are the arguments of its calls (default {"text":"x"}); toolMsg is the last tool
	// message it was sent, as the model reads it.
	args    string
	toolMsg string
}

// unwrapped is what is inside the chat loop's marker around a tool message (the fake model
// echoes it, as builtin-llm does).
func unwrapped(s string) string {
	text, _ := tooloutput.Unwrap(s)
	return text
}

func (m *fakeModel) Chat(req *inferencev1.ChatRequest, s grpc.ServerStreamingServer[inferencev1.ChatResponse]) error {
	var offered []string
	for _, v := range req.GetTools().GetValues() {
		offered = append(offered, v.GetStructValue().GetFields()["function"].GetStructValue().GetFields()["name"].GetStringValue())
	}
	m.mu.Lock()
	m.offered = append(m.offered, offered)
	m.tools = append(m.tools, req.GetTools().AsSlice())
	beforeCall, args := m.beforeCall, m.args
	msgs := req.GetMessages()
	if last := msgs[len(msgs)-1]; last.GetRole() == "tool" {
		m.toolMsg = last.GetContent()
	}
	m.mu.Unlock()
	if args == "" {
		args = `{"text":"x"}`
	}
	if last := msgs[len(msgs)-1]; last.GetRole() == "tool" {
		return s.Send(&inferencev1.ChatResponse{Id: "c", Model: "m", FinishReason: "stop",
			Delta: &inferencev1.ChatMessage{Role: "assistant", Content: "The tool returned: " + unwrapped(last.GetContent())}})
	}
	fn := req.GetToolChoice().GetStructValue().GetFields()["function"].GetStructValue().GetFields()["name"].GetStringValue()
	if beforeCall != nil {
		beforeCall()
	}
	return s.Send(&inferencev1.ChatResponse{Id: "c", Model: "m", FinishReason: "tool_calls", Delta: &inferencev1.ChatMessage{Role: "assistant",
		ToolCalls: []*inferencev1.ToolCall{{Id: "call_1", Type: "function", Function: &inferencev1.FunctionCall{Name: fn, Arguments: args}}}}})
}

func (m *fakeModel) firstTools() []any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tools[0]
}

func (m *fakeModel) firstOffer() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.offered[0]
}

// chatWith runs one chat through ChatService with the tool_choice naming fn and returns its
// outcome.
func chatWith(t *testing.T, l *Loop, fn string) *mcpgatewayv1.ChatDone {
	t.Helper()
	d, err := chatAs(t, l, &mcpgatewayv1.ChatRequest{Providers: &mcpgatewayv1.Providers{Ids: []string{"every"}}}, fn)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// chatAs runs req (its chat set here, with the tool_choice naming fn) through ChatService and
// returns its outcome or the status it ended with.
func chatAs(t *testing.T, l *Loop, req *mcpgatewayv1.ChatRequest, fn string) (*mcpgatewayv1.ChatDone, error) {
	t.Helper()
	cc := grpctest.Loopback(t, func(s *grpc.Server) { mcpgatewayv1.RegisterChatServiceServer(s, l) })
	choice, err := structpb.NewValue(map[string]any{"type": "function", "function": map[string]any{"name": fn}})
	if err != nil {
		t.Fatal(err)
	}
	req.Chat = &inferencev1.ChatRequest{Model: "m", ToolChoice: choice, Messages: []*inferencev1.ChatMessage{{Role: "user", Content: "go"}}}
	st, err := mcpgatewayv1.NewChatServiceClient(cc).Chat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			t.Fatal("the chat ended without done")
		}
		if err != nil {
			return nil, err
		}
		if d := r.GetDone(); d != nil {
			return d, nil
		}
	}
}

// refusedField is the field an InvalidArgument's BadRequest detail names ("" for another error).
func refusedField(err error) string {
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		return ""
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

// upstreamFixture starts an MCP test server with opts, and opens an empty bbolt registry and
// an upstream manager for the loop; all end with t.
func upstreamFixture(t *testing.T, opts mcptest.Options) (*mcptest.Upstream, *registry.Bolt, *upstream.Manager) {
	t.Helper()
	u := mcptest.Start(t, opts)
	reg, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	up := upstream.New(nil, nil, nil)
	t.Cleanup(func() { up.Close(context.Background()) })
	return u, reg, up
}

// newLoop is a loop over reg and up with a pipeline that holds approvals in gate (nil: none)
// and serves no built-in tools but an empty server's.
func newLoop(inference inferencev1.InferenceServiceClient, reg *registry.Bolt, up *upstream.Manager, gate *approval.Gate) *Loop {
	srv := server.NewMCPServer("builtin", "1")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tools := toolcall.New(toolcall.Config{}, reg, up, keyauth.Keys{}, toolcall.WithBuiltin(mcpserve.NewBuiltin(srv)), toolcall.WithApprovals(gate), toolcall.WithLogger(log))
	return New(Config{}, inference, reg, up, srv, tools, keyauth.Keys{}, log)
}

// TestFilteredToolsAreNeitherOfferedNorRun: the model is offered only the tools the server's
// filters expose; a tool_choice naming a filtered-out tool is refused before the model is
// asked (handed to it, the model called a tool never offered); and a tool filtered out after
// the chat began is refused, not run.
func TestFilteredToolsAreNeitherOfferedNorRun(t *testing.T) {
	u, reg, up := upstreamFixture(t, mcptest.Options{Tools: []string{"get-sum", "get-env"}})
	ctx := t.Context()
	cfg := &mcpgatewayv1.ServerConfig{Id: "every", Name: "every", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(30000),
		ToolsAllow: []string{"echo", "get-*"}, ToolsDeny: []string{"get-env"}}
	if err := reg.PutServer(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	model := &fakeModel{}
	inference := inferencev1.NewInferenceServiceClient(grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterInferenceServiceServer(s, model) }))
	l := newLoop(inference, reg, up, nil)

	t.Run("only exposed tools are offered, and they run", func(t *testing.T) {
		d := chatWith(t, l, "mcp_every__get-sum")
		if got := model.firstOffer(); !slices.Equal(got, []string{"mcp_every__echo", "mcp_every__get-sum"}) {
			t.Fatalf("offered %q", got)
		}
		if d.GetFinishReason() != "stop" || d.GetMessage().GetContent() != "The tool returned: get-sum:x" || len(d.GetToolCalls()) != 1 {
			t.Fatalf("done %v", d)
		}
	})
	t.Run("a tool_choice naming a filtered-out tool is refused", func(t *testing.T) {
		asked := len(model.offered)
		d, err := chatAs(t, l, &mcpgatewayv1.ChatRequest{Providers: &mcpgatewayv1.Providers{Ids: []string{"every"}}}, "mcp_every__get-env")
		if refusedField(err) != "tool_choice" || !strings.Contains(err.Error(), `tool_choice names function "mcp_every__get-env", which this chat does not offer: it offers mcp_every__echo, mcp_every__get-sum`) {
			t.Fatalf("done %v, err %v", d, err)
		}
		d, err = chatAs(t, l, &mcpgatewayv1.ChatRequest{Providers: &mcpgatewayv1.Providers{Ids: []string{"gone"}}}, "mcp_gone__x")
		if refusedField(err) != "tool_choice" || !strings.Contains(err.Error(), `offers no tools (MCP server "gone" left out of this chat: it is not registered)`) {
			t.Fatalf("done %v, err %v", d, err)
		}
		model.mu.Lock()
		defer model.mu.Unlock()
		if len(model.offered) != asked {
			t.Fatal("a refused chat reached the model")
		}
	})
	t.Run("a tool filtered out during the chat is refused", func(t *testing.T) {
		model.mu.Lock()
		model.beforeCall = func() {
			narrowed := proto.CloneOf(cfg)
			narrowed.ToolsDeny = []string{"get-*"}
			if err := reg.PutServer(ctx, narrowed); err != nil {
				t.Error(err)
			}
		}
		model.mu.Unlock()
		d := chatWith(t, l, "mcp_every__get-sum")
		calls := d.GetToolCalls()
		if len(calls) != 1 || !calls[0].GetIsError() || !strings.Contains(d.GetMessage().GetContent(), `MCP server "every" no longer exposes "get-sum"`) {
			t.Fatalf("done %v", d)
		}
	})
	if got := strings.Join(u.ToolCalls(), ","); got != "get-sum" {
		t.Fatalf("the server ran %q; only the first chat's get-sum may run", got)
	}

	// A server reconfigured during the chat is called as it is configured at the call: at
	// its new URL, and not at all once disabled.
	moved := mcptest.Start(t, mcptest.Options{Tools: []string{"get-sum"}})
	change := func(f func(*mcpgatewayv1.ServerConfig)) {
		if err := reg.PutServer(ctx, cfg); err != nil { // as the chat begins
			t.Fatal(err)
		}
		model.mu.Lock()
		defer model.mu.Unlock()
		model.beforeCall = func() {
			c := proto.CloneOf(cfg)
			c.Url = moved.URL
			f(c)
			if err := reg.PutServer(ctx, c); err != nil {
				t.Error(err)
			}
		}
	}
	t.Run("a server moved during the chat is called at its new URL", func(t *testing.T) {
		change(func(*mcpgatewayv1.ServerConfig) {})
		d := chatWith(t, l, "mcp_every__get-sum")
		if calls := d.GetToolCalls(); len(calls) != 1 || calls[0].GetIsError() {
			t.Fatalf("done %v", d)
		}
		if old, cur := len(u.ToolCalls()), len(moved.ToolCalls()); old != 1 || cur != 1 {
			t.Fatalf("the old server ran %d calls (want 1, the first chat's) and the new one %d (want 1)", old, cur)
		}
	})
	t.Run("a server disabled during the chat is not called", func(t *testing.T) {
		change(func(c *mcpgatewayv1.ServerConfig) { c.Enabled = proto.Bool(false) })
		d := chatWith(t, l, "mcp_every__get-sum")
		calls := d.GetToolCalls()
		if len(calls) != 1 || !calls[0].GetIsError() || !strings.Contains(d.GetMessage().GetContent(), `MCP server "every" is not registered (or not enabled)`) {
			t.Fatalf("done %v", d)
		}
		if n := len(moved.ToolCalls()) + len(u.ToolCalls()); n != 2 {
			t.Fatalf("a disabled server was called (%d calls in all, want 2)", n)
		}
	})
}

// TestPresetNarrowedByMcpServerIDs: with a preset, mcp_server_ids narrow its providers (the
// tools offered are those of the servers named), and naming a provider the preset does not
// select is refused with the field named — it used to replace the preset's providers silently.
func TestPresetNarrowedByMcpServerIDs(t *testing.T) {
	u, reg, up := upstreamFixture(t, mcptest.Options{Tools: []string{"get-sum"}})
	ctx := t.Context()
	for _, id := range []string{"every", "other"} {
		cfg := &mcpgatewayv1.ServerConfig{Id: id, Name: id, Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(30000)}
		if err := reg.PutServer(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.PutPreset(ctx, &mcpgatewayv1.Preset{Id: "p", McpServerIds: []string{"every", "other"}}); err != nil {
		t.Fatal(err)
	}
	model := &fakeModel{}
	inference := inferencev1.NewInferenceServiceClient(grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterInferenceServiceServer(s, model) }))
	l := newLoop(inference, reg, up, nil)

	d, err := chatAs(t, l, &mcpgatewayv1.ChatRequest{Preset: "p", Providers: &mcpgatewayv1.Providers{Ids: []string{"other"}}}, "mcp_other__get-sum")
	if err != nil || d.GetFinishReason() != "stop" {
		t.Fatalf("narrowed: %v %v", d, err)
	}
	if got := model.firstOffer(); !slices.Equal(got, []string{"mcp_other__echo", "mcp_other__get-sum"}) {
		t.Fatalf("offered %q", got)
	}
	if err := reg.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "outside", Name: "outside", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	_, err = chatAs(t, l, &mcpgatewayv1.ChatRequest{Preset: "p", Providers: &mcpgatewayv1.Providers{Ids: []string{"every", "outside"}}}, "mcp_outside__get-sum")
	if refusedField(err) != "mcp_server_ids" || !strings.Contains(err.Error(), `mcp_server_ids names "outside", which preset "p" does not select (it selects every, other)`) {
		t.Fatalf("widened: %v", err)
	}
}
