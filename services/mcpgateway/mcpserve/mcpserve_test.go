package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// client drives the handler in-process with a tool that sends n
// progress notifications before it returns.
func client(t *testing.T) *mcpservetest.Client {
	t.Helper()
	reg, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return clientOn(t, reg)
}

// clientOn is client over a given registry (two of them on one registry are two replicas).
func clientOn(t *testing.T, reg *registry.Bolt) *mcpservetest.Client {
	t.Helper()
	srv := NewMCPServer("test")
	srv.AddTool(mcp.NewTool("chatty", mcp.WithDescription("logs at debug, info and warning")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s := server.ServerFromContext(ctx)
			for _, l := range []mcp.LoggingLevel{mcp.LoggingLevelDebug, mcp.LoggingLevelInfo, mcp.LoggingLevelWarning} {
				if err := s.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(l, "test", "at "+string(l))); err != nil {
					return nil, err
				}
			}
			return mcp.NewToolResultText("logged"), nil
		})
	srv.AddTool(mcp.NewTool("noisy", mcp.WithDescription("sends notifications"), mcp.WithNumber("n")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := int(req.GetFloat("n", 3))
			s := server.ServerFromContext(ctx)
			for i := range n {
				if err := s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": "p", "progress": i}); err != nil {
					return nil, err
				}
			}
			return mcp.NewToolResultText(fmt.Sprintf("sent %d", n)), nil
		})
	srv.AddTool(mcp.NewTool("notethenwait", mcp.WithDescription("sends a notification, then waits for the test")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s := server.ServerFromContext(ctx)
			if err := s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": "p", "progress": 1}); err != nil {
				return nil, err
			}
			select {
			case <-noteSeen:
				return mcp.NewToolResultText("released"), nil
			case <-time.After(10 * time.Second):
				return mcp.NewToolResultText("never released"), nil
			}
		})
	srv.AddTool(mcp.NewTool("wait", mcp.WithDescription("waits until cancelled")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			waitStarted <- struct{}{}
			select {
			case <-ctx.Done():
				waitCancelled <- struct{}{}
				return nil, ctx.Err()
			case <-time.After(10 * time.Second):
				return mcp.NewToolResultText("not cancelled"), nil
			}
		})
	srv.AddTool(mcp.NewTool("failing", mcp.WithDescription("always fails")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("the failing tool failed, as it always does"), nil
		})
	codec, err := session.NewCodec(bytes.Repeat([]byte{1}, 32), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return mcpservetest.NewClient(NewRoutes(New(srv, codec, reg, toolcall.New(toolcall.Config{}, reg, nil, keyauth.Keys{}, toolcall.WithBuiltin(NewBuiltin(srv))), nil)), nil)
}

// TestLogLevelIsRememberedPerSession: a session gets warnings until it sets a level; the
// level it sets holds for its later requests, on another replica over the same registry too,
// and does not leak into other sessions.
func TestLogLevelIsRememberedPerSession(t *testing.T) {
	reg, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	a, b := clientOn(t, reg), clientOn(t, reg)
	levels := func(c *mcpservetest.Client, sid string) []string {
		t.Helper()
		ex, err := send(t, c, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"chatty","arguments":{}}}`)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range ex.messages {
			if m["method"] == "notifications/message" {
				got = append(got, m["params"].(map[string]any)["level"].(string))
			}
		}
		return got
	}
	s1, s2 := initialize(t, a, "2025-11-25"), initialize(t, a, "2025-11-25")
	if got := fmt.Sprint(levels(a, s1)); got != "[warning]" {
		t.Fatalf("before setLevel: %s, want [warning]", got)
	}
	ex, err := send(t, a, s1, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`)
	if err != nil || len(ex.messages) != 1 || ex.messages[0]["error"] != nil {
		t.Fatalf("setLevel: %v %v", ex.messages, err)
	}
	for name, c := range map[string]*mcpservetest.Client{"same replica": a, "other replica": b} {
		if got := fmt.Sprint(levels(c, s1)); got != "[debug info warning]" {
			t.Fatalf("%s after setLevel debug: %s", name, got)
		}
	}
	if got := fmt.Sprint(levels(b, s2)); got != "[warning]" {
		t.Fatalf("another session: %s, want [warning]", got)
	}
	send(t, b, s1, `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"error"}}`)
	if got := fmt.Sprint(levels(a, s1)); got != "[]" {
		t.Fatalf("after setLevel error: %s, want []", got)
	}
	ex, _ = send(t, a, s1, `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"loud"}}`)
	if e, _ := ex.messages[0]["error"].(map[string]any); e == nil || e["code"] != float64(mcp.INVALID_PARAMS) {
		t.Fatalf("an unknown level: %v", ex.messages)
	}
	if got := fmt.Sprint(levels(a, s1)); got != "[]" {
		t.Fatalf("a refused level changed the session's: %s", got)
	}
}

// noteSeen releases the "notethenwait" tool.
var noteSeen = make(chan struct{}, 1)

// TestNotificationsAreRelayedWhileTheToolRuns: a notification reaches the client before the
// tool returns (the tool waits until the test has seen it).
func TestNotificationsAreRelayedWhileTheToolRuns(t *testing.T) {
	c := client(t)
	sid := initialize(t, c, "2025-11-25")
	stream, err := c.Exchange(t.Context(), &mcpservetest.Request{SessionID: sid,
		Payload: []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"notethenwait","arguments":{}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan *mcpservetest.Item, 1)
	go func() {
		it, _ := stream.Recv()
		first <- it
	}()
	select {
	case it := <-first:
		if it.Final || !bytes.Contains(it.Message, []byte("notifications/progress")) {
			t.Fatalf("first item: %v", it)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the notification waited for the tool to return")
	}
	noteSeen <- struct{}{}
	it, err := stream.Recv()
	if err != nil || !it.Final || !bytes.Contains(it.Message, []byte("released")) {
		t.Fatalf("result: %v %v", it, err)
	}
}

// waitStarted receives when the "wait" tool starts; waitCancelled when it sees its context
// cancelled.
var waitStarted, waitCancelled = make(chan struct{}, 4), make(chan struct{}, 4)

// TestNotificationsCancelledCancelsTheCall: a later POST of the same session cancels a call
// in flight, and its handler's context (which a gRPC call to inference would use) ends.
func TestNotificationsCancelledCancelsTheCall(t *testing.T) {
	c := client(t)
	sid := initialize(t, c, "2025-11-25")
	done := make(chan error, 1)
	go func() {
		_, err := send(t, c, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wait","arguments":{}}}`)
		done <- err
	}()
	select {
	case <-waitStarted: // the call is in flight
	case <-time.After(5 * time.Second):
		t.Fatal("the tool did not start")
	}
	ex, err := send(t, c, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`)
	if err != nil || len(ex.messages) != 0 {
		t.Fatalf("cancel notification: %v %v", ex, err)
	}
	select {
	case <-waitCancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool's context was not cancelled")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call did not end")
	}
}

type exchange struct {
	session   string
	messages  []map[string]any
	finals    []bool
	malformed []bool // answered with an HTTP error status at the edge
	notFound  []bool // answered with HTTP 404 at the edge (2026-07-28)
}

func send(t *testing.T, c *mcpservetest.Client, sessionID, body string) (exchange, error) {
	t.Helper()
	return sendWith(t, c, sessionID, "", body)
}

// sendWith is send with an MCP-Protocol-Version header.
func sendWith(t *testing.T, c *mcpservetest.Client, sessionID, protocolVersion, body string) (exchange, error) {
	t.Helper()
	return sendReq(t, c, &mcpservetest.Request{SessionID: sessionID, ProtocolVersion: protocolVersion, Payload: []byte(body)})
}

func sendReq(t *testing.T, c *mcpservetest.Client, req *mcpservetest.Request) (exchange, error) {
	t.Helper()
	stream, err := c.Exchange(t.Context(), req)
	if err != nil {
		return exchange{}, err
	}
	var ex exchange
	for {
		item, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return ex, nil
		}
		if err != nil {
			return ex, err
		}
		if item.Session != "" {
			ex.session = item.Session
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(item.Message, &m); err != nil {
			// a batch answer is an array
			var arr []any
			if json.Unmarshal(item.Message, &arr) != nil {
				t.Fatalf("message is not JSON: %s", item.Message)
			}
			m = map[string]any{"batch": arr}
		}
		ex.messages = append(ex.messages, m)
		ex.finals = append(ex.finals, item.Final)
		ex.malformed = append(ex.malformed, item.Malformed())
		ex.notFound = append(ex.notFound, item.MethodNotFound())
	}
}

func initialize(t *testing.T, c *mcpservetest.Client, version string) string {
	t.Helper()
	ex, err := send(t, c, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, version))
	if err != nil || ex.session == "" {
		t.Fatalf("initialize: %v %+v", err, ex)
	}
	return ex.session
}

// TestEveryNotificationPrecedesTheResult is the flush guarantee: a tool's notifications,
// including the one sent just before it returns, all arrive, in order, before the result.
func TestEveryNotificationPrecedesTheResult(t *testing.T) {
	c := client(t)
	sid := initialize(t, c, "2025-11-25")
	for _, n := range []int{1, 3, 50} {
		ex, err := send(t, c, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"noisy","arguments":{"n":%d}}}`, n))
		if err != nil {
			t.Fatal(err)
		}
		if len(ex.messages) != n+1 {
			t.Fatalf("n=%d: got %d messages, want %d notifications and the result", n, len(ex.messages), n)
		}
		for i := range n {
			p := ex.messages[i]["params"].(map[string]any)["progress"]
			if ex.finals[i] || p != float64(i) {
				t.Fatalf("n=%d: message %d = %v (final=%v)", n, i, ex.messages[i], ex.finals[i])
			}
		}
		if !ex.finals[n] || ex.messages[n]["result"] == nil {
			t.Fatalf("n=%d: last message %v is not the final result", n, ex.messages[n])
		}
	}
}

// TestUnknownToolIsOneSentence: a tools/call of a tool /mcp does not have is -32602 with
// UnknownToolMessage, not mcp-go's "tool 'x' not found: tool not found"; a call without a name
// still says what it lacks.
func TestUnknownToolIsOneSentence(t *testing.T) {
	c := client(t)
	sid := initialize(t, c, "2025-11-25")
	for _, cc := range []struct{ body, want string }{
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, `Unknown tool "nope": this endpoint has no tool of that name (tools/list lists its tools)`},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}`, "Invalid params: tools/call requires params.name, the name of a tool from tools/list"},
	} {
		ex, err := send(t, c, sid, cc.body)
		if err != nil {
			t.Fatal(err)
		}
		if len(ex.messages) != 1 {
			t.Fatalf("%s: %v", cc.body, ex.messages)
		}
		e, _ := ex.messages[0]["error"].(map[string]any)
		if e["code"] != float64(mcp.INVALID_PARAMS) || e["message"] != cc.want {
			t.Errorf("%s: error %v, want -32602 %q", cc.body, e, cc.want)
		}
	}
}

func TestSessionErrors(t *testing.T) {
	c := client(t)
	_, err := send(t, c, "", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no session: %v", err)
	}
	_, err = send(t, c, "forged.id", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("forged session: %v", err)
	}
}

func TestBatchesOnlyFor20250326(t *testing.T) {
	c := client(t)
	old := initialize(t, c, "2025-03-26")
	ex, err := send(t, c, old, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`)
	if err != nil {
		t.Fatal(err)
	}
	batch := ex.messages[len(ex.messages)-1]["batch"].([]any)
	if len(batch) != 2 {
		t.Fatalf("batch answer = %v, want two responses (the notification has none)", batch)
	}
	current := initialize(t, c, "2025-11-25")
	ex, err = send(t, c, current, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	if err != nil {
		t.Fatal(err)
	}
	if ex.messages[0]["error"].(map[string]any)["code"] != float64(mcp.INVALID_REQUEST) {
		t.Fatalf("batch in 2025-11-25: %v", ex.messages[0])
	}
}

// TestEndedSessionStaysEndedUnderAnotherSpelling: after DELETE, no other spelling of the id
// (a changed last character that base64 would decode to the same signature) reopens it.
func TestEndedSessionStaysEndedUnderAnotherSpelling(t *testing.T) {
	c := client(t)
	sid := initialize(t, c, "2025-11-25")
	if err := c.EndSession(t.Context(), &mcpservetest.Request{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range len(alphabet) {
		alt := sid[:len(sid)-1] + alphabet[i:i+1]
		if _, err := send(t, c, alt, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); status.Code(err) != codes.NotFound {
			t.Fatalf("ended session under the spelling %q: %v, want NotFound", alt, err)
		}
	}
}

// TestProtocolHeaderMustMatchTheSession: MCP-Protocol-Version, when sent, must name the
// version the session negotiated (2025-03-26 counts as no header: see sessionFor), on single
// messages and batches alike.
func TestProtocolHeaderMustMatchTheSession(t *testing.T) {
	c := client(t)
	current, old := initialize(t, c, "2025-11-25"), initialize(t, c, "2025-03-26")
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, tc := range []struct {
		name, session, header, body string
		ok                          bool
	}{
		{"no header", current, "", ping, true},
		{"the negotiated version", current, "2025-11-25", ping, true},
		{"another served version", current, "2025-06-18", ping, false},
		{"2025-03-26 counts as no header", current, "2025-03-26", ping, true},
		{"a newer version than negotiated", old, "2025-11-25", ping, false},
		{"a batch under another version", old, "2025-06-18", "[" + ping + "]", false},
		{"a batch under its version", old, "2025-03-26", "[" + ping + "]", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, err := sendWith(t, c, tc.session, tc.header, tc.body)
			if tc.ok {
				if err != nil || len(ex.messages) != 1 {
					t.Fatalf("refused: %v %v", ex.messages, err)
				}
				return
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "negotiated") {
				t.Fatalf("want InvalidArgument naming the negotiated version, got %v %v", ex.messages, err)
			}
		})
	}
}
