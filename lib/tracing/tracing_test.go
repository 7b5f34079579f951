package tracing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/tracing/otlptest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

func env(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnvRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
	}{
		{"nothing set: off", nil, false},
		{"endpoint set: on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, true},
		{"traces endpoint set: on", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c:4317"}, true},
		{"exporter otlp without endpoint: on (the exporter's default)", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"exporter none wins over an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, false},
		{"SDK disabled wins", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{"SDK disabled false", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, true},
		{"protocol grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := FromEnv(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if s.Enabled != tc.on {
				t.Fatalf("Enabled = %v (%s), want %v", s.Enabled, s.Why, tc.on)
			}
			if s.Why == "" {
				t.Fatal("no reason given")
			}
		})
	}
}

func TestFromEnvRefusesWhatItCannotHonour(t *testing.T) {
	on := "http://127.0.0.1:4317"
	for _, tc := range []struct {
		env  map[string]string
		want string // in the error: the variable and the fix
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER \"zipkin\": use otlp"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console"}, "use otlp (OTLP over gRPC) or none"},
		{map[string]string{"OTEL_SDK_DISABLED": "maybe"}, "OTEL_SDK_DISABLED \"maybe\": use true or false"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4317"}, "OTEL_EXPORTER_OTLP_ENDPOINT \"127.0.0.1:4317\": use a URL such as http://"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "grpc://c:4317"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "OTEL_EXPORTER_OTLP_PROTOCOL \"http/protobuf\": Zest exports OTLP over gRPC only: set it to grpc"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER \"sometimes\": use always_on"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, "OTEL_TRACES_SAMPLER_ARG \"1.5\": want a ratio from 0 to 1"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}, "want a ratio from 0 to 1"},
	} {
		_, err := FromEnv(env(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to say %q", tc.env, err, tc.want)
		}
	}
	// Off, the exporter's variables are not read: a bad one does not stop a service.
	if s, err := FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})); err != nil || s.Enabled {
		t.Fatalf("off with a protocol set: %+v, %v", s, err)
	}
}

func TestSamplers(t *testing.T) {
	for name, desc := range map[string]string{
		"":                         "ParentBased{root:AlwaysOnSampler",
		"always_on":                "AlwaysOnSampler",
		"always_off":               "AlwaysOffSampler",
		"traceidratio":             "TraceIDRatioBased{1}",
		"parentbased_always_off":   "ParentBased{root:AlwaysOffSampler",
		"parentbased_traceidratio": "ParentBased{root:TraceIDRatioBased{0.25}",
	} {
		arg := ""
		if name == "parentbased_traceidratio" {
			arg = "0.25"
		}
		s, _, err := sampler(name, arg)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.Description(), desc) {
			t.Errorf("%q: %s, want %s", name, s.Description(), desc)
		}
	}
}

func TestOffCostsNothing(t *testing.T) {
	stop, err := setup("zest-test", nil, env(nil), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if Enabled() || ServerOptions() != nil || DialOptions() != nil {
		t.Fatal("off, yet tracing installs something")
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := Start(ctx, "x")
		_ = End(span, nil)
		_ = c
	})
	if allocs != 0 {
		t.Fatalf("Start/End off: %v allocations, want none", allocs)
	}
	// Options are the caller's to build; ended on the no-op span they are dropped.
	_, span := Start(ctx, "x", trace.WithAttributes(attribute.Int("n", 1)))
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("off, a span records")
	}
	if tid, _ := IDs(ctx); tid != "" {
		t.Fatalf("a trace id without a span: %q", tid)
	}
}

func TestSetupExportsAndFlushesOnStop(t *testing.T) {
	r := otlptest.Start(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	stop, err := setup("zest-test", log, env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": r.Endpoint,
		"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment=test",
	}), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !Enabled() || len(ServerOptions()) != 1 || len(DialOptions()) != 1 {
		t.Fatal("on, yet no stats handlers")
	}
	ctx, parent := Start(context.Background(), "parent")
	_, child := Start(ctx, "child")
	_ = End(child, errors.New("boom"))
	parent.End()
	tid, sid := IDs(ctx)
	if len(tid) != 32 || len(sid) != 16 {
		t.Fatalf("IDs = %q %q", tid, sid)
	}
	stop() // flushes: no wait for the batch timer
	stop() // twice is harmless
	if Enabled() {
		t.Fatal("still on after stop")
	}
	spans := r.Trace(tid)
	if len(spans) != 2 {
		t.Fatalf("got %d spans of the trace, want 2: %+v", len(spans), r.Spans())
	}
	byName := map[string]otlptest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
		if s.Service != "zest-test" {
			t.Errorf("service.name %q, want zest-test", s.Service)
		}
	}
	if byName["child"].ParentID != byName["parent"].SpanID || byName["parent"].ParentID != "" {
		t.Fatalf("not linked: %+v", spans)
	}
	if byName["child"].Status != 2 { // STATUS_CODE_ERROR
		t.Fatalf("child status %v, want error", byName["child"].Status)
	}
	if !strings.Contains(logs.String(), "tracing on") {
		t.Fatalf("no startup line: %s", logs.String())
	}
}

func TestServiceNameFromEnvWins(t *testing.T) {
	r := otlptest.Start(t)
	t.Setenv("OTEL_SERVICE_NAME", "edge-eu-1") // the resource reads the process's environment
	stop, err := setup("zest-test", nil, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": r.Endpoint}), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, span := Start(context.Background(), "x")
	span.End()
	stop()
	if s := r.Spans(); len(s) != 1 || s[0].Service != "edge-eu-1" {
		t.Fatalf("spans %+v, want one of service edge-eu-1", s)
	}
}

// A collector that accepts connections and never answers delays the stop by the timeout at
// most.
func TestStopIsBounded(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent
		}
	}()
	var logs bytes.Buffer
	stop, err := setup("zest-test", slog.New(slog.NewTextHandler(&logs, nil)), env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + lis.Addr().String(),
	}), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	_, span := Start(context.Background(), "x")
	span.End()
	began := time.Now()
	stop()
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("stop took %v with a 300ms bound", d)
	}
	if !strings.Contains(logs.String(), "spans not flushed at shutdown") {
		t.Fatalf("no warning about the lost spans: %s", logs.String())
	}
}

func TestErrorLogIsRateLimited(t *testing.T) {
	var logs bytes.Buffer
	e := &errorLog{log: slog.New(slog.NewTextHandler(&logs, nil)), every: time.Hour}
	for range 50 {
		e.Handle(errors.New("connection refused"))
	}
	if n := strings.Count(logs.String(), "export failed"); n != 1 {
		t.Fatalf("%d lines for 50 errors within the interval, want 1", n)
	}
	e.every = 0
	e.Handle(errors.New("again"))
	if !strings.Contains(logs.String(), "similar_errors_not_logged=49") {
		t.Fatalf("the second line does not count the suppressed ones: %s", logs.String())
	}
}

// TestSubscribeSeesEndedSpans: while tracing is on, a reader gets each span ended after it
// subscribed, as OTLP/JSON writes it; a reader that is behind loses spans rather than
// blocking the traced code; cancel ends the subscription.
func TestSubscribeSeesEndedSpans(t *testing.T) {
	stop, err := setup("zest-test", nil, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	got, cancel := Subscribe(1)
	ctx, parent := Start(context.Background(), "parent", trace.WithAttributes(attribute.Int("n", 7), attribute.Bool("b", true)))
	_, child := Start(ctx, "child")
	_ = End(child, errors.New("boom"))
	parent.End() // the buffer of 1 is full: dropped for this reader
	s := <-got
	j := OTLPJSON(s, attribute.String("extra", "x"))
	tid, _ := IDs(ctx)
	if j["name"] != "child" || j["traceId"] != tid || j["parentSpanId"] == nil || j["status"].(map[string]any)["code"] != 2 ||
		j["status"].(map[string]any)["message"] != "boom" {
		t.Fatalf("span JSON: %v", j)
	}
	if a := j["attributes"].([]map[string]any); len(a) != 1 || a[0]["key"] != "extra" {
		t.Fatalf("attributes: %v", a)
	}
	select {
	case s := <-got:
		t.Fatalf("a span past the buffer was kept: %s", s.Name())
	default:
	}
	_, again := Start(context.Background(), "again")
	again.End()
	if j := OTLPJSON(<-got); j["name"] != "again" || j["parentSpanId"] != nil || j["status"].(map[string]any)["code"] != 0 {
		t.Fatalf("span after the drop: %v", j)
	}
	_, p2 := Start(context.Background(), "p2", trace.WithAttributes(attribute.Int("n", 7), attribute.Bool("b", true), attribute.Float64("f", 1.5)))
	p2.End()
	a := OTLPJSON(<-got)["attributes"].([]map[string]any)
	if len(a) != 3 || a[0]["value"].(map[string]any)["intValue"] != "7" || a[1]["value"].(map[string]any)["boolValue"] != true ||
		a[2]["value"].(map[string]any)["doubleValue"] != 1.5 {
		t.Fatalf("attribute values: %v", a)
	}
	cancel()
	cancel()
	_, after := Start(context.Background(), "after")
	after.End()
	select {
	case s := <-got:
		t.Fatalf("a span after cancel: %s", s.Name())
	default:
	}
}
