package edge

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/zestmcp/zest/lib/tracing"
	"github.com/zestmcp/zest/lib/tracing/otlptest"
)

// TestSpanStreamSendsModelCalls: with tracing on, /spans/stream sends each model call the edge
// answers as an OTLP/JSON span GUI3 parses (traceId, name, times, attributes with
// openinference.span.kind, status 2 for a failure), and none of GUI3's own polls.
func TestSpanStreamSendsModelCalls(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlptest.Start(t).Endpoint)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	stop, err := tracing.Setup("zest-gateway-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	te := startEdge(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL(te, "/spans/stream?client_session_id=x"), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {guiOrigin}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var msg map[string]any
	_ = wsjson.Write(ctx, c, map[string]any{"type": "auth", "token": adminKey})
	if err := wsjson.Read(ctx, c, &msg); err != nil || msg["type"] != "auth.ok" {
		t.Fatalf("auth: %v %v", err, msg)
	}
	do(t, http.MethodGet, te.url+"/api/v1/health", "") // a poll: not a model call
	// The fake inference service has no Chat: the call fails (501), and its span says so.
	do(t, http.MethodPost, te.url+"/api/v1/chat/completions", `{"model":"far-llm","messages":[{"role":"user","content":"hi"}]}`, "Content-Type", "application/json")
	var span struct {
		TraceID    string `json:"traceId"`
		SpanID     string `json:"spanId"`
		Name       string `json:"name"`
		Start      string `json:"startTimeUnixNano"`
		End        string `json:"endTimeUnixNano"`
		Attributes []struct {
			Key   string         `json:"key"`
			Value map[string]any `json:"value"`
		} `json:"attributes"`
		Status struct {
			Code int `json:"code"`
		} `json:"status"`
	}
	if err := wsjson.Read(ctx, c, &span); err != nil {
		t.Fatal(err)
	}
	attrs := map[string]any{}
	for _, a := range span.Attributes {
		for _, v := range a.Value {
			attrs[a.Key] = v
		}
	}
	if span.Name != "POST /api/v1/chat/completions" || len(span.TraceID) != 32 || len(span.SpanID) != 16 || span.Start == "" || span.End < span.Start ||
		attrs["openinference.span.kind"] != "LLM" || attrs["gen_ai.request.model"] != "far-llm" || attrs["http.response.status_code"] != "501" || span.Status.Code != 2 {
		t.Fatalf("span: %+v", span)
	}
}
