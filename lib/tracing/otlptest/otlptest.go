// Package otlptest is an OTLP/gRPC trace receiver for tests: the collector's TraceService on
// 127.0.0.1, keeping every span it is sent, so a test can check what the services exported.
package otlptest

import (
	"context"
	"encoding/hex"
	"net"
	"strconv"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened: its ids in hex (ParentID "" for a root) and the
// service.name of its resource.
type Span struct {
	Service  string
	Name     string
	TraceID  string
	SpanID   string
	ParentID string
	Kind     tracepb.Span_SpanKind
	Attrs    map[string]string // string, int and bool attributes as text
	Status   tracepb.Status_StatusCode
	// Raw is the span as it came (protobuf wire format): its events, links and status message
	// too, every string in the clear, for a test that looks for one anywhere.
	Raw []byte
}

// Receiver is a running TraceService.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	// Endpoint is the receiver's URL for OTEL_EXPORTER_OTLP_ENDPOINT (plaintext).
	Endpoint string
	mu       sync.Mutex
	spans    []Span
	got      chan struct{} // signalled on every export
}

// Start serves a Receiver on a free loopback port until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Endpoint: "http://" + lis.Addr().String(), got: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r
}

// Export implements TraceService: it keeps the spans.
func (r *Receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{Service: service, Name: sp.GetName(), TraceID: hex.EncodeToString(sp.GetTraceId()),
					SpanID: hex.EncodeToString(sp.GetSpanId()), Kind: sp.GetKind(), Attrs: map[string]string{},
					Status: sp.GetStatus().GetCode()}
				s.Raw, _ = proto.Marshal(sp)
				if len(sp.GetParentSpanId()) > 0 {
					s.ParentID = hex.EncodeToString(sp.GetParentSpanId())
				}
				for _, kv := range sp.GetAttributes() {
					s.Attrs[kv.GetKey()] = text(kv.GetValue())
				}
				got = append(got, s)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return v.GetStringValue()
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Trace returns the spans of one trace.
func (r *Receiver) Trace(traceID string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// Exported is signalled (without blocking the exporter) after each export arrives.
func (r *Receiver) Exported() <-chan struct{} { return r.got }
