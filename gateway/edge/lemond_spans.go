package edge

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/zestmcp/zest/lib/tracing"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// spanBuffer is how many spans wait for one /spans/stream socket: past it, the socket loses
// spans (the browser is behind) rather than slowing the requests they trace.
const spanBuffer = 256

// tracingOff is what a /spans/stream socket is told when Zest records no spans: GUI3 shows it.
const tracingOff = "Zest records no spans: tracing is off. Set OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp) " +
	"for the gateway and restart it; Telemetry then shows each model call the edge answers"

// spanKinds are the model routes whose spans /spans/stream sends (the route's last segments
// under a prefix), with GUI3's kind of each (openinference.span.kind: LLM unless said).
var spanKinds = map[string]string{
	"chat/completions": "LLM", "completions": "LLM", "responses": "LLM",
	"embeddings": "EMBEDDING", "rerank": "RERANKER", "reranking": "RERANKER",
	"audio/transcriptions": "LLM", "audio/speech": "LLM", "audio/generations": "LLM",
	"images/generations": "LLM", "images/edits": "LLM", "3d/generations": "LLM",
}

// modelCallKind is the GUI3 kind of a span the edge ended for a model call, false for any other
// span (GUI3's own polls of health and stats, MCP, the admin routes, the gRPC client spans).
func modelCallKind(s sdktrace.ReadOnlySpan) (string, bool) {
	if s.SpanKind() != trace.SpanKindServer {
		return "", false
	}
	var route string
	for _, kv := range s.Attributes() {
		if kv.Key == "http.route" {
			route = kv.Value.AsString()
		}
	}
	for _, p := range Prefixes {
		if rest, ok := strings.CutPrefix(route, p); ok {
			kind, ok := spanKinds[rest]
			return kind, ok
		}
	}
	return "", false
}

// spanStream serves /spans/stream as lemond does for GUI3's Telemetry (Inspect) view: the
// browser authenticates with {"type":"auth","token":…} and gets {"type":"auth.ok"} (with the
// key in the URL, or none needed, any token does); from then on each span of a model call the edge ends (its server span: route, status, duration, the
// model where the route names one) is sent as OTLP/JSON, which GUI3 parses. These are the
// edge's own spans (lib/tracing's tap): the inference node's and mcpgateway's stay in their
// processes and reach the OTLP collector, under the same trace id. With tracing off a socket
// is told so once (an error message GUI3 shows) and sent nothing else.
func (l *lemond) spanStream(w http.ResponseWriter, r *http.Request) {
	c, slot := l.accept(w, r, true)
	if c == nil {
		return
	}
	ctx := r.Context()
	// The tap opens before any auth.ok is sent: a model call the browser makes as soon as it
	// is told auth.ok must find the socket subscribed (opened after, its span could end
	// first and never be sent). Spans that end before auth.ok wait in the tap's buffer.
	var spans <-chan sdktrace.ReadOnlySpan
	if tracing.Enabled() {
		var stop func()
		spans, stop = tracing.Subscribe(spanBuffer)
		defer stop()
	}
	// Spans (or the word that there are none) follow the first auth.ok, as in lemond: GUI3
	// sends its auth message even when the URL carried the key.
	authed := make(chan struct{})
	var authOnce sync.Once
	done := make(chan struct{})
	// The reader: auth messages, until the browser closes the socket.
	go func() {
		defer close(done)
		ok := slot.keyed
		for {
			rctx := ctx
			var cancel context.CancelFunc = func() {}
			if !ok {
				rctx, cancel = context.WithTimeout(ctx, wsSubscribeTimeout)
			}
			m, err := readWS(rctx, c)
			cancel()
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					c.Close(websocket.StatusPolicyViolation, "no auth message within 30s")
				}
				return
			}
			switch {
			case m.Type == "auth":
				good, err := l.checkAuth(ctx, r, c, slot, m)
				if err != nil {
					return
				}
				if good {
					ok = true
					authOnce.Do(func() { close(authed) })
				}
			case !ok:
				if writeWS(ctx, c, wsError("Unauthorized. Please authenticate first by sending an auth message.")) != nil {
					return
				}
			}
		}
	}()
	defer func() {
		c.CloseNow()
		<-done
		slot.release() // the slot it holds when it ends (promote replaces it)
	}()
	select {
	case <-authed:
	case <-done:
		return
	}
	if spans == nil {
		if writeWS(ctx, c, wsError(tracingOff)) != nil {
			return
		}
		<-done
		return
	}
	for {
		select {
		case <-done:
			return
		case s := <-spans:
			kind, ok := modelCallKind(s)
			if !ok {
				continue
			}
			if writeWS(ctx, c, tracing.OTLPJSON(s, attribute.String("openinference.span.kind", kind))) != nil {
				return
			}
		}
	}
}
