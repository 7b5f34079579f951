// Package logging builds the slog logger every Zest service uses. A line logged with a
// context (InfoContext and the like) carries the request id that context holds
// (lib/requestid), so one request can be followed across the services, and, when a span is
// active (lib/tracing), its trace_id and span_id, so a log line leads to its trace.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/zestmcp/zest/lib/requestid"
	"go.opentelemetry.io/otel/trace"
)

// New returns a logger writing to w at level ("debug", "info", "warn", "error") in format
// ("text" or "json"), tagged with the service name.
func New(w io.Writer, service, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	// A LevelVar, so that a running service can change its level (LevelOf).
	lv := new(slog.LevelVar)
	lv.Set(l)
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "", "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: use text or json", format)
	}
	return slog.New(ridHandler{h, lv}).With("service", service), nil
}

// LevelOf returns the level of a logger New made, which changing changes what it writes;
// nil for any other logger.
func LevelOf(l *slog.Logger) *slog.LevelVar {
	if r, ok := l.Handler().(ridHandler); ok {
		return r.level
	}
	return nil
}

// WithRequestID wraps h so that records logged with a context carrying a request id get a
// request_id attribute, and those logged under an active span trace_id and span_id.
func WithRequestID(h slog.Handler) slog.Handler { return ridHandler{Handler: h} }

type ridHandler struct {
	slog.Handler
	level *slog.LevelVar // the level New set, or nil
}

func (r ridHandler) Handle(ctx context.Context, rec slog.Record) error {
	if ctx != nil {
		if id := requestid.From(ctx); id != "" {
			rec.AddAttrs(slog.String("request_id", id))
		}
		// A span context is valid only while tracing is on (lib/tracing): off, this is one
		// context lookup.
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			rec.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return r.Handler.Handle(ctx, rec)
}

func (r ridHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return ridHandler{r.Handler.WithAttrs(as), r.level}
}

func (r ridHandler) WithGroup(name string) slog.Handler {
	return ridHandler{r.Handler.WithGroup(name), r.level}
}
