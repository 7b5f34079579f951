package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestTypedAdminOverGRPC: a program registers a server, connects it and calls a tool with typed
// messages over gRPC (the Go example of docs/user/grpc.md), and sees its process state.
func TestTypedAdminOverGRPC(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	ctx := t.Context()
	adm := mcpgatewayv1.NewAdminServiceClient(dialService(t, envOf(s.Env, "ZEST_MCPGATEWAY_ADDR"), adminKey))

	_, err := adm.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: &mcpgatewayv1.ServerConfig{
		Id: "echo", Command: "node", Args: []string{filepath.Join(peersDir(t), "echo-server.mjs")},
	}})
	if err != nil {
		t.Fatalf("UpsertServer: %v", err)
	}
	if _, err := adm.ConnectServer(ctx, &mcpgatewayv1.ConnectServerRequest{Id: "echo"}); err != nil {
		t.Fatalf("ConnectServer: %v", err)
	}
	args, _ := structpb.NewStruct(map[string]any{"text": "hello-grpc"})
	res, err := adm.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "echo", Name: "echo", Arguments: args})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	content := res.GetResult().GetFields()["content"].GetListValue().GetValues()
	if res.GetServerId() != "echo" || len(content) != 1 || content[0].GetStructValue().GetFields()["text"].GetStringValue() != "hello-grpc" {
		t.Fatalf("CallTool = %v", res)
	}

	// The rules hold for typed callers too, with messages that name the field.
	_, err = adm.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: &mcpgatewayv1.ServerConfig{
		Id: "slow", Command: "node", TimeoutMs: proto.Int32(10)}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "timeout_ms 10 is out of range") {
		t.Fatalf("a bad timeout over gRPC: %v", err)
	}
	_, err = adm.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: &mcpgatewayv1.ServerConfig{Id: "lemonade", Command: "node"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "reserved") {
		t.Fatalf("the reserved id over gRPC: %v", err)
	}

	got, err := adm.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.GetServer().GetProcess(); p.GetState() != "ready" || p.GetPid() <= 0 || !got.GetServer().GetConnected() {
		t.Fatalf("GetServer = %v", got)
	}
	if _, err := adm.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("an unknown id: %v", err)
	}

	// The same over HTTP, and the process state of a server that cannot start.
	r := admin(t, s, "GET", "/servers/echo", "")
	if r.Status != 200 {
		t.Fatalf("GET /servers/echo: %d %s", r.Status, r.Body)
	}
	if p, _ := r.JSON(t)["server"].(map[string]any)["process"].(map[string]any); p["state"] != "ready" {
		t.Fatalf("process over HTTP: %s", r.Body)
	}
	if r := admin(t, s, "GET", "/servers/nope", ""); r.Status != 404 {
		t.Fatalf("GET /servers/nope: %d %s", r.Status, r.Body)
	}
	missing := filepath.Join(t.TempDir(), "missing.js")
	admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": "broken", "command": "node", "args": []string{missing}}))
	// The error says why (Node's real line, not its version trailer), on connect and in the state.
	if r := admin(t, s, "POST", "/servers/broken/connect", ""); r.Status != 502 || !strings.Contains(errMessage(t, r), "Cannot find module") {
		t.Fatalf("connect broken: %d %s", r.Status, r.Body)
	}
	r = admin(t, s, "GET", "/servers/broken", "")
	srv := r.JSON(t)["server"].(map[string]any)
	p, _ := srv["process"].(map[string]any)
	if p["state"] != "failed" || !strings.Contains(p["stderr_tail"].(string), "Cannot find module") ||
		!strings.Contains(p["last_error"].(string), "Cannot find module") || !strings.Contains(srv["last_error"].(string), "Cannot find module") {
		t.Fatalf("the broken server's process: %s", r.Body)
	}
}

// TestToolhostTakesOnlyTheServiceKey: whatever Lemonade keys are configured, the tool host's
// port refuses a launch without the service key (and runs nothing), while the admin flows
// through mcpgateway still work.
func TestToolhostTakesOnlyTheServiceKey(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		keys []string // tried on the tool host's port; each must be refused
	}{
		{"no Lemonade key", nil, []string{""}},
		{"only the admin key", []string{"LEMONADE_ADMIN_API_KEY=" + adminKey}, []string{"", adminKey}},
		{"both keys", []string{"LEMONADE_API_KEY=api-key-e2e", "LEMONADE_ADMIN_API_KEY=" + adminKey}, []string{"", "api-key-e2e", adminKey}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startSuite(t, c.env...)
			marker := filepath.Join(t.TempDir(), "ran")
			for _, key := range c.keys {
				th := toolhostv1.NewToolHostServiceClient(dialService(t, envOf(s.Env, "ZEST_TOOLHOST_ADDR"), key))
				_, err := th.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: &toolhostv1.ServerSpec{
					Id: "x", Command: "/bin/sh", Args: []string{"-c", "touch " + marker}}})
				if code := status.Code(err); code != codes.Unauthenticated {
					t.Fatalf("key %q: EnsureStarted = %v, want Unauthenticated", key, err)
				}
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the refused launch ran its command")
			}
			if envOf(s.Env, "LEMONADE_ADMIN_API_KEY") == "" {
				return // administration is refused anyway (fail-closed), nothing more to check
			}
			admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}}))
			r := admin(t, s, "POST", "/servers/echo/tools/call", `{"name":"echo","arguments":{"text":"still-works"}}`)
			if r.Status != 200 || !strings.Contains(string(r.Body), "still-works") {
				t.Fatalf("admin flow: %d %s", r.Status, r.Body)
			}
		})
	}
	t.Run("no service key configured", func(t *testing.T) {
		s := startSuite(t, "ZEST_SERVICE_KEY=", "LEMONADE_ADMIN_API_KEY="+adminKey)
		th := toolhostv1.NewToolHostServiceClient(dialService(t, envOf(s.Env, "ZEST_TOOLHOST_ADDR"), adminKey))
		_, err := th.ListServers(t.Context(), &toolhostv1.ListServersRequest{})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "ZEST_SERVICE_KEY") {
			t.Fatalf("no service key: %v, want PermissionDenied naming ZEST_SERVICE_KEY", err)
		}
	})
}
