package tracing

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The tap hands the spans a process ends to readers in the same process, besides the OTLP
// exporter: the edge streams its own to Lemonade's GUI (/spans/stream). It runs only while
// tracing is on (Setup registers it on the provider); a span ended with no reader costs one
// atomic load. A reader that does not keep up loses spans, never slows the traced code.

// tap is the span processor of the running provider.
type tap struct {
	n    atomic.Int32 // readers, read without the lock on every span
	mu   sync.Mutex
	subs map[chan sdktrace.ReadOnlySpan]struct{}
}

var spans = &tap{subs: map[chan sdktrace.ReadOnlySpan]struct{}{}}

func (t *tap) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (t *tap) OnEnd(s sdktrace.ReadOnlySpan) {
	if t.n.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for ch := range t.subs {
		select {
		case ch <- s:
		default: // the reader is behind: this span is not its
		}
	}
}

func (t *tap) Shutdown(context.Context) error   { return nil }
func (t *tap) ForceFlush(context.Context) error { return nil }

// Subscribe returns the spans this process ends from now on, while tracing is on; at most
// buffer wait unread (later ones are dropped for this reader). cancel ends the subscription;
// the channel is never closed.
func Subscribe(buffer int) (<-chan sdktrace.ReadOnlySpan, func()) {
	ch := make(chan sdktrace.ReadOnlySpan, buffer)
	spans.mu.Lock()
	spans.subs[ch] = struct{}{}
	spans.n.Add(1)
	spans.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			spans.mu.Lock()
			delete(spans.subs, ch)
			spans.n.Add(-1)
			spans.mu.Unlock()
		})
	}
}

// OTLPJSON is s as OTLP/JSON writes a span (opentelemetry-proto's JSON mapping: ids in hex,
// times as strings of nanoseconds, attributes as {key, value:{stringValue|intValue|
// doubleValue|boolValue}}, status code 2 for an error), with extra attributes added.
func OTLPJSON(s sdktrace.ReadOnlySpan, extra ...attribute.KeyValue) map[string]any {
	sc := s.SpanContext()
	out := map[string]any{
		"traceId":           sc.TraceID().String(),
		"spanId":            sc.SpanID().String(),
		"name":              s.Name(),
		"kind":              int(s.SpanKind()),
		"startTimeUnixNano": strconv.FormatInt(s.StartTime().UnixNano(), 10),
		"endTimeUnixNano":   strconv.FormatInt(s.EndTime().UnixNano(), 10),
	}
	if p := s.Parent(); p.IsValid() {
		out["parentSpanId"] = p.SpanID().String()
	}
	attrs := []map[string]any{}
	for _, kv := range append(s.Attributes(), extra...) {
		var v map[string]any
		switch kv.Value.Type() {
		case attribute.BOOL:
			v = map[string]any{"boolValue": kv.Value.AsBool()}
		case attribute.INT64:
			v = map[string]any{"intValue": strconv.FormatInt(kv.Value.AsInt64(), 10)}
		case attribute.FLOAT64:
			v = map[string]any{"doubleValue": kv.Value.AsFloat64()}
		default:
			v = map[string]any{"stringValue": kv.Value.String()}
		}
		attrs = append(attrs, map[string]any{"key": string(kv.Key), "value": v})
	}
	out["attributes"] = attrs
	st := map[string]any{"code": 0}
	switch s.Status().Code {
	case codes.Ok:
		st["code"] = 1
	case codes.Error:
		st["code"] = 2
		st["message"] = s.Status().Description
	}
	out["status"] = st
	return out
}
