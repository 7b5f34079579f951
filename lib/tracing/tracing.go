// Package tracing sets up OpenTelemetry traces the same way in every Zest service: an OTLP/gRPC
// exporter configured by the standard OTEL_* variables, W3C trace context between the
// services (lib/grpcserve and lib/grpcdial add the gRPC stats handlers), and a bounded flush
// on shutdown.
//
// Tracing is OFF unless the environment asks for it (Settings.Enabled says the rule); off, no
// exporter runs, no stats handler is installed and Start returns a no-op span, so the cost is
// one atomic load per would-be span.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// TracerName names the spans Zest's own code starts (the gRPC stats handlers use otelgrpc's).
const TracerName = "github.com/zestmcp/zest"

// ShutdownTimeout bounds the flush of the spans still buffered when a service stops: a
// collector that is down or slow delays the stop by at most this, and the spans it did not
// take are dropped (and a warning says so).
const ShutdownTimeout = 5 * time.Second

// ErrorLogInterval is the least time between two log lines about export failures: a collector
// that is down fails every batch (every 5 s by default), and one line a minute is enough to
// say so; the line counts the failures it stands for.
const ErrorLogInterval = time.Minute

// Settings are what the environment asks for.
type Settings struct {
	// Enabled: OTEL_TRACES_EXPORTER=otlp, or OTEL_TRACES_EXPORTER unset and an OTLP endpoint
	// set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); never when
	// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
	Enabled bool
	// Why says which variable decided, for the startup log line.
	Why string
	// Endpoint is the endpoint variable's value ("" means the exporter's default,
	// http://localhost:4317... over TLS unless OTEL_EXPORTER_OTLP_INSECURE=true).
	Endpoint string
	// Sampler is OTEL_TRACES_SAMPLER (with OTEL_TRACES_SAMPLER_ARG), parentbased_always_on
	// when unset.
	Sampler     sdktrace.Sampler
	SamplerName string
}

// Lookup is os.LookupEnv's shape, for tests.
type Lookup func(string) (string, bool)

func get(lookup Lookup, key string) string {
	v, _ := lookup(key)
	return strings.TrimSpace(v)
}

// FromEnv reads the OTEL_* variables Zest interprets itself (the exporter reads the others:
// OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _INSECURE, _CERTIFICATE, and the
// batch processor OTEL_BSP_*). A value Zest cannot honour is an error that names the variable
// and the fix, instead of a service that silently sends nothing.
func FromEnv(lookup Lookup) (Settings, error) {
	var s Settings
	if v := strings.ToLower(get(lookup, "OTEL_SDK_DISABLED")); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("OTEL_SDK_DISABLED %q: use true or false", v)
		}
		if off {
			s.Why = "OTEL_SDK_DISABLED=true"
			return s, nil
		}
	}
	endpointVar := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	s.Endpoint = get(lookup, endpointVar)
	if s.Endpoint == "" {
		endpointVar = "OTEL_EXPORTER_OTLP_ENDPOINT"
		s.Endpoint = get(lookup, endpointVar)
	}
	switch exp := strings.ToLower(get(lookup, "OTEL_TRACES_EXPORTER")); exp {
	case "":
		if s.Endpoint == "" {
			s.Why = "neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_TRACES_EXPORTER=otlp is set"
			return s, nil
		}
		s.Enabled, s.Why = true, endpointVar+" is set"
	case "none":
		s.Why = "OTEL_TRACES_EXPORTER=none"
		return s, nil
	case "otlp":
		s.Enabled, s.Why = true, "OTEL_TRACES_EXPORTER=otlp"
	default:
		return s, fmt.Errorf("OTEL_TRACES_EXPORTER %q: use otlp (OTLP over gRPC) or none; Zest exports to no other", exp)
	}
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return s, fmt.Errorf("%s %q: use a URL such as http://collector:4317 (http:// sends in plaintext, https:// over TLS)", endpointVar, s.Endpoint)
		}
	}
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := get(lookup, key); p != "" {
			if p != "grpc" {
				return s, fmt.Errorf("%s %q: Zest exports OTLP over gRPC only: set it to grpc (or unset it) and point the endpoint at the collector's gRPC port (4317)", key, p)
			}
			break // the per-signal variable wins over the general one
		}
	}
	var err error
	s.Sampler, s.SamplerName, err = sampler(get(lookup, "OTEL_TRACES_SAMPLER"), get(lookup, "OTEL_TRACES_SAMPLER_ARG"))
	return s, err
}

// sampler parses OTEL_TRACES_SAMPLER and its argument (the ratio of the *traceidratio
// samplers, 1 when unset).
func sampler(name, arg string) (sdktrace.Sampler, string, error) {
	name = strings.ToLower(name)
	if name == "" {
		name = "parentbased_always_on"
	}
	ratio := 1.0
	if strings.HasSuffix(name, "traceidratio") && arg != "" {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1 (0.1 keeps one trace in ten)", arg)
		}
		ratio = r
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), name, nil
	case "always_off":
		return sdktrace.NeverSample(), name, nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), name, nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), name, nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), name, nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), name, nil
	}
	return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER %q: use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// active is set while a Setup's provider runs: the cheap test behind Enabled and Start.
var active atomic.Bool

// Enabled reports whether spans are recorded and exported (Setup found tracing asked for).
func Enabled() bool { return active.Load() }

// Setup reads the environment and, when tracing is asked for, installs the global tracer
// provider (resource service.name = OTEL_SERVICE_NAME, else service) and the W3C trace-context
// and baggage propagators. Call it before building gRPC servers and clients (their stats
// handlers are added only when tracing is on). The returned stop flushes buffered spans within
// ShutdownTimeout; it is never nil.
func Setup(service string, log *slog.Logger) (stop func(), err error) {
	return setup(service, log, os.LookupEnv, ShutdownTimeout)
}

func setup(service string, log *slog.Logger, lookup Lookup, timeout time.Duration) (func(), error) {
	if log == nil {
		log = slog.Default()
	}
	s, err := FromEnv(lookup)
	if err != nil {
		return func() {}, err
	}
	if !s.Enabled {
		log.Debug("tracing off", "why", s.Why)
		return func() {}, nil
	}
	ctx := context.Background()
	// The exporter reads the other OTEL_EXPORTER_OTLP_* variables itself; it connects lazily.
	var eopts []otlptracegrpc.Option
	if s.Endpoint != "" {
		eopts = append(eopts, otlptracegrpc.WithEndpointURL(s.Endpoint)) // http:// means plaintext
	}
	exp, err := otlptracegrpc.New(ctx, eopts...)
	if err != nil {
		return func() {}, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Later options win: OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME over the default name.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return func() {}, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSpanProcessor(spans), sdktrace.WithResource(res), sdktrace.WithSampler(s.Sampler))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(&errorLog{log: log, every: ErrorLogInterval})
	tracer.Store(tp.Tracer(TracerName))
	active.Store(true)
	name := service
	for _, a := range res.Attributes() {
		if a.Key == "service.name" {
			name = a.Value.AsString()
		}
	}
	log.Info("tracing on", "why", s.Why, "endpoint", s.Endpoint, "sampler", s.SamplerName, "service_name", name)
	var once sync.Once
	return func() {
		once.Do(func() {
			active.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := tp.Shutdown(ctx); err != nil {
				log.Warn("tracing: spans not flushed at shutdown; some are lost", "timeout", timeout.String(), "err", err)
			}
		})
	}, nil
}

// errorLog logs the SDK's errors (failed exports above all) at most once per interval.
type errorLog struct {
	log        *slog.Logger
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (e *errorLog) Handle(err error) {
	e.mu.Lock()
	now := time.Now()
	if !e.last.IsZero() && now.Sub(e.last) < e.every {
		e.suppressed++
		e.mu.Unlock()
		return
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	e.mu.Unlock()
	e.log.Warn("tracing: export failed; spans are dropped until the collector answers", "err", err,
		"similar_errors_not_logged", n, "next_log_in_at_least", e.every.String())
}

var tracer atomic.Value // trace.Tracer of the running provider

// Start starts a span named name under ctx's span. Off, it returns ctx and a no-op span (End
// on it does nothing), without allocating.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !active.Load() {
		return ctx, noSpan
	}
	return tracer.Load().(trace.Tracer).Start(ctx, name, opts...)
}

// noSpan is a no-op span (the one a context without a span holds).
var noSpan = trace.SpanFromContext(context.Background())

// End records err on span (status Error with err's message) and ends it; it returns err, so
// that `return tracing.End(span, err)` ends a span on every return path.
func End(span trace.Span, err error) error {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}

// Fail marks span failed with msg without ending it (an answer that is an error, such as a
// JSON-RPC error or a tool result with isError, is no Go error).
func Fail(span trace.Span, msg string) { span.SetStatus(codes.Error, msg) }

// handlerOptions: health checks are not traced (probes would fill a backend with one-span
// traces), and the handlers record no metrics (lib's metrics are Prometheus's).
func handlerOptions() []otelgrpc.Option {
	return []otelgrpc.Option{
		otelgrpc.WithFilter(filters.Not(filters.Any(filters.HealthCheck(), filters.ServicePrefix("grpc.reflection.")))),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
	}
}

// ServerOptions are the gRPC server options that trace every call (lib/grpcserve adds them):
// none when tracing is off.
func ServerOptions() []grpc.ServerOption {
	if !active.Load() {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(handlerOptions()...))}
}

// DialOptions are the gRPC client options that trace every call and send its trace context
// (lib/grpcdial adds them): none when tracing is off.
func DialOptions() []grpc.DialOption {
	if !active.Load() {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(handlerOptions()...))}
}

// Extract returns ctx with the trace context that carrier (an HTTP request's headers) holds,
// when tracing is on.
func Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	if !active.Load() {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, carrier)
}

// IDs returns the trace and span ids of ctx's span ("" when it has none), for log lines.
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}
