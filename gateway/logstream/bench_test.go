package logstream

import (
	"io"
	"log/slog"
	"testing"
)

// BenchmarkAccessLine is the edge's access line through the hub; BenchmarkAccessLinePlain the same
// line without it: the difference is what the log stream adds to each request.
func BenchmarkAccessLine(b *testing.B) {
	lv := new(slog.LevelVar)
	hub := New(lv, 1000)
	l := slog.New(hub.Wrap(slog.NewTextHandler(io.Discard, nil), "zest-gateway")).With("service", "zest-gateway")
	b.ReportAllocs()
	for b.Loop() {
		l.Info("http request", "method", "GET", "route", "/api/v1/health", "status", 200, "duration_ms", 1.25, "bytes", 120, "request_id", "0123456789abcdef")
	}
}
func BenchmarkAccessLinePlain(b *testing.B) {
	l := slog.New(slog.NewTextHandler(io.Discard, nil)).With("service", "zest-gateway")
	b.ReportAllocs()
	for b.Loop() {
		l.Info("http request", "method", "GET", "route", "/api/v1/health", "status", 200, "duration_ms", 1.25, "bytes", 120, "request_id", "0123456789abcdef")
	}
}
