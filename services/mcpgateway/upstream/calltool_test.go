package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/logging"
	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/requestid"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// logBuffer is a JSON log sink safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the records with message msg.
func (b *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func newLogger(b *logBuffer) *slog.Logger {
	return slog.New(logging.WithRequestID(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo})))
}

// Every tool call logs one info line with the call's request id, server, tool, duration_ms
// and outcome, and never the arguments or the result.
func TestCallToolLogsOneLine(t *testing.T) {
	f, th := newFakeHost(t)
	var logs logBuffer
	m := New(th, nil, newLogger(&logs))
	cfg := stdioConfig("fx")
	f.setTools("fx", tools("ok"))
	cases := []struct{ tool, outcome string }{
		{"ok", OutcomeOK}, {"is_error", OutcomeIsError}, {"rpc_error", OutcomeRPCError},
		{"crash", OutcomeFailed}, {"slow", OutcomeTimeout},
	}
	for i, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			before := len(logs.lines(t, "tool call"))
			rid := "req-" + c.tool
			params := []byte(`{"name":"` + c.tool + `","arguments":{"secret":"argument-secret"}}`)
			_, err := m.CallTool(requestid.With(t.Context(), rid), cfg, c.tool, params, 200*time.Millisecond)
			if (err == nil) != (c.outcome == OutcomeOK || c.outcome == OutcomeIsError) {
				t.Fatalf("call %s: %v", c.tool, err)
			}
			lines := logs.lines(t, "tool call")
			if len(lines) != before+1 {
				t.Fatalf("%d log lines for call %d, want 1", len(lines)-before, i)
			}
			l := lines[len(lines)-1]
			if l["level"] != "INFO" || l["server"] != "fx" || l["tool"] != c.tool || l["outcome"] != c.outcome ||
				l["request_id"] != rid || l["duration_ms"] == nil {
				t.Fatalf("log line %v", l)
			}
		})
	}
	logs.mu.Lock()
	all := logs.buf.String()
	logs.mu.Unlock()
	if strings.Contains(all, "argument-secret") || strings.Contains(all, "result-text-secret") {
		t.Fatalf("a log line holds arguments or results:\n%s", all)
	}
}

// An HTTP upstream's calls log the same line; a forgotten session is a failed call.
func TestCallToolLogsHTTP(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	var logs logBuffer
	m := New(nil, nil, newLogger(&logs))
	cfg := httpConfig("h", u.URL)
	call := func() {
		_, _ = m.CallTool(t.Context(), cfg, "echo", []byte(`{"name":"echo","arguments":{"text":"x"}}`), 0)
	}
	call()
	u.ExpireOnNextToolCall()
	call()
	call()
	var outcomes []string
	for _, l := range logs.lines(t, "tool call") {
		outcomes = append(outcomes, l["outcome"].(string))
	}
	if strings.Join(outcomes, ",") != "ok,failed,ok" {
		t.Fatalf("outcomes %v", outcomes)
	}
}

func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		result string
		want   string
	}{
		{`{"content":[]}`, OutcomeOK},
		{`{"content":[],"isError":false}`, OutcomeOK},
		{`{"content":[{"type":"text","text":"\"isError\":true"}]}`, OutcomeOK},
		{`{"content":[],"isError":true}`, OutcomeIsError},
		{`{"content":[{"type":"text","text":"input_required"}],"isError":true}`, OutcomeIsError},
		{`{"resultType":"input_required","inputRequests":{}}`, OutcomeInputRequired},
	} {
		if got := Outcome([]byte(c.result), nil); got != c.want {
			t.Errorf("Outcome(%s) = %s, want %s", c.result, got, c.want)
		}
	}
	if got := Outcome(nil, fmt.Errorf("wrapped: %w", &InputRequiredError{Call: "t:1"})); got != OutcomeInputRequired {
		t.Errorf("Outcome(InputRequiredError) = %s", got)
	}
}

// A call whose caller gave up fails with context.Canceled in its chain (not a timeout, not a
// bare upstream failure) and logs outcome canceled, on both transports.
func TestCancelledCallIsCanceled(t *testing.T) {
	f, th := newFakeHost(t)
	f.setTools("fx", tools("slow"))
	u := mcptest.Start(t, mcptest.Options{})
	var logs logBuffer
	m := New(th, nil, newLogger(&logs))
	t.Cleanup(func() { m.Close(context.Background()) })
	for _, c := range []struct {
		cfg  *mcpgatewayv1.ServerConfig
		tool string
	}{{stdioConfig("fx"), "slow"}, {httpConfig("hx", u.URL), "echo"}} {
		t.Run(c.cfg.GetTransport(), func(t *testing.T) {
			if err := m.Connect(t.Context(), c.cfg); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, err := m.CallTool(ctx, c.cfg, c.tool, []byte(`{"name":"`+c.tool+`","arguments":{}}`), 0)
			if !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a cancelled call: %v, want context.Canceled in its chain", err)
			}
			lines := logs.lines(t, "tool call")
			if got := lines[len(lines)-1]["outcome"]; got != OutcomeCanceled {
				t.Fatalf("outcome %v, want %s", got, OutcomeCanceled)
			}
		})
	}
}
