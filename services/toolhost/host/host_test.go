package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/grpcserve"
	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/testenv"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// peers is scripts/peers/node_modules, installed by `make peers` (npm ci from the lockfile);
// its servers run on node.
func peers(t testing.TB) string {
	t.Helper()
	testenv.Need(t, testenv.Node, "it runs the npm MCP servers")
	return testenv.Need(t, testenv.Peers, "it runs the npm MCP servers")
}

func serverSpec(t testing.TB, id, pkg string, args ...string) *toolhostv1.ServerSpec {
	entry := map[string]string{
		"everything": "@modelcontextprotocol/server-everything/dist/index.js",
		"memory":     "@modelcontextprotocol/server-memory/dist/index.js",
		"filesystem": "@modelcontextprotocol/server-filesystem/dist/index.js",
	}[pkg]
	return &toolhostv1.ServerSpec{Id: id, Command: "node", Args: append([]string{filepath.Join(peers(t), entry)}, args...), TimeoutMs: 30000}
}

func startHostB(t testing.TB) toolhostv1.ToolHostServiceClient { return startHost(t) }

func serverSpecB(t testing.TB) *toolhostv1.ServerSpec {
	return serverSpec(t, "everything", "everything")
}

// testServiceKey is the service key the test tool hosts require.
const testServiceKey = "host-test-service-key-0123456789"

func startHost(t testing.TB) toolhostv1.ToolHostServiceClient {
	t.Helper()
	_, c := startHostAnd(t)
	return c
}

// startHostAnd is startHost that also returns the tool host.
func startHostAnd(t testing.TB, opts ...func(*Config)) (*Host, toolhostv1.ToolHostServiceClient) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.StopGrace = time.Second
	cfg.Keys.Service = testServiceKey
	cfg.ServerUID = "0" // no shim here, and the fixtures lie in root's private temporary directories
	for _, o := range opts {
		o(&cfg)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	h := New(cfg, nil)
	go func() { h.Serve(ctx, lis); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	cc, err := grpcdial.Dial(lis.Addr().String(), testServiceKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return h, toolhostv1.NewToolHostServiceClient(cc)
}

func call(ctx context.Context, c toolhostv1.ToolHostServiceClient, id, tool string, args any) (map[string]any, error) {
	p, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	r, err := c.Call(ctx, &toolhostv1.CallRequest{Id: id, Method: "tools/call", Params: p})
	if err != nil {
		return nil, err
	}
	if e := r.GetError(); e != nil {
		return nil, fmt.Errorf("JSON-RPC %d: %s", e.GetCode(), e.GetMessage())
	}
	var m map[string]any
	err = json.Unmarshal(r.GetResult(), &m) // before m is read: Go leaves the order of a return's operands open
	return m, err
}

func text(m map[string]any) string {
	c, _ := m["content"].([]any)
	if len(c) == 0 {
		return ""
	}
	s, _ := c[0].(map[string]any)["text"].(string)
	return s
}

func TestServerEverythingConcurrentEcho(t *testing.T) {
	c := startHost(t)
	st, err := c.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: serverSpec(t, "everything", "everything")})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetStatus().GetProtocolVersion() != "2025-11-25" {
		t.Fatalf("status %v", st.GetStatus())
	}
	tools, err := c.ListTools(t.Context(), &toolhostv1.ListToolsRequest{Id: "everything"})
	if err != nil || len(tools.GetTools()) < 13 {
		t.Fatalf("tools: %d %v", len(tools.GetTools()), err)
	}
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				want := fmt.Sprintf("g%d-%d", g, i)
				res, err := call(t.Context(), c, "everything", "echo", map[string]any{"message": want})
				if err != nil || text(res) != "Echo: "+want {
					t.Errorf("echo %s: %q %v", want, text(res), err)
				}
			}
		}()
	}
	wg.Wait()
	res, err := call(t.Context(), c, "everything", "get-sum", map[string]any{"a": 2, "b": 40})
	if err != nil || !strings.Contains(text(res), "42") {
		t.Fatalf("get-sum: %v %v", res, err)
	}
}

func TestServerMemoryAndFilesystem(t *testing.T) {
	c := startHost(t)
	mem := serverSpec(t, "memory", "memory")
	mem.Env = map[string]string{"MEMORY_FILE_PATH": "${TOOLHOST_TEST_MEMORY_FILE}"}
	t.Setenv("TOOLHOST_TEST_MEMORY_FILE", filepath.Join(t.TempDir(), "memory.jsonl"))
	if _, err := c.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: mem}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t.Context(), c, "memory", "create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "zest", "entityType": "project", "observations": []any{"an MCP gateway"}}}}); err != nil {
		t.Fatal(err)
	}
	res, err := call(t.Context(), c, "memory", "read_graph", map[string]any{})
	if err != nil || !strings.Contains(text(res), "an MCP gateway") {
		t.Fatalf("read_graph: %v %v", res, err)
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hi"), 0o644)
	if _, err := c.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: serverSpec(t, "fs", "filesystem", dir)}); err != nil {
		t.Fatal(err)
	}
	res, err = call(t.Context(), c, "fs", "list_directory", map[string]any{"path": dir})
	if err != nil || !strings.Contains(text(res), "hello.txt") {
		t.Fatalf("list_directory: %v %v", res, err)
	}
}

func TestErrorCodes(t *testing.T) {
	c := startHost(t)
	cases := []struct {
		name string
		spec *toolhostv1.ServerSpec
		code codes.Code
		text string
	}{
		{"raw secret", &toolhostv1.ServerSpec{Id: "a", Command: "node", Env: map[string]string{"TOKEN": "abc"}}, codes.InvalidArgument, "env TOKEN must be a ${VARIABLE} reference; raw values are rejected"},
		{"missing variable", &toolhostv1.ServerSpec{Id: "a", Command: "node", Env: map[string]string{"TOKEN": "${TOOLHOST_SURELY_UNSET_VAR}"}}, codes.FailedPrecondition, "Required MCP environment variable is not set: TOOLHOST_SURELY_UNSET_VAR"},
		{"reserved variable", &toolhostv1.ServerSpec{Id: "a", Command: "node", Env: map[string]string{"TOKEN": "${ZEST_SERVICE_KEY}"}}, codes.InvalidArgument, "env TOKEN refers to ${ZEST_SERVICE_KEY}, a variable reserved for Zest's own services"},
		{"no such command", &toolhostv1.ServerSpec{Id: "a", Command: "/nonexistent/server"}, codes.FailedPrecondition, "no such file or directory"},
		{"bad id", &toolhostv1.ServerSpec{Id: "a b", Command: "node"}, codes.InvalidArgument, "id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: tc.spec})
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.text) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.code, tc.text)
			}
		})
	}
	if _, err := call(t.Context(), c, "nobody", "echo", nil); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown server: %v", err)
	}
}

// TestCallStreamRelaysProgress: server-everything's trigger-long-running-operation reports
// progress against the caller's own token.
func TestCallStreamRelaysProgress(t *testing.T) {
	c := startHost(t)
	if _, err := c.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: serverSpec(t, "everything", "everything")}); err != nil {
		t.Fatal(err)
	}
	p := []byte(`{"name":"trigger-long-running-operation","arguments":{"duration":0.3,"steps":3},"_meta":{"progressToken":"mine-42"}}`)
	stream, err := c.CallStream(t.Context(), &toolhostv1.CallStreamRequest{Call: &toolhostv1.CallRequest{Id: "everything", Method: "tools/call", Params: p}})
	if err != nil {
		t.Fatal(err)
	}
	var notes int
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := r.GetNotification(); n != nil {
			if !strings.Contains(string(n), `"progressToken":"mine-42"`) {
				t.Fatalf("progress with a foreign token: %s", n)
			}
			notes++
		}
		if a := r.GetAnswer(); a != nil && a.GetResult() == nil {
			t.Fatalf("answer %v", a)
		}
	}
	if notes != 3 {
		t.Fatalf("got %d progress notifications, want 3", notes)
	}
}

// TestPrettyPrintedArgumentsReachTheServer: arguments pretty-printed by a client are sent on
// one line; params that are not JSON, and an empty method, are refused with INVALID_ARGUMENT,
// not written.
func TestPrettyPrintedArgumentsReachTheServer(t *testing.T) {
	c := startHost(t)
	if _, err := c.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: serverSpec(t, "everything", "everything")}); err != nil {
		t.Fatal(err)
	}
	p, _ := json.MarshalIndent(map[string]any{"name": "echo", "arguments": map[string]any{"message": "pretty"}}, "", "    ")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := c.Call(ctx, &toolhostv1.CallRequest{Id: "everything", Method: "tools/call", Params: p})
	if err != nil || !strings.Contains(string(r.GetResult()), "Echo: pretty") {
		t.Fatalf("pretty-printed arguments: %v %v", r, err)
	}
	_, err = c.Call(ctx, &toolhostv1.CallRequest{Id: "everything", Method: "tools/call", Params: []byte(`{"name":"echo","arguments":`)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "params are not valid JSON") {
		t.Fatalf("invalid params: %v", err)
	}
	_, err = c.Call(ctx, &toolhostv1.CallRequest{Id: "everything", Params: p})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "the method is empty") {
		t.Fatalf("empty method: %v", err)
	}
}

// TestDescribe: the tool host tells its name (as configured), version and process.
func TestDescribe(t *testing.T) {
	c := startHost(t)
	r, err := c.Describe(t.Context(), &toolhostv1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.Hostname()
	if r.GetName() != want || r.GetPid() != int32(os.Getpid()) || r.GetVersion() == "" || r.GetStartTime().AsTime().After(time.Now()) {
		t.Fatalf("describe = %v, want name %q and this process", r, want)
	}
	if _, err := c.Stop(t.Context(), &toolhostv1.StopRequest{Id: "a", DrainMs: 300001}); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "drain_ms 300001: want 0 to 300000") {
		t.Fatalf("drain beyond the limit: %v", err)
	}
}

// TestStreamWorkers: the tool host keeps StreamWorkers goroutines to run calls, fewer than
// the other services' grpcserve.StreamWorkers (see StreamWorkers for why).
func TestStreamWorkers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Keys.Service = testServiceKey
	got := make(chan int, 1)
	go func() { // a goroutine of its own, so that its workers are told from any others
		id := grpctest.GoroutineID()
		h := New(cfg, slog.New(slog.DiscardHandler))
		got <- grpctest.WorkersStartedBy(id)
		h.srv.GRPC.Stop()
	}()
	if n := <-got; n != StreamWorkers || n >= grpcserve.StreamWorkers {
		t.Fatalf("%d workers, want StreamWorkers (%d), fewer than grpcserve's %d", n, StreamWorkers, grpcserve.StreamWorkers)
	}
}
