package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/protobuf/proto"
)

func httpConfig(id, url string) *mcpgatewayv1.ServerConfig {
	return &mcpgatewayv1.ServerConfig{Id: id, Name: id, Transport: serverconfig.TransportHTTP, Url: url, Enabled: proto.Bool(true), TimeoutMs: proto.Int32(10000)}
}

func noViolations(t *testing.T, u *mcptest.Upstream) {
	t.Helper()
	if v := u.Violations(); len(v) > 0 {
		t.Fatalf("the upstream saw the client break its rules:\n%s", strings.Join(v, "\n"))
	}
}

// answersOf returns the client's answers, by kind: results of {} and error codes.
func answersOf(t *testing.T, u *mcptest.Upstream) (emptyResults int, codes []int) {
	t.Helper()
	for _, raw := range u.Answers() {
		var m struct {
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("answer %s: %v", raw, err)
		}
		switch {
		case m.Error != nil:
			codes = append(codes, m.Error.Code)
		case string(m.Result) == "{}":
			emptyResults++
		}
	}
	return emptyResults, codes
}

// While answering tools/list, the server sends a ping with the id of the outstanding
// tools/list and requests Zest offers none of: ping is answered {} and never taken for the
// tools/list answer, the others -32601, each POSTed with the session id and protocol version.
func TestHTTPAnswersServerRequests(t *testing.T) {
	methods := []string{"roots/list", "sampling/createMessage", "elicitation/create"}
	u := mcptest.Start(t, mcptest.Options{Requests: methods})
	m := New(nil, nil, nil)
	info, tools, err := m.Test(t.Context(), httpConfig("adversarial", u.URL))
	if err != nil {
		t.Fatalf("test connect: %v\nviolations: %v", err, u.Violations())
	}
	noViolations(t, u)
	if len(tools) != 1 || !strings.Contains(string(tools[0]), `"name":"echo"`) || info.ProtocolVersion != mcptest.ProtocolVersion {
		t.Fatalf("tools %s, info %+v", tools, info)
	}
	if u.Discovers() != 1 || u.Initializes() != 1 {
		t.Fatalf("%d server/discover probes and %d initializes: want the probe first, answered 400, then initialize", u.Discovers(), u.Initializes())
	}
	empty, codes := answersOf(t, u)
	if empty != 1 || len(codes) != len(methods) {
		t.Fatalf("answers %s: want one {} and %d errors", u.Answers(), len(methods))
	}
	for _, c := range codes {
		if c != -32601 {
			t.Fatalf("a server request was answered %d, want -32601: %s", c, u.Answers())
		}
	}
	if got := u.Deletes(); got != 1 {
		t.Fatalf("the test session was ended with %d DELETEs, want 1", got)
	}

	// The same holds on the connected path (connect lists tools, refresh lists again).
	cfg := httpConfig("connected", u.URL)
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatalf("connect: %v\nviolations: %v", err, u.Violations())
	}
	defer m.Disconnect(context.Background(), cfg.GetId())
	if _, err := m.Tools(t.Context(), cfg.GetId(), true); err != nil {
		t.Fatal(err)
	}
	noViolations(t, u)
	if empty, codes := answersOf(t, u); empty != 3 || len(codes) != 3*len(methods) {
		t.Fatalf("answers after connect and refresh: %s", u.Answers())
	}
}

// answerServerRequest answers ping {} and, outside a call made for an MCP client, everything
// else -32601 "Method not found" as a response, not as a Go error (which mcp-go answers -32603).
func TestAnswerServerRequest(t *testing.T) {
	for _, method := range []string{"ping", "roots/list", "sampling/createMessage", "elicitation/create", "x/unknown"} {
		t.Run(method, func(t *testing.T) {
			req := transport.JSONRPCRequest{JSONRPC: "2.0", Method: method}
			req.ID = mcp.NewRequestId(7)
			resp, err := answerServerRequest(t.Context(), req)
			if err != nil || resp == nil {
				t.Fatalf("answer: %v, %v", resp, err)
			}
			b, _ := json.Marshal(resp)
			message := "Method not found"
			if method != "x/unknown" {
				message += ": Zest relays " + method + " only to the MCP client of the call that caused it, on that call's response stream; this one came on the GET stream or during a request of Zest's own"
			}
			want := `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"` + message + `","data":{"method":"` + method + `"}}}`
			if method == "ping" {
				want = `{"jsonrpc":"2.0","id":7,"result":{}}`
			}
			if string(b) != want {
				t.Fatalf("answer %s, want %s", b, want)
			}
		})
	}
}

// A session the server forgets (HTTP 404 on a tools/call) fails that call with an error
// naming the 404, without initializing again within it; the next call initializes a new
// session and succeeds; concurrent calls after a 404 share one initialize.
func TestHTTPSessionExpiry(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	m := New(nil, nil, nil)
	cfg := httpConfig("expiring", u.URL)
	call := func(text string) (string, error) {
		params, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]string{"text": text}})
		raw, err := m.DispatchToolCall(t.Context(), cfg, params, 0, Hooks{})
		if err != nil {
			return "", err
		}
		var r struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(raw, &r)
		if len(r.Content) != 1 {
			return "", fmt.Errorf("result %s", raw)
		}
		return r.Content[0].Text, nil
	}
	if got, err := call("one"); err != nil || got != "http-echo:one" {
		t.Fatalf("first call: %q, %v", got, err)
	}
	inits := u.Initializes()

	u.ExpireOnNextToolCall()
	_, err := call("expire-me")
	var expired *SessionExpiredError
	if !errors.As(err, &expired) || !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), "404") ||
		!strings.Contains(err.Error(), `MCP server "expiring" forgot the session`) {
		t.Fatalf("the call that met the 404: %v", err)
	}
	if got := u.Initializes(); got != inits {
		t.Fatalf("the failing call initialized again (%d initializes, want %d): it must fail, not retry", got, inits)
	}
	if !m.State(cfg.GetId()).Connected {
		t.Fatal("the server shows disconnected after a forgotten session; it reconnects on the next call")
	}

	// The next calls (concurrently) initialize once and succeed.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			want := fmt.Sprintf("http-echo:after-%d", i)
			if got, err := call(fmt.Sprintf("after-%d", i)); err != nil || got != want {
				errs <- fmt.Errorf("call %d: %q, %v", i, got, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := u.Initializes(); got != inits+1 {
		t.Fatalf("%d initializes after the 404, want exactly 1", got-inits)
	}
	noViolations(t, u)
	methods := strings.Join(u.Methods(), " ")
	if !strings.Contains(methods, "initialize notifications/initialized tools/list tools/call") {
		t.Fatalf("methods seen: %s", methods)
	}
}

// TestHTTPNeverSendsAReservedVariable: a bearer_token that refers to one of mcpgateway's own
// variables (stored before registration refused it) fails the connect naming the field and
// the fix; the server is never contacted, so the key never leaves.
func TestHTTPNeverSendsAReservedVariable(t *testing.T) {
	t.Setenv("ZEST_SESSION_KEY", "session-key-never-sent")
	u := mcptest.Start(t, mcptest.Options{})
	m := New(nil, nil, nil)
	cfg := httpConfig("leaky", u.URL)
	cfg.BearerToken = "${ZEST_SESSION_KEY}"
	params, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]string{"text": "x"}})
	_, err := m.DispatchToolCall(t.Context(), cfg, params, 0, Hooks{})
	if !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), "bearer_token refers to ${ZEST_SESSION_KEY}, a variable reserved for Zest's own services") ||
		strings.Contains(err.Error(), "session-key-never-sent") {
		t.Fatalf("a call with a reserved bearer_token: %v", err)
	}
	if n := u.Initializes(); n != 0 {
		t.Fatalf("the server was contacted (%d initializes)", n)
	}
}
