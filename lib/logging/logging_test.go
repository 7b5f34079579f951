package logging

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestLevelOf: the level of a logger New made can be changed while it runs.
func TestLevelOf(t *testing.T) {
	var b bytes.Buffer
	l, err := New(&b, "svc", "warn", "text")
	if err != nil {
		t.Fatal(err)
	}
	l = l.With("k", "v") // the level survives With
	l.Info("hidden")
	lv := LevelOf(l)
	if lv == nil || lv.Level() != slog.LevelWarn {
		t.Fatalf("LevelOf: %v", lv)
	}
	lv.Set(slog.LevelDebug)
	l.Debug("shown")
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "shown") {
		t.Errorf("log: %q", s)
	}
	if LevelOf(slog.New(slog.NewTextHandler(&b, nil))) != nil || !l.Enabled(context.Background(), slog.LevelDebug) {
		t.Error("LevelOf of a foreign logger")
	}
}

// TestTraceIDs: a line logged under an active span carries its trace and span ids; one
// logged without a span carries none.
func TestTraceIDs(t *testing.T) {
	var b bytes.Buffer
	l, err := New(&b, "svc", "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	l.InfoContext(ctx, "with span")
	if !strings.Contains(b.String(), `"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331"`) {
		t.Fatalf("no ids: %s", b.String())
	}
	b.Reset()
	l.InfoContext(context.Background(), "without")
	if strings.Contains(b.String(), "trace_id") {
		t.Fatalf("ids without a span: %s", b.String())
	}
}
