package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/tracing/otlptest"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestOneTraceAcrossThreeServices: with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/gRPC
// receiver (in this test), a federated tools/call and an admin tool call of a stdio server each
// give one trace whose spans come from the edge, mcpgateway and the tool host, linked parent to
// child under one root (the edge's request), and every log line of the request carries the
// trace id. A chat with an MCP tool adds inference, the chat's rounds and its tool call.
func TestOneTraceAcrossThreeServices(t *testing.T) {
	rcv := otlptest.Start(t)
	s := startSuite(t, "ZEST_LOG_LEVEL=info", "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.Endpoint,
		"OTEL_BSP_SCHEDULE_DELAY=100", // export within 0.1 s instead of 5 s
		"OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED=", "OTEL_SERVICE_NAME=", "OTEL_EXPORTER_OTLP_PROTOCOL=")
	for _, svc := range []string{"zest-gateway", "zest-mcpgateway", "zest-toolhost", "zest-inference"} {
		if logLine(s.Logs(svc), `msg="tracing on"`, "service_name="+svc) == "" {
			t.Fatalf("%s did not say tracing is on:\n%s", svc, s.Logs(svc))
		}
	}
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}})

	sid, _ := fedInit(t, s, "everything", "2025-11-25", fedAPIAuth)
	r := fedCall(t, s, "everything", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"traced"}}}`,
		fedAPIAuth, "X-Request-Id: e2e-trace-fed")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "traced") {
		t.Fatalf("federated tools/call: %d %s", r.Status, r.Body)
	}
	r = do(t, "POST", s.URL+"/internal/mcp/servers/everything/tools/call", `{"name":"echo","arguments":{"message":"traced too"}}`,
		"Content-Type: application/json", adminAuth, "X-Request-Id: e2e-trace-admin")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "traced too") {
		t.Fatalf("admin tools/call: %d %s", r.Status, r.Body)
	}

	// The chat loop: its rounds and its tool call as spans, the model's answers from inference.
	r = do(t, "POST", s.URL+"/api/v1/chat/completions", `{"model":"builtin-llm","mcp_server_ids":["everything"],
		"tool_choice":{"type":"function","function":{"name":"mcp_everything__get-sum"}},"messages":[{"role":"user","content":"add {\"a\":40,\"b\":2}"}]}`,
		"Content-Type: application/json", fedAPIAuth, "X-Request-Id: e2e-trace-chat")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "42") {
		t.Fatalf("chat: %d %s", r.Status, r.Body)
	}

	for _, tc := range []struct {
		requestID, root string
		services        []string
		want            [][]string // per span: service, name, then attribute key/value pairs
	}{
		{"e2e-trace-fed", "POST /mcp/servers/{id}", nil, [][]string{
			{"zest-mcpgateway", "tools/call echo", "gen_ai.tool.name", "echo", "zest.server.id", "everything", "zest.outcome", "ok"},
			{"zest-toolhost", "stdio tools/call", "gen_ai.tool.name", "echo"}}},
		{"e2e-trace-admin", "POST /internal/mcp/servers/{id}/tools/call", nil, [][]string{
			{"zest-mcpgateway", "tools/call echo", "gen_ai.tool.name", "echo", "zest.server.id", "everything", "zest.outcome", "ok"},
			{"zest-toolhost", "stdio tools/call", "gen_ai.tool.name", "echo"}}},
		{"e2e-trace-chat", "POST /api/v1/chat/completions", []string{"zest-inference"}, [][]string{
			{"zest-mcpgateway", "chat round", "zest.chat.round", "1", "gen_ai.response.finish_reason", "tool_calls"},
			{"zest-mcpgateway", "chat round", "zest.chat.round", "2"},
			{"zest-mcpgateway", "execute_tool mcp_everything__get-sum", "gen_ai.tool.name", "get-sum", "zest.server.id", "everything", "zest.outcome", "ok"},
			{"zest-toolhost", "stdio tools/call", "gen_ai.tool.name", "get-sum"}}},
	} {
		t.Run(tc.requestID, func(t *testing.T) {
			var traceID string
			var spans []otlptest.Span
			waitfor.NoError(t, 20*time.Second, func() error {
				traceID, spans = "", nil
				for _, sp := range rcv.Spans() {
					if sp.Service == "zest-gateway" && sp.Attrs["zest.request_id"] == tc.requestID {
						traceID = sp.TraceID
					}
				}
				if traceID == "" {
					return fmt.Errorf("no edge span with request id %s among %d spans", tc.requestID, len(rcv.Spans()))
				}
				spans = rcv.Trace(traceID)
				return checkTrace(spans, tc.root, tc.services, tc.want)
			})
			var names []string
			for _, sp := range spans {
				names = append(names, sp.Service+": "+sp.Name)
			}
			t.Logf("trace %s: %d spans: %s", traceID, len(spans), strings.Join(names, " | "))

			// Every line logged for the request (its request id) carries the trace id.
			waitfor.NoError(t, 10*time.Second, func() error {
				if logLine(s.Logs("zest-gateway"), `msg="http request"`, "request_id="+tc.requestID, "trace_id="+traceID) == "" {
					return fmt.Errorf("no access line with trace_id=%s:\n%s", traceID, s.Logs("zest-gateway"))
				}
				if logLine(s.Logs("zest-mcpgateway"), `msg="tool call"`, "request_id="+tc.requestID, "trace_id="+traceID) == "" {
					return fmt.Errorf("no tool call line with trace_id=%s:\n%s", traceID, s.Logs("zest-mcpgateway"))
				}
				return nil
			})
			for _, svc := range []string{"zest-gateway", "zest-mcpgateway", "zest-toolhost"} {
				for _, l := range strings.Split(s.Logs(svc), "\n") {
					if strings.Contains(l, "request_id="+tc.requestID) && !strings.Contains(l, "trace_id="+traceID) {
						t.Errorf("%s logged a line of the request without its trace id: %s", svc, l)
					}
				}
			}
		})
	}
}

// checkTrace: spans from the edge, mcpgateway, the tool host and services; one root, the
// edge's request named by its route; every other span's parent in the trace; gRPC server spans
// in the callees; and the spans of want (service, name, attribute key/value pairs).
func checkTrace(spans []otlptest.Span, root string, services []string, want [][]string) error {
	ids := map[string]bool{}
	seen := map[string]bool{}
	for _, sp := range spans {
		ids[sp.SpanID] = true
		seen[sp.Service] = true
	}
	callees := append([]string{"zest-mcpgateway", "zest-toolhost"}, services...)
	for _, svc := range append([]string{"zest-gateway"}, callees...) {
		if !seen[svc] {
			return fmt.Errorf("no span of %s yet in %d spans: %+v", svc, len(spans), spans)
		}
	}
	var roots []otlptest.Span
	for _, sp := range spans {
		switch {
		case sp.ParentID == "":
			roots = append(roots, sp)
		case !ids[sp.ParentID]:
			return fmt.Errorf("span %s/%q has parent %s, not in the trace (yet)", sp.Service, sp.Name, sp.ParentID)
		}
	}
	if len(roots) != 1 || roots[0].Service != "zest-gateway" || roots[0].Name != root || roots[0].Attrs["http.route"] == "" {
		return fmt.Errorf("roots %+v, want one: the edge's %q", roots, root)
	}
	for _, w := range want {
		if !slices.ContainsFunc(spans, func(sp otlptest.Span) bool {
			for i := 2; i+1 < len(w); i += 2 {
				if sp.Attrs[w[i]] != w[i+1] {
					return false
				}
			}
			return sp.Service == w[0] && sp.Name == w[1]
		}) {
			return fmt.Errorf("no span %v: %+v", w, spans)
		}
	}
	for _, svc := range callees {
		if !slices.ContainsFunc(spans, func(sp otlptest.Span) bool { return sp.Service == svc && sp.Kind == 2 }) { // SERVER
			return fmt.Errorf("no gRPC server span in %s: %+v", svc, spans)
		}
	}
	return nil
}

// TestTracingSettingsRefusedAtStartup: an OTEL_* value Zest cannot honour stops each service at
// startup (exit 2) with a message naming the variable, instead of a service that exports
// nothing.
func TestTracingSettingsRefusedAtStartup(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL \"http/protobuf\": Zest exports OTLP over gRPC only"},
		{"OTEL_TRACES_SAMPLER=sometimes", "OTEL_TRACES_SAMPLER \"sometimes\""},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=collector:4317", "use a URL such as http://collector:4317"},
	} {
		for _, svc := range []string{"zest-gateway", "zest-mcpgateway", "zest-toolhost", "zest-inference"} {
			cmd := exec.Command(filepath.Join(binDir, svc))
			cmd.Env = append(os.Environ(), "ZEST_DATA_DIR="+t.TempDir(), "ZEST_SERVICE_KEY="+serviceKey,
				"OTEL_SDK_DISABLED=", "OTEL_TRACES_EXPORTER=", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", tc.env)
			out, err := cmd.CombinedOutput()
			if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
				t.Errorf("%s with %s: exit %v: %s", svc, tc.env, err, out)
			}
		}
	}
}
