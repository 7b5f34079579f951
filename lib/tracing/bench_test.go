package tracing

import (
	"context"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/tracing/otlptest"
)

// BenchmarkSpanOff is what a would-be span costs when tracing is off (docs/dev/benchmarks.md quotes it).
func BenchmarkSpanOff(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := Start(ctx, "x")
		_ = End(span, nil)
	}
}

// BenchmarkSpanOn is a recorded span, batched for export to a receiver.
func BenchmarkSpanOn(b *testing.B) {
	r := otlptest.Start(b)
	stop, err := setup("zest-bench", nil, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": r.Endpoint}), 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := Start(ctx, "x")
		_ = End(span, nil)
	}
}
