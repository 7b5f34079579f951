package streamable

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"

	"github.com/zestmcp/zest/lib/httpexchange"
	"github.com/zestmcp/zest/lib/httpstatus"
	"github.com/zestmcp/zest/lib/jsonrpcerr"
	"github.com/zestmcp/zest/lib/ratelimit"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fakeMCP is an MCP endpoint (mcphttp.Endpoint) with answers the test chooses; it records
// what it was sent.
type fakeMCP struct {
	exchange func(*mcphttp.Request, mcphttp.ExchangeStream) error
	listen   func(*mcphttp.Request, mcphttp.ListenStream) error
	end      func(context.Context, *mcphttp.Request) error

	mu        sync.Mutex
	exchanges []*mcphttp.Request
	listens   []*mcphttp.Request
	md        metadata.MD
}

func (f *fakeMCP) record(ctx context.Context, add func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.md, _ = metadata.FromIncomingContext(ctx)
	add()
}

func (f *fakeMCP) Exchange(req *mcphttp.Request, s mcphttp.ExchangeStream) error {
	f.record(s.Context(), func() { f.exchanges = append(f.exchanges, req) })
	return f.exchange(req, s)
}

func (f *fakeMCP) Listen(req *mcphttp.Request, s mcphttp.ListenStream) error {
	f.record(s.Context(), func() { f.listens = append(f.listens, req) })
	return f.listen(req, s)
}

func (f *fakeMCP) EndSession(ctx context.Context, req *mcphttp.Request) error {
	f.record(ctx, func() {})
	return f.end(ctx, req)
}

func (f *fakeMCP) exchangeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.exchanges)
}

// seen returns what the fake was sent last.
func (f *fakeMCP) seen() (*mcphttp.Request, *mcphttp.Request, metadata.MD) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ex, li *mcphttp.Request
	if len(f.exchanges) > 0 {
		ex = f.exchanges[len(f.exchanges)-1]
	}
	if len(f.listens) > 0 {
		li = f.listens[len(f.listens)-1]
	}
	return ex, li, f.md
}

// serve starts the transport (Mux) over f, called in-process, behind the HTTP exchange
// as mcpgateway serves it (httpexchange.Server on a gRPC server), with the edge's end
// (httpexchange.Proxy, admitting everything) in front: the seam the edge talks through.
func serve(t *testing.T, f *fakeMCP) *httptest.Server {
	t.Helper()
	return serveWith(t, f, 20*time.Millisecond, nil)
}

// serveWith is serve with a keep-alive interval and the edge's admissions.
func serveWith(t *testing.T, f *fakeMCP, keepAlive time.Duration, admit func(http.ResponseWriter, *http.Request, *mcpgatewayv1.Admit) (func(), bool)) *httptest.Server {
	t.Helper()
	srv, _ := serveStoppable(t, f, keepAlive, admit)
	return srv
}

// serveStoppable is serveWith, and a stop that ends mcpgateway's gRPC server as a replica's
// death would.
func serveStoppable(t *testing.T, f *fakeMCP, keepAlive time.Duration, admit func(http.ResponseWriter, *http.Request, *mcpgatewayv1.Admit) (func(), bool)) (*httptest.Server, func()) {
	t.Helper()
	h := &Handler{MCP: f, KeepAlive: keepAlive}
	g := grpc.NewServer()
	mcpgatewayv1.RegisterHttpServiceServer(g, httpexchange.NewServer(Mux(h)))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	writeKey := func(w http.ResponseWriter, code int, msg string) {
		writeJSON(w, code, map[string]string{"error": msg})
	}
	srv := httptest.NewServer(&httpexchange.Proxy{Client: mcpgatewayv1.NewHttpServiceClient(cc), Admit: admit,
		WriteError: jsonrpcerr.WriteStatus, WriteLimited: WriteLimited, WriteKeyError: writeKey,
		ReadBody:  func(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) },
		BodyError: func(w http.ResponseWriter, err error) { jsonrpcerr.WriteStatus(w, 400, err.Error()) }})
	t.Cleanup(srv.Close)
	return srv, g.Stop
}

// sendMessage writes one message before the answer.
func sendMessage(s mcphttp.ExchangeStream, b string) error { return s.Message([]byte(b)) }

// sendFinal writes the answer, HTTP 200.
func sendFinal(s mcphttp.ExchangeStream, b string) error { return s.Final([]byte(b), http.StatusOK) }

type answer struct {
	status int
	header http.Header
	body   string
}

var bothTypes = "application/json, text/event-stream"

func post(t *testing.T, url, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", bothTypes)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// rpcError decodes a JSON-RPC error body.
func rpcError(t *testing.T, a answer) (code int, msg string) {
	t.Helper()
	var m struct {
		JSONRPC string
		ID      any
		Error   struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal([]byte(a.body), &m); err != nil || m.JSONRPC != "2.0" || m.ID != nil || m.Error.Message == "" {
		t.Fatalf("not a JSON-RPC error body (%d): %q %v", a.status, a.body, err)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	return m.Error.Code, m.Error.Message
}

func TestPostAnswersJSONWithTheSessionHeader(t *testing.T) {
	f := &fakeMCP{exchange: func(req *mcphttp.Request, s mcphttp.ExchangeStream) error {
		_ = s.Session("sid-1", "")
		return sendFinal(s, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}}
	srv := serve(t, f)
	a := post(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`,
		"Mcp-Session-Id", "old", "MCP-Protocol-Version", "2025-11-25", "Authorization", "Bearer k")
	if a.status != 200 || a.header.Get("Content-Type") != "application/json" || a.header.Get(mcphttp.HeaderSession) != "sid-1" ||
		a.body != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("answer %+v", a)
	}
	got, _, md := f.seen()
	if got.SessionID() != "old" || got.ProtocolVersion() != "2025-11-25" || string(got.Body) != `{"jsonrpc":"2.0","id":1,"method":"initialize"}` {
		t.Fatalf("mcpgateway was sent %v", got)
	}
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer k" {
		t.Fatalf("authorization metadata %v", md)
	}
}

func TestPostAnswersSSEWhenNotificationsComeFirst(t *testing.T) {
	f := &fakeMCP{exchange: func(_ *mcphttp.Request, s mcphttp.ExchangeStream) error {
		_ = sendMessage(s, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`)
		return sendFinal(s, `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)
	}}
	a := post(t, serve(t, f).URL+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[]}}\n\n"
	if a.status != 200 || a.header.Get("Content-Type") != "text/event-stream" || a.body != want {
		t.Fatalf("answer %d %v\n%s", a.status, a.header, a.body)
	}
}

// TestPostStreamBrokenAfterTheResponseStarted: mcpgateway's replica dies after a notification
// went out: the request still gets an answer, a JSON-RPC error with its id on the stream, so
// its client does not wait for one; a batch gets none (some of its responses may be out).
func TestPostStreamBrokenAfterTheResponseStarted(t *testing.T) {
	f := &fakeMCP{exchange: func(_ *mcphttp.Request, s mcphttp.ExchangeStream) error {
		_ = sendMessage(s, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`)
		return status.Error(codes.Unavailable, "error reading from server: EOF")
	}}
	url := serve(t, f).URL + "/mcp"
	a := post(t, url, `{"jsonrpc":"2.0","id":"call-9","method":"tools/call"}`)
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
		"event: message\ndata: {\"error\":{\"code\":-32603,\"message\":\"Service Unavailable: mcpgateway failed before answering; the request may have run (a tool call is never sent twice)\"},\"id\":\"call-9\",\"jsonrpc\":\"2.0\"}\n\n"
	if a.status != 200 || a.header.Get("Content-Type") != "text/event-stream" || a.body != want {
		t.Fatalf("answer %d %v\n%s", a.status, a.header, a.body)
	}
	a = post(t, url, `[{"jsonrpc":"2.0","id":1,"method":"tools/call"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]`)
	if strings.Contains(a.body, `"error"`) {
		t.Fatalf("a batch got %s", a.body)
	}
}

func TestPostOfNotificationsOnlyIs202(t *testing.T) {
	f := &fakeMCP{exchange: func(*mcphttp.Request, mcphttp.ExchangeStream) error { return nil }}
	a := post(t, serve(t, f).URL+"/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if a.status != http.StatusAccepted || a.body != "" {
		t.Fatalf("answer %+v", a)
	}
}

func TestPostMalformedIs400(t *testing.T) {
	f := &fakeMCP{exchange: func(_ *mcphttp.Request, s mcphttp.ExchangeStream) error {
		return s.Final([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not valid JSON"}}`), http.StatusBadRequest)
	}}
	a := post(t, serve(t, f).URL+"/mcp", `{not json`)
	if code, _ := rpcError(t, a); a.status != http.StatusBadRequest || code != -32700 {
		t.Fatalf("answer %+v", a)
	}
}

func TestPostChecksAccept(t *testing.T) {
	f := &fakeMCP{exchange: func(_ *mcphttp.Request, s mcphttp.ExchangeStream) error {
		return sendFinal(s, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}}
	srv := serve(t, f)
	for _, tc := range []struct {
		accept string
		ok     bool
	}{
		{"application/json, text/event-stream", true}, // the TypeScript SDK, the curl lines of docs/user/mcp-clients.md
		{"text/event-stream, application/json", true}, // the conformance suite
		{"application/json,text/event-stream;q=0.5", true},
		{"*/*", true}, // curl without -H accept
		{"", true},    // no Accept header: anything is acceptable (RFC 9110)
		{"application/*, text/*", true},
		{"application/json", false},
		{"text/event-stream", false},
		{"text/html", false},
		{"application/json, text/event-stream;q=0", false},
		{"*/*, text/event-stream;q=0", false},
		{"@@@", false}, // a header of nothing parsable accepts nothing, unlike no header
		{"application/json, @@@, text/event-stream", true},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			before := f.exchangeCount()
			req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			req.Header.Set("Content-Type", "application/json")
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			a := do(t, req)
			if tc.ok {
				if a.status != 200 || f.exchangeCount() != before+1 {
					t.Fatalf("refused: %+v", a)
				}
				return
			}
			code, msg := rpcError(t, a)
			if a.status != http.StatusNotAcceptable || code != -32600 || !strings.Contains(msg, "application/json and text/event-stream") {
				t.Fatalf("answer %+v", a)
			}
			if f.exchangeCount() != before {
				t.Fatal("a refused request reached mcpgateway")
			}
		})
	}
}

func TestPostChecksContentType(t *testing.T) {
	f := &fakeMCP{exchange: func(*mcphttp.Request, mcphttp.ExchangeStream) error { return nil }}
	a := post(t, serve(t, f).URL+"/mcp", `{}`, "Content-Type", "text/plain")
	if code, msg := rpcError(t, a); a.status != http.StatusUnsupportedMediaType || code != -32600 || !strings.Contains(msg, "Content-Type") {
		t.Fatalf("answer %+v", a)
	}
}

// TestStatusMapping: each gRPC status of mcpgateway has one HTTP answer, the one table's
// (httpstatus): a JSON-RPC error, -32600 for a refusal and -32603 for a failure; key refusals
// in the edge's own shape; a limit as the edge's own 429 (ratelimit.JSONRPCCode, Retry-After);
// fixed words for a transport failure.
func TestStatusMapping(t *testing.T) {
	var mu sync.Mutex
	var next error
	f := &fakeMCP{exchange: func(*mcphttp.Request, mcphttp.ExchangeStream) error {
		mu.Lock()
		defer mu.Unlock()
		return next
	}}
	srv := serve(t, f)
	send := func(c codes.Code, msg string) answer {
		mu.Lock()
		next = status.Error(c, msg)
		mu.Unlock()
		return post(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	}
	for c := codes.Unknown; c <= codes.Unauthenticated; c++ {
		if a := send(c, "refused"); a.status != httpstatus.FromCode(c) {
			t.Errorf("%v: %d, the table says %d (%s)", c, a.status, httpstatus.FromCode(c), a.body)
		}
	}
	for _, tc := range []struct {
		code     codes.Code
		msg      string
		rpc      int    // 0: the edge's {"error":…} shape
		wantText string // in the answer's message
	}{
		{codes.InvalidArgument, "Mcp-Session-Id header is required", -32600, "Mcp-Session-Id header is required"},
		{codes.NotFound, "session not found", -32600, "session not found"},
		{codes.Unauthenticated, "Invalid or missing API key", 0, "Invalid or missing API key"},
		{codes.PermissionDenied, "not allowed", 0, "not allowed"},
		{codes.Unimplemented, "unknown method", -32603, "unknown method"},
		{codes.ResourceExhausted, "over the server's rate_limit", ratelimit.JSONRPCCode, "rate_limit"},
		{codes.Unavailable, "connection error: desc = \"transport: Error while dialing\"", -32603, "mcpgateway cannot be reached"},
		{codes.DeadlineExceeded, "context deadline exceeded", -32603, "did not answer in time"},
		{codes.Internal, "internal error (incident 1)", -32603, "internal error (incident 1)"},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			a := send(tc.code, tc.msg)
			if tc.rpc == 0 {
				var m map[string]string
				if err := json.Unmarshal([]byte(a.body), &m); err != nil || m["error"] != tc.wantText {
					t.Fatalf("body %q", a.body)
				}
			} else if code, msg := rpcError(t, a); code != tc.rpc || !strings.Contains(msg, tc.wantText) || strings.Contains(msg, "transport") {
				t.Fatalf("error %d %q", code, msg)
			}
			if (tc.code == codes.ResourceExhausted) != (a.header.Get("Retry-After") != "") {
				t.Errorf("Retry-After %q", a.header.Get("Retry-After"))
			}
		})
	}
}

func TestWrongMethodIs405JSONRPC(t *testing.T) {
	a := do(t, must(http.NewRequestWithContext(t.Context(), "PUT", serve(t, &fakeMCP{}).URL+"/mcp", nil)))
	if code, _ := rpcError(t, a); a.status != http.StatusMethodNotAllowed || code != -32600 || a.header.Get("Allow") != "GET, POST, DELETE" {
		t.Fatalf("answer %+v", a)
	}
}

func must(r *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return r
}

func TestDeleteEndsTheSession(t *testing.T) {
	var ended []string
	var mu sync.Mutex
	f := &fakeMCP{end: func(_ context.Context, req *mcphttp.Request) error {
		mu.Lock()
		defer mu.Unlock()
		if req.SessionID() == "gone" {
			return status.Error(codes.NotFound, "session not found")
		}
		ended = append(ended, req.SessionID())
		return nil
	}}
	srv := serve(t, f)
	req := must(http.NewRequestWithContext(t.Context(), "DELETE", srv.URL+"/mcp", nil))
	req.Header.Set(mcphttp.HeaderSession, "sid-7")
	a := do(t, req)
	mu.Lock()
	got := append([]string(nil), ended...)
	mu.Unlock()
	if a.status != 200 || len(got) != 1 || got[0] != "sid-7" {
		t.Fatalf("DELETE: %+v %v", a, got)
	}
	req = must(http.NewRequestWithContext(t.Context(), "DELETE", srv.URL+"/mcp", nil))
	req.Header.Set(mcphttp.HeaderSession, "gone")
	if a := do(t, req); a.status != 404 {
		t.Fatalf("DELETE of an ended session: %+v", a)
	} else if code, _ := rpcError(t, a); code != -32600 {
		t.Fatalf("code %d", code)
	}
}

// TestGetStreamKeepsAliveAndRelays: GET opens the stream (": stream open"), sends keep-alive
// comments while idle, relays server messages without event ids, passes no Last-Event-ID on
// (resumption is not supported), and ends the Listen call when the client leaves.
func TestGetStreamKeepsAliveAndRelays(t *testing.T) {
	release := make(chan struct{})
	ended := make(chan struct{})
	f := &fakeMCP{listen: func(req *mcphttp.Request, s mcphttp.ListenStream) error {
		defer close(ended)
		if req.SessionID() != "sid-9" {
			return status.Error(codes.NotFound, "session not found")
		}
		if err := s.Open(); err != nil {
			return err
		}
		select {
		case <-release:
		case <-s.Context().Done():
			return nil
		}
		if err := s.Message([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	}}
	srv := serve(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req := must(http.NewRequestWithContext(ctx, "GET", srv.URL+"/mcp", nil))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(mcphttp.HeaderSession, "sid-9")
	req.Header.Set("Last-Event-ID", "e0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET: %d %v", resp.StatusCode, resp.Header)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(want func(string) bool, what string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("stream ended before %s", what)
				}
				if strings.HasPrefix(l, "id:") {
					t.Fatalf("an event id was sent: %q", l)
				}
				if want(l) {
					return
				}
			case <-deadline:
				t.Fatalf("no %s within 5s", what)
			}
		}
	}
	next(func(l string) bool { return l == ": stream open" }, "opening comment")
	next(func(l string) bool { return l == ": keepalive" }, "keep-alive comment")
	close(release)
	next(func(l string) bool { return l == "event: message" }, "event")
	next(func(l string) bool { return l == `data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` }, "message data")
	if _, li, _ := f.seen(); li.SessionID() == "" {
		t.Fatal("Listen got no session id")
	}
	cancel()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("Listen did not end after the client left")
	}
}

func TestGetRefusals(t *testing.T) {
	f := &fakeMCP{listen: func(*mcphttp.Request, mcphttp.ListenStream) error {
		return status.Error(codes.NotFound, "session not found")
	}}
	srv := serve(t, f)
	req := must(http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/mcp", nil))
	req.Header.Set("Accept", "application/json")
	if a := do(t, req); a.status != http.StatusNotAcceptable {
		t.Fatalf("GET accepting JSON only: %+v", a)
	}
	req = must(http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/mcp", nil))
	req.Header.Set("Accept", "text/event-stream")
	a := do(t, req)
	if code, _ := rpcError(t, a); a.status != 404 || code != -32600 {
		t.Fatalf("GET of an unknown session: %+v", a)
	}
}

// TestServerIDFromThePath: on a route with {id} (the edge's /mcp/servers/{id}) POST, GET and
// DELETE pass the id on as server_id; on /mcp it is empty.
func TestServerIDFromThePath(t *testing.T) {
	var ended []string
	var mu sync.Mutex
	f := &fakeMCP{
		exchange: func(_ *mcphttp.Request, s mcphttp.ExchangeStream) error {
			return sendFinal(s, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		},
		listen: func(_ *mcphttp.Request, s mcphttp.ListenStream) error {
			return s.Open()
		},
		end: func(_ context.Context, req *mcphttp.Request) error {
			mu.Lock()
			defer mu.Unlock()
			ended = append(ended, req.ServerID)
			return nil
		},
	}
	srv := serveWith(t, f, time.Second, nil)
	for path, want := range map[string]string{"/mcp": "", "/mcp/servers/everything": "everything"} {
		if a := post(t, srv.URL+path, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, mcphttp.HeaderSession, "s"); a.status != 200 {
			t.Fatalf("POST %s: %+v", path, a)
		}
		ex, _, _ := f.seen()
		if ex.ServerID != want {
			t.Errorf("POST %s: server_id %q, want %q", path, ex.ServerID, want)
		}
		req := must(http.NewRequestWithContext(t.Context(), "GET", srv.URL+path, nil))
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set(mcphttp.HeaderSession, "s")
		ctx, cancel := context.WithCancel(t.Context())
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", path, resp, err)
		}
		cancel()
		resp.Body.Close()
		if _, li, _ := f.seen(); li.ServerID != want {
			t.Errorf("GET %s: server_id %q, want %q", path, li.ServerID, want)
		}
		req = must(http.NewRequestWithContext(t.Context(), "DELETE", srv.URL+path, nil))
		req.Header.Set(mcphttp.HeaderSession, "s")
		if a := do(t, req); a.status != 200 {
			t.Fatalf("DELETE %s: %+v", path, a)
		}
		mu.Lock()
		got := ended[len(ended)-1]
		mu.Unlock()
		if got != want {
			t.Errorf("DELETE %s: server_id %q, want %q", path, got, want)
		}
	}
}

// TestModernRequests: protocol 2026-07-28 at the edge. Its headers reach mcpgateway as sent
// (Mcp-Param-* by lower-case name), an unknown method's answer is 404, a malformed one's 400,
// no session header is sent back, and GET and DELETE are 405 with Allow: POST.
func TestModernRequests(t *testing.T) {
	var reply string
	var replyStatus int
	f := &fakeMCP{
		exchange: func(_ *mcphttp.Request, s mcphttp.ExchangeStream) error {
			return s.Final([]byte(reply), replyStatus)
		},
		listen: func(*mcphttp.Request, mcphttp.ListenStream) error {
			t.Error("a modern GET reached mcpgateway")
			return nil
		},
		end: func(context.Context, *mcphttp.Request) error {
			t.Error("a modern DELETE reached mcpgateway")
			return nil
		},
	}
	url := serve(t, f).URL + "/mcp"
	cases := []struct {
		name   string
		reply  string
		status int
	}{
		{"result", `{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete"}}`, 200},
		{"unknown method", `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}`, 404},
		{"header mismatch", `{"jsonrpc":"2.0","id":3,"error":{"code":-32020,"message":"Header mismatch"}}`, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reply, replyStatus = c.reply, c.status
			a := post(t, url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}`,
				mcphttp.HeaderProtocol, "2026-07-28", "mcp-method", "tools/call", "MCP-NAME", "x", "Mcp-Param-Region", "eu", mcphttp.HeaderSession, "ignored")
			if a.status != c.status || !strings.Contains(a.body, `"id":3`) || a.header.Get(mcphttp.HeaderSession) != "" {
				t.Fatalf("answer %+v, want HTTP %d with the request's id and no session header", a, c.status)
			}
			ex, _, _ := f.seen()
			if ex.Header.Get("Mcp-Method") != "tools/call" || ex.Header.Get("Mcp-Name") != "x" || ex.Header.Get("Mcp-Param-Region") != "eu" || ex.ProtocolVersion() != "2026-07-28" {
				t.Fatalf("mcpgateway was sent %+v", ex)
			}
		})
	}
	for _, method := range []string{"GET", "DELETE"} {
		req := must(http.NewRequestWithContext(t.Context(), method, url, nil))
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set(mcphttp.HeaderProtocol, "2026-07-28")
		a := do(t, req)
		if code, _ := rpcError(t, a); a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "POST" || code != -32600 {
			t.Fatalf("%s in 2026-07-28: %+v", method, a)
		}
	}
}

// TestAdmissionsBeforeTheWork: the transport asks the edge, before mcpgateway reads a
// message, to count what the request line does not show: a batch of n weighs n, a GET stream
// is held open in its session's group, a 2026-07-28 subscriptions/listen POST is held open;
// refused, nothing reaches the endpoints. A batch past mcpbatch.MaxMessages is refused (400)
// before it is read.
func TestAdmissionsBeforeTheWork(t *testing.T) {
	var (
		mu     sync.Mutex
		asked  []string
		refuse bool
	)
	f := &fakeMCP{
		exchange: func(_ *mcphttp.Request, s mcphttp.ExchangeStream) error {
			return sendFinal(s, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		},
		listen: func(_ *mcphttp.Request, s mcphttp.ListenStream) error {
			return s.Open()
		},
	}
	srv := serveWith(t, f, time.Second, func(w http.ResponseWriter, _ *http.Request, a *mcpgatewayv1.Admit) (func(), bool) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, fmt.Sprintf("weight=%d held=%v group=%q", a.GetWeight(), a.GetHeldOpen(), a.GetHoldGroup()))
		if refuse {
			WriteLimited(w, "over", 1000)
			return nil, false
		}
		return func() {}, true
	})
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(asked) == 0 {
			return ""
		}
		return asked[len(asked)-1]
	}
	batch := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+1)
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	if a := post(t, srv.URL+"/mcp", batch(3), mcphttp.HeaderSession, "s"); a.status != 200 || last() != `weight=3 held=false group=""` {
		t.Fatalf("a batch of 3: %+v, asked %q", a, last())
	}
	a := post(t, srv.URL+"/mcp", batch(51), mcphttp.HeaderSession, "s")
	if code, msg := rpcError(t, a); a.status != 400 || code != -32600 || !strings.Contains(msg, "at most 50 messages; this one holds 51") || f.exchangeCount() != 1 {
		t.Fatalf("a batch of 51: %+v (%d exchanges)", a, f.exchangeCount())
	}
	if a := post(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); a.status != 200 || last() != `weight=3 held=false group=""` {
		t.Fatalf("a single request asked for an admission: %+v, asked %q", a, last())
	}
	req := must(http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/mcp", nil))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(mcphttp.HeaderSession, "s9")
	ctx, cancel := context.WithCancel(t.Context())
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil || resp.StatusCode != 200 || last() != `weight=0 held=true group="s9"` {
		t.Fatalf("GET: %v %v, asked %q", resp, err, last())
	}
	cancel()
	resp.Body.Close()
	mu.Lock()
	refuse = true
	mu.Unlock()
	n := f.exchangeCount()
	a = post(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`,
		mcphttp.HeaderProtocol, "2026-07-28", mcphttp.HeaderMethod, "subscriptions/listen")
	if a.status != 429 || last() != `weight=0 held=true group=""` || f.exchangeCount() != n {
		t.Fatalf("a refused subscriptions/listen: %+v, asked %q, %d exchanges (were %d)", a, last(), f.exchangeCount(), n)
	}
	if a := post(t, srv.URL+"/mcp", batch(2)); a.status != 429 || f.exchangeCount() != n {
		t.Fatalf("a refused batch: %+v, %d exchanges (were %d)", a, f.exchangeCount(), n)
	}
}

// TestReplicaDiesAfterTheAnswerStarted: mcpgateway's replica dies after an SSE answer's first
// notification went out: the edge ends the stream with the JSON-RPC error the transport left
// with it (httpexchange.IfBroken), with the request's id, so its client does not wait for an
// answer that cannot come.
func TestReplicaDiesAfterTheAnswerStarted(t *testing.T) {
	f := &fakeMCP{exchange: func(_ *mcphttp.Request, s mcphttp.ExchangeStream) error {
		_ = sendMessage(s, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`)
		<-s.Context().Done()
		return s.Context().Err()
	}}
	srv, stop := serveStoppable(t, f, time.Second, nil)
	req := must(http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":"call-9","method":"tools/call"}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", bothTypes)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first := ""
	for !strings.HasSuffix(first, "\n\n") { // the notification reached the client
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("before the first event: %v (%q)", err, first)
		}
		first += line
	}
	stop() // the replica dies
	rest, _ := io.ReadAll(br)
	want := "event: message\ndata: {\"error\":{\"code\":-32603,\"message\":\"Service Unavailable: mcpgateway failed before answering; the request may have run (a tool call is never sent twice)\"},\"id\":\"call-9\",\"jsonrpc\":\"2.0\"}\n\n"
	if resp.StatusCode != 200 || !strings.Contains(first, "notifications/progress") || string(rest) != want {
		t.Fatalf("answer %d: %q then %q", resp.StatusCode, first, rest)
	}
}
