package edge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/httpexchange"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/logging"
	"github.com/zestmcp/zest/lib/requestid"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

const adminKey = "admin-key-for-tests"

// fakeAdmin is AdminService: DeleteServer knows no server, ListServers lists none (or
// refuses the key when unauthenticated is set); it records the metadata of each call.
type fakeAdmin struct {
	mcpgatewayv1.UnimplementedAdminServiceServer
	mu              sync.Mutex
	md              []metadata.MD
	unauthenticated bool
	tools           *mcpgatewayv1.ListToolsResponse
	edgeChanges     []*mcpgatewayv1.RecordEdgeChangeRequest
	failRecord      error
}

func (f *fakeAdmin) setTools(r *mcpgatewayv1.ListToolsResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tools = r
}

func (f *fakeAdmin) setUnauthenticated() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unauthenticated = true
}

// ListTools answers the tools set by setTools (or refuses the key when unauthenticated is set).
func (f *fakeAdmin) ListTools(ctx context.Context, _ *mcpgatewayv1.ListToolsRequest) (*mcpgatewayv1.ListToolsResponse, error) {
	f.record(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unauthenticated {
		return nil, status.Error(codes.Unauthenticated, "Invalid or missing admin API key")
	}
	return f.tools, nil
}

func (f *fakeAdmin) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.md = append(f.md, md)
}

func (f *fakeAdmin) calls() []metadata.MD {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]metadata.MD(nil), f.md...)
}

func (f *fakeAdmin) ListServers(ctx context.Context, _ *mcpgatewayv1.ListServersRequest) (*mcpgatewayv1.ListServersResponse, error) {
	f.record(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unauthenticated {
		return nil, status.Error(codes.Unauthenticated, "Invalid or missing admin API key")
	}
	return &mcpgatewayv1.ListServersResponse{}, nil
}

// RecordEdgeChange records the change it is told of (edgeChanges), or fails with failRecord.
func (f *fakeAdmin) RecordEdgeChange(ctx context.Context, req *mcpgatewayv1.RecordEdgeChangeRequest) (*mcpgatewayv1.RecordEdgeChangeResponse, error) {
	f.record(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failRecord != nil {
		return nil, f.failRecord
	}
	f.edgeChanges = append(f.edgeChanges, req)
	return &mcpgatewayv1.RecordEdgeChangeResponse{}, nil
}

func (f *fakeAdmin) recorded() []*mcpgatewayv1.RecordEdgeChangeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*mcpgatewayv1.RecordEdgeChangeRequest(nil), f.edgeChanges...)
}

func (f *fakeAdmin) DeleteServer(ctx context.Context, req *mcpgatewayv1.DeleteServerRequest) (*mcpgatewayv1.DeleteServerResponse, error) {
	f.record(ctx)
	return nil, status.Errorf(codes.NotFound, "MCP server %s is not registered", req.GetId())
}

func (f *fakeAdmin) UpsertServer(ctx context.Context, _ *mcpgatewayv1.UpsertServerRequest) (*mcpgatewayv1.UpsertServerResponse, error) {
	f.record(ctx)
	return nil, status.Error(codes.Internal, "the fake stores nothing")
}

// CallTool refuses "hidden" as mcpgateway refuses a tool its server's filters do not expose
// (FailedPrecondition with the TOOL_FILTERED ErrorInfo), and everything else as it refuses a
// disabled server (FailedPrecondition with SERVER_DISABLED).
func (f *fakeAdmin) CallTool(ctx context.Context, req *mcpgatewayv1.CallToolRequest) (*mcpgatewayv1.CallToolResponse, error) {
	f.record(ctx)
	if req.GetName() == "busy" { // as mcpgateway refuses a server over its rate_limit
		st, err := status.New(codes.ResourceExhausted, `MCP server "s" is over its rate_limit`).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	if req.GetName() != "hidden" {
		st, err := status.New(codes.FailedPrecondition, fmt.Sprintf("MCP server %q is disabled: enable it", req.GetId())).WithDetails(&errdetails.ErrorInfo{
			Reason: mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_SERVER_DISABLED.String(), Domain: "zest.mcpgateway.v1",
		})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	st, err := status.New(codes.FailedPrecondition, `tool "hidden" of server "s" is filtered out: it matches tools_deny pattern "h*"`).WithDetails(&errdetails.ErrorInfo{
		Reason: mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_TOOL_FILTERED.String(), Domain: "zest.mcpgateway.v1",
	})
	if err != nil {
		return nil, err
	}
	return nil, st.Err()
}

// fakeMCP is mcpgateway's end of the HTTP exchange (httpexchange.NewServer serves it): it
// asks for the admissions mcpgateway's transport asks for — a GET or a subscriptions/listen
// POST is held open (a GET in its session's group), a batch of n weighs n — and, once
// admitted, counts the request and answers with exchange; refuse, when set, refuses the
// call itself (mcpgateway's key check).
type fakeMCP struct {
	mcpgatewayv1.UnimplementedHttpServiceServer
	mu        sync.Mutex
	exchange  http.HandlerFunc
	refuse    error
	exchanges int
}

func (f *fakeMCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	a := &mcpgatewayv1.Admit{HeldOpen: r.Method == http.MethodGet || r.Header.Get("Mcp-Method") == "subscriptions/listen"}
	if r.Method == http.MethodGet {
		a.HoldGroup = r.Header.Get("Mcp-Session-Id")
	}
	var batch []json.RawMessage
	if json.Unmarshal(body, &batch) == nil {
		a.Weight = int32(len(batch))
	}
	if (a.HeldOpen || a.Weight > 1) && !httpexchange.Admit(r, a) {
		return
	}
	f.mu.Lock()
	f.exchanges++
	exchange := f.exchange
	f.mu.Unlock()
	exchange(w, r)
}

// Exchange is HttpService's, refused when refuse is set.
func (f *fakeMCP) Exchange(s mcpgatewayv1.HttpService_ExchangeServer) error {
	f.mu.Lock()
	refuse := f.refuse
	f.mu.Unlock()
	if refuse != nil {
		return refuse
	}
	return httpexchange.NewServer(f).Exchange(s)
}

func (f *fakeMCP) setExchange(x http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exchange = x
}

func (f *fakeMCP) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.exchanges
}

// answerJSON answers a request with one JSON-RPC result, as mcpgateway does, and holds a GET
// open.
func answerJSON(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, ": stream open\n\n")
		w.(http.Flusher).Flush() // as mcpgateway's streams do: a handler holds what it wrote until it flushes
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
}

// fakeInference is InferenceService: ListModels refuses the key.
type fakeInference struct {
	inferencev1.UnimplementedInferenceServiceServer
}

func (fakeInference) ListModels(context.Context, *inferencev1.ListModelsRequest) (*inferencev1.ListModelsResponse, error) {
	return nil, status.Error(codes.Unauthenticated, "Invalid or missing API key")
}

// fakeOptions is ModelOptionsService: it knows the model "far-llm" (engine openai), no other.
type fakeOptions struct {
	inferencev1.UnimplementedModelOptionsServiceServer
}

func (fakeOptions) GetModelOptions(_ context.Context, in *inferencev1.GetModelOptionsRequest) (*inferencev1.GetModelOptionsResponse, error) {
	if in.GetId() != "far-llm" {
		return nil, status.Errorf(codes.NotFound, "model %q not found", in.GetId())
	}
	opts, _ := structpb.NewStruct(map[string]any{"upstream_model": "qwen", "max_concurrency": 3})
	return &inferencev1.GetModelOptionsResponse{Id: "far-llm", Engine: "openai", Options: opts, Defaults: &structpb.Struct{}}, nil
}

// lockedBuffer is the log the edge writes while the test reads it. Each record (slog writes
// one per Write) signals wrote, which holds one pending signal: a reader that checks the
// lines after each signal misses none.
type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func newLockedBuffer() *lockedBuffer { return &lockedBuffer{wrote: make(chan struct{}, 1)} }

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.b.Write(p)
	select {
	case l.wrote <- struct{}{}:
	default: // a signal is pending already
	}
	return n, err
}

// lines returns the JSON log lines written so far.
func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		out = append(out, m)
	}
	return out
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type testEdge struct {
	url, addr string
	log       *lockedBuffer
	admin     *fakeAdmin
	mcp       *fakeMCP
	toolhost  *health.Server
}

// startEdge serves an edge on a loopback port in front of fake services on in-process gRPC
// servers (mcpgateway: AdminService and HttpService; inference; tool host: health only), with
// the admin key set and JSON logs at info.
func startEdge(t *testing.T, configure func(*Config)) *testEdge {
	t.Helper()
	te := &testEdge{log: newLockedBuffer(), admin: &fakeAdmin{}, mcp: &fakeMCP{exchange: answerJSON}, toolhost: health.NewServer()}
	withHealth := func(h *health.Server, register func(*grpc.Server)) func(*grpc.Server) {
		return func(s *grpc.Server) {
			healthpb.RegisterHealthServer(s, h)
			register(s)
		}
	}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Keys = keyauth.Keys{Admin: adminKey}
	cfg.AllowedOrigins = nil
	cfg.McpgatewayAddr = grpctest.Listen(t, withHealth(health.NewServer(), func(s *grpc.Server) {
		mcpgatewayv1.RegisterAdminServiceServer(s, te.admin)
		mcpgatewayv1.RegisterHttpServiceServer(s, te.mcp)
	}))
	cfg.InferenceAddr = grpctest.Listen(t, withHealth(health.NewServer(), func(s *grpc.Server) {
		inferencev1.RegisterInferenceServiceServer(s, fakeInference{})
		inferencev1.RegisterModelOptionsServiceServer(s, fakeOptions{})
	}))
	cfg.ToolhostAddr = grpctest.Listen(t, withHealth(te.toolhost, func(*grpc.Server) {}))
	if configure != nil {
		configure(&cfg)
	}
	log, err := logging.New(te.log, "zest-gateway", "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	te.addr = lis.Addr().String()
	te.url = "http://" + te.addr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("the edge did not stop")
		}
	})
	return te
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(a.body), &m); err != nil {
		t.Fatalf("body is not a JSON object (%d): %q", a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	return m
}

// do sends a request; headers are name, value pairs.
func do(t *testing.T, method, url, body string, headers ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
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

// shape names the error shape of a body: "lemonade" {"error":"…"}, "openai"
// {"error":{"message","type","param","code"}}, "admin" {"error":{"message","type":
// "mcp_client_error","status_code"}}, "jsonrpc".
func shape(t *testing.T, a answer) string {
	t.Helper()
	m := a.json(t)
	switch e := m["error"].(type) {
	case string:
		return "lemonade"
	case map[string]any:
		switch {
		case m["jsonrpc"] == "2.0" && e["code"] != nil:
			return "jsonrpc"
		case e["type"] == "mcp_client_error" && e["status_code"] == float64(a.status):
			return "admin"
		case e["type"] != nil && e["message"] != nil:
			if _, ok := e["param"]; ok {
				return "openai"
			}
		}
	}
	t.Fatalf("unknown error shape: %s", a.body)
	return ""
}

func TestRoutingAnswersJSONInTheFamilyShape(t *testing.T) {
	te := startEdge(t, nil)
	auth := []string{"Authorization", "Bearer " + adminKey}
	for _, tc := range []struct {
		method, path string
		status       int
		shape        string
	}{
		{"GET", "/nope", 404, "lemonade"},
		{"GET", "/index.html", 404, "lemonade"}, // the console is / and /ui/…
		{"POST", "/live", 405, "lemonade"},
		{"GET", "/api/v1/nope", 404, "openai"},
		{"GET", "/api/v1", 404, "openai"},
		{"POST", "/v0/models/x/y", 404, "openai"},
		{"GET", "/v1/", 404, "openai"},
		{"POST", "/api/v0/health", 405, "lemonade"}, // as the OpenAI routes answer a wrong method
		{"GET", "/internal/mcp/nope", 404, "admin"},
		{"GET", "/internal/mcp", 404, "admin"},
		{"PUT", "/internal/mcp/servers", 405, "admin"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			a := do(t, tc.method, te.url+tc.path, "", auth...)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			if got := shape(t, a); got != tc.shape {
				t.Fatalf("shape %s, want %s: %s", got, tc.shape, a.body)
			}
			if !requestid.Valid(a.header.Get(requestid.Header)) {
				t.Fatalf("no request id: %v", a.header)
			}
		})
	}
	// Under /mcp every path is mcpgateway's (the HTTP+SSE transport's <endpoint>/sse and
	// <endpoint>/message, and its own 404 for the rest): the edge passes each on.
	te.mcp.setExchange(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"No route for `+r.Method+` `+r.URL.Path+`"}}`)
	})
	before := te.mcp.count()
	for _, path := range []string{"/mcp/nope", "/mcp/servers/x/tools", "/mcp/servers/x/sse"} {
		if a := do(t, "POST", te.url+path, "{}", auth...); a.status != 404 || shape(t, a) != "jsonrpc" || !strings.Contains(a.body, path) {
			t.Errorf("POST %s: %d %s", path, a.status, a.body)
		}
	}
	if n := te.mcp.count() - before; n != 3 {
		t.Errorf("%d of 3 requests under /mcp reached mcpgateway", n)
	}
	if a := do(t, "GET", te.url+"/live", ""); a.status != 200 || a.json(t)["status"] != "ok" {
		t.Fatalf("/live: %+v", a)
	}
	// The console: served without a key (it asks for one), with its CSP.
	if a := do(t, "GET", te.url+"/", ""); a.status != 200 || a.header.Get("Content-Security-Policy") == "" || !strings.Contains(a.body, "Zest console") {
		t.Fatalf("GET /: %d %v", a.status, a.header)
	}
}

func TestHealthReportsEachService(t *testing.T) {
	te := startEdge(t, nil)
	a := do(t, "GET", te.url+"/api/v1/health", "")
	m := a.json(t)
	svc, _ := m["services"].(map[string]any)
	if a.status != 200 || m["status"] != "ok" || svc["mcpgateway"] != "SERVING" || svc["inference"] != "SERVING" || svc["toolhost"] != "SERVING" {
		t.Fatalf("health: %d %s", a.status, a.body)
	}
	te.toolhost.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	a = do(t, "GET", te.url+"/v1/health", "")
	m = a.json(t)
	if a.status != http.StatusServiceUnavailable || m["status"] != "degraded" || m["services"].(map[string]any)["toolhost"] != "NOT_SERVING" {
		t.Fatalf("health with the tool host down: %d %s", a.status, a.body)
	}
}

// TestEvery401CarriesBearer: the edge's own key refusals and the 401s relayed from a
// service (admin, OpenAI, MCP) all carry WWW-Authenticate: Bearer and a JSON body (the root
// handler adds the header, one place for every 401); a 403 carries no challenge.
func TestEvery401CarriesBearer(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.Keys.API = "api-key" })
	te.admin.mu.Lock()
	te.admin.unauthenticated = true
	te.admin.mu.Unlock()
	te.mcp.mu.Lock()
	te.mcp.refuse = status.Error(codes.Unauthenticated, "Invalid or missing API key")
	te.mcp.mu.Unlock()
	mcpHeaders := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	for name, a := range map[string]answer{
		"API key missing":             do(t, "POST", te.url+"/mcp", "{}"),
		"API key wrong":               do(t, "GET", te.url+"/api/v1/models", "", "Authorization", "Bearer wrong"),
		"Basic credentials":           do(t, "GET", te.url+"/api/v1/models", "", "Authorization", "Basic YXBpLWtleQ=="),
		"admin key wrong":             do(t, "GET", te.url+"/internal/mcp/servers", "", "Authorization", "Bearer api-key"),
		"admin service refuses":       do(t, "GET", te.url+"/internal/mcp/servers", "", "Authorization", "Bearer "+adminKey),
		"inference service refuses":   do(t, "GET", te.url+"/api/v1/models", "", "Authorization", "Bearer api-key"),
		"mcpgateway refuses":          do(t, "POST", te.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, append(mcpHeaders, "Authorization", "Bearer api-key")...),
		"unknown OpenAI route no key": do(t, "GET", te.url+"/api/v1/nope", ""),
	} {
		if a.status != 401 || a.header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s: %d %v %s", name, a.status, a.header, a.body)
			continue
		}
		// Each in its family's shape: a JSON-RPC error on /mcp, whoever refused the key.
		if mcp := strings.HasPrefix(name, "API key missing") || strings.HasPrefix(name, "mcpgateway"); mcp != (a.json(t)["jsonrpc"] == "2.0") {
			t.Errorf("%s: not in its family's shape: %s", name, a.body)
		}
	}
	if a := do(t, "POST", te.url+"/mcp", "{}", "Origin", "https://evil.example"); a.status != 403 || a.header.Get("WWW-Authenticate") != "" {
		t.Errorf("a refused origin: %d %v", a.status, a.header)
	}
}

// TestBodyOverTheLimitIs413InTheFamilyShape: a declared length over the limit is refused
// before any service sees it, in the shape of its route's family.
func TestBodyOverTheLimitIs413InTheFamilyShape(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.MaxBodyBytes, c.MaxAdminBodyBytes = 2048, 1024 })
	big := `{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("a", 3000) + `"}`
	for _, c := range []struct {
		path, shape, limit string
		headers            []string
	}{
		{"/mcp", "jsonrpc", "2 KiB", []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}},
		{"/api/v1/chat/completions", "openai", "2 KiB", []string{"Content-Type", "application/json"}},
		{"/internal/mcp/servers", "admin", "1 KiB", []string{"Content-Type", "application/json", "Authorization", "Bearer " + adminKey}},
	} {
		a := do(t, "POST", te.url+c.path, big, c.headers...)
		if a.status != 413 || shape(t, a) != c.shape || !strings.Contains(a.body, "the limit is "+c.limit) {
			t.Errorf("%s: %d %s", c.path, a.status, a.body)
		}
	}
	if te.mcp.count() != 0 || len(te.admin.calls()) != 0 {
		t.Fatal("a body over the limit reached mcpgateway")
	}
}

// TestToolFilteredIs400: tools/call of a tool its server's filters do not expose is 400 with
// mcpgateway's message; a disabled server there is 409 (a state of its configuration).
func TestToolFilteredIs400(t *testing.T) {
	te := startEdge(t, nil)
	for name, c := range map[string]struct {
		status int
		msg    string
	}{
		"hidden":  {400, `tool "hidden" of server "s" is filtered out: it matches tools_deny pattern "h*"`},
		"visible": {409, `"s" is disabled: enable it`},
	} {
		a := do(t, "POST", te.url+"/internal/mcp/servers/s/tools/call", `{"name":"`+name+`"}`, "Authorization", "Bearer "+adminKey, "Content-Type", "application/json")
		msg, _ := a.json(t)["error"].(map[string]any)["message"].(string)
		if a.status != c.status || shape(t, a) != "admin" || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %s, want %d with %q", name, a.status, a.body, c.status, c.msg)
		}
	}
}

// TestAdminBodyThatIsNotJSONQuotesNoDecoder: a body grpc-gateway cannot decode is a 400
// whose message says what the body must be, not protojson's text.
func TestAdminBodyThatIsNotJSONQuotesNoDecoder(t *testing.T) {
	te := startEdge(t, nil)
	for _, body := range []string{`{not json`, `["a"]`, `"x"`} {
		a := do(t, "POST", te.url+"/internal/mcp/servers", body, "Authorization", "Bearer "+adminKey, "Content-Type", "application/json")
		msg, _ := a.json(t)["error"].(map[string]any)["message"].(string)
		if a.status != 400 || shape(t, a) != "admin" || !strings.Contains(msg, "the body must be a JSON object such as") ||
			strings.Contains(msg, "proto") || strings.Contains(msg, "json:") {
			t.Errorf("body %s: %d %s", body, a.status, a.body)
		}
	}
}

// TestRequestID: a valid client id is kept, anything else replaced; the id is on every
// answer (errors included), in the access line, and in the metadata of the admin call.
func TestRequestID(t *testing.T) {
	te := startEdge(t, nil)
	auth := []string{"Authorization", "Bearer " + adminKey}

	a := do(t, "DELETE", te.url+"/internal/mcp/servers/abc-123", "", append(auth, "X-Request-Id", "client-id.42:x_y")...)
	if a.status != 404 || a.header.Get(requestid.Header) != "client-id.42:x_y" {
		t.Fatalf("kept id: %d %v", a.status, a.header)
	}
	calls := te.admin.calls()
	if got := calls[len(calls)-1].Get(requestid.MetadataKey); len(got) != 1 || got[0] != "client-id.42:x_y" {
		t.Fatalf("x-request-id metadata of the admin call: %v", got)
	}
	line := waitForLine(t, te.log, func(m map[string]any) bool { return m["request_id"] == "client-id.42:x_y" })
	if line["msg"] != "http request" || line["method"] != "DELETE" || line["route"] != "/internal/mcp/servers/{id}" ||
		line["status"] != float64(404) || line["bytes"].(float64) <= 0 || line["duration_ms"] == nil {
		t.Fatalf("access line %v", line)
	}

	for _, bad := range []string{"", "has space", strings.Repeat("a", 129), "q\"uote", "é"} {
		a := do(t, "GET", te.url+"/nope", "", "X-Request-Id", bad)
		got := a.header.Get(requestid.Header)
		if !requestid.Valid(got) || got == bad {
			t.Errorf("client id %q: answered with %q", bad, got)
		}
	}
	a = do(t, "POST", te.url+"/mcp", "{}", "Origin", "https://evil.example") // refused by a guard
	if a.status != 403 || !requestid.Valid(a.header.Get(requestid.Header)) {
		t.Fatalf("a guard's refusal: %d %v", a.status, a.header)
	}
}

// waitForLine returns the first access line match accepts, looking again each time the edge
// logs a record, for up to 5 s.
func waitForLine(t *testing.T, log *lockedBuffer, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		for _, l := range log.lines(t) {
			if l["msg"] == "http request" && match(l) {
				return l
			}
		}
		select {
		case <-log.wrote:
		case <-deadline:
			t.Fatalf("no such access line within 5s; log:\n%s", log.String())
		}
	}
}

// TestAccessLog: one line per request with the route pattern (the path only when no route
// matched); never a key; an SSE stream is logged once, when it ends.
func TestAccessLog(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.Keys.API = "secret-api-key" })
	do(t, "GET", te.url+"/api/v1/health", "", "Authorization", "Bearer secret-api-key", "X-Request-Id", "r-health")
	do(t, "GET", te.url+"/no/such/path", "", "X-Request-Id", "r-none")
	for id, want := range map[string][2]string{"r-health": {"/api/v1/health", ""}, "r-none": {"", "/no/such/path"}} {
		l := waitForLine(t, te.log, func(m map[string]any) bool { return m["request_id"] == id })
		path, _ := l["path"].(string)
		if l["route"] != want[0] || path != want[1] {
			t.Errorf("%s: route %v path %v", id, l["route"], l["path"])
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", te.url+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer secret-api-key")
	req.Header.Set("Mcp-Session-Id", "sid")
	req.Header.Set("X-Request-Id", "r-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if first, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || first != ": stream open\n" {
		t.Fatalf("stream: %q %v", first, err)
	}
	if strings.Contains(te.log.String(), "r-stream") {
		t.Fatal("the stream was logged while it was open")
	}
	cancel()
	resp.Body.Close()
	l := waitForLine(t, te.log, func(m map[string]any) bool { return m["request_id"] == "r-stream" })
	if l["route"] != "/mcp" || l["status"] != float64(200) || l["bytes"].(float64) < float64(len(": stream open\n\n")) {
		t.Fatalf("stream line %v", l)
	}
	n := 0
	for _, l := range te.log.lines(t) {
		if l["request_id"] == "r-stream" && l["msg"] == "http request" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d access lines for one stream", n)
	}
	if strings.Contains(te.log.String(), "secret-api-key") || strings.Contains(strings.ToLower(te.log.String()), "authorization") {
		t.Fatalf("the log holds the key:\n%s", te.log.String())
	}
}

// rawRequest opens a connection and writes a request's head, declaring a body of n bytes.
func rawRequest(t *testing.T, addr, method, path string, n int, headers ...string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
	if n >= 0 {
		head += "Content-Length: " + strconv.Itoa(n) + "\r\n"
	}
	for _, h := range headers {
		head += h + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// dribble writes the start of a JSON body, then one more byte of it every interval until the
// connection fails or stop closes: a client that keeps a connection busy without ever
// finishing its body (the body stays valid JSON so far, so no decoder gives up early).
func dribble(c net.Conn, interval time.Duration, stop <-chan struct{}) {
	if _, err := io.WriteString(c, `{"name":"`); err != nil {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}
}

// TestSlowBodyGets408AndItsConnectionCloses: a body that dribbles in slower than
// BodyReadTimeout is answered 408 in its route's shape, with the request id, and the
// server closes the connection; the handler never sees the body.
func TestSlowBodyGets408AndItsConnectionCloses(t *testing.T) {
	const timeout = 300 * time.Millisecond
	te := startEdge(t, func(c *Config) { c.BodyReadTimeout = timeout })
	for _, tc := range []struct {
		path, shape string
		headers     []string
	}{
		{"/mcp", "jsonrpc", []string{"Accept: application/json, text/event-stream"}},
		{"/internal/mcp/servers", "admin", []string{"Authorization: Bearer " + adminKey}},
		{"/api/v1/chat/completions", "openai", nil},
	} {
		t.Run(tc.path, func(t *testing.T) {
			start := time.Now()
			c := rawRequest(t, te.addr, "POST", tc.path, 1000, append(tc.headers, "X-Request-Id: slow-1")...)
			stop := make(chan struct{})
			defer close(stop)
			go dribble(c, 50*time.Millisecond, stop)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			elapsed := time.Since(start)
			t.Logf("answered after %v", elapsed)
			a := answer{resp.StatusCode, resp.Header, string(body)}
			if a.status != http.StatusRequestTimeout || shape(t, a) != tc.shape || a.header.Get(requestid.Header) != "slow-1" {
				t.Fatalf("answer %d %v %s", a.status, a.header, a.body)
			}
			if elapsed < timeout || elapsed > 5*time.Second {
				t.Fatalf("answered after %v, timeout %v", elapsed, timeout)
			}
			// The server closes the connection: the next read ends (EOF or reset), not times out.
			_, err = br.ReadByte()
			var ne net.Error
			if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
				t.Fatalf("the connection stayed open: %v", err)
			}
			t.Logf("closed after %v: %v", time.Since(start), err)
		})
	}
	if te.mcp.count() != 0 {
		t.Fatal("a slow body reached mcpgateway")
	}
}

// TestResponseOutlivesTheBodyDeadline: once the body is read, the deadline is lifted; an SSE
// answer that goes on well past BodyReadTimeout is not cut, and a GET stream (no body) is
// never bounded.
func TestResponseOutlivesTheBodyDeadline(t *testing.T) {
	const timeout = 200 * time.Millisecond
	te := startEdge(t, func(c *Config) { c.BodyReadTimeout = timeout })
	te.mcp.setExchange(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n")
		w.(http.Flusher).Flush()
		// The subject of the test is time passing: the answer ends well after the deadline
		// the body had, with a line every quarter of it.
		tick := time.NewTicker(timeout / 4)
		defer tick.Stop()
		var end <-chan time.Time // a GET stream goes on until its client leaves
		if r.Method == http.MethodPost {
			end = time.After(4 * timeout)
		}
		for {
			select {
			case <-tick.C:
				_, _ = io.WriteString(w, ": keepalive\n\n")
				w.(http.Flusher).Flush()
				continue
			case <-end:
			case <-r.Context().Done():
				return
			}
			break
		}
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"done\":true}}\n\n")
	})
	start := time.Now()
	a := do(t, "POST", te.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`,
		"Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	if a.status != 200 || !strings.Contains(a.body, `"done":true`) || time.Since(start) < 4*timeout {
		t.Fatalf("answer after %v: %d %q", time.Since(start), a.status, a.body)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", te.url+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	until := time.Now().Add(4 * timeout)
	for time.Now().Before(until) { // keep-alive comments go on past the body deadline
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("the GET stream ended after %v: %v", time.Since(until.Add(-4*timeout)), err)
		}
	}
}

// TestIdleKeepAliveConnectionsClose: a keep-alive connection with no next request is closed
// after IdleTimeout.
func TestIdleKeepAliveConnectionsClose(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
	c := rawRequest(t, te.addr, "GET", "/live", -1)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /live: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	start := time.Now()
	_, err = br.ReadByte()
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) || time.Since(start) > 5*time.Second {
		t.Fatalf("idle connection: %v after %v", err, time.Since(start))
	}
}
