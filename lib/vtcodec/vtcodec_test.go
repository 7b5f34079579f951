package vtcodec

import (
	"strings"
	"testing"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"
)

// Loaded so that the registry holds every message of ours.
var _ = []any{inferencev1.File_zest_inference_v1_inference_proto, mcpgatewayv1.File_zest_mcpgateway_v1_admin_proto, toolhostv1.File_zest_toolhost_v1_toolhost_proto}

// TestRegisteredAsProto: gRPC's "proto" codec is this one once the package is imported.
func TestRegisteredAsProto(t *testing.T) {
	if _, ok := encoding.GetCodecV2(grpcproto.Name).(Codec); !ok {
		t.Fatalf("the proto codec is %T", encoding.GetCodecV2(grpcproto.Name))
	}
}

// TestEveryMessageOfOursIsGenerated: each zest.* message has vtprotobuf's code, so none falls
// back to reflection (a .proto added without `make generate`'s vtproto plugin would).
func TestEveryMessageOfOursIsGenerated(t *testing.T) {
	n := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if !strings.HasPrefix(string(mt.Descriptor().FullName()), "zest.") {
			return true
		}
		n++
		if _, ok := mt.New().Interface().(Message); !ok {
			t.Errorf("%s has no vtprotobuf code: run make generate", mt.Descriptor().FullName())
		}
		return true
	})
	if n < 50 {
		t.Fatalf("only %d zest messages registered", n)
	}
}

// TestSameBytesBothWays: the codec's encoding is the reflection codec's, and each decodes the
// other's; a message without generated code (the health service's) goes to gRPC's codec.
func TestSameBytesBothWays(t *testing.T) {
	args, _ := structpb.NewStruct(map[string]any{"nested": map[string]any{"a": []any{true, nil, 2.0, "hi"}}}) // one key a map: its order is random
	msgs := []proto.Message{
		&mcpgatewayv1.HttpServiceExchangeRequest{Kind: &mcpgatewayv1.HttpServiceExchangeRequest_Request{Request: &mcpgatewayv1.HttpRequest{
			Method: "POST", Path: "/mcp/servers/everything", Headers: []*mcpgatewayv1.HttpHeader{{Name: "Accept", Values: []string{"application/json", "text/event-stream"}}},
			Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)}}},
		&mcpgatewayv1.HttpServiceExchangeResponse{Kind: &mcpgatewayv1.HttpServiceExchangeResponse_Head{Head: &mcpgatewayv1.HttpResponseHead{Status: 200, Body: []byte(`{}`)}}},
		&toolhostv1.CallRequest{Id: "everything", Method: "tools/call", Params: []byte(`{"name":"echo"}`), Relays: &toolhostv1.Relays{Sampling: true}},
		&toolhostv1.CallResponse{Answer: &toolhostv1.CallResponse_Error{Error: &toolhostv1.JsonRpcError{Code: -32602, Message: "bad"}}},
		&mcpgatewayv1.CallToolRequest{Id: "s", Name: "t", Arguments: args},
		&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING},
	}
	vt := New()
	ref := vt.fallback // gRPC's own, by reflection
	if _, ok := ref.(Codec); ok {
		t.Fatal("the fallback is this codec")
	}
	for _, m := range msgs {
		name := string(m.ProtoReflect().Descriptor().FullName())
		got, err := vt.Marshal(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, err := ref.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Materialize()) != string(want.Materialize()) {
			t.Errorf("%s: encoded %x, reflection %x", name, got.Materialize(), want.Materialize())
		}
		back := m.ProtoReflect().New().Interface()
		if err := vt.Unmarshal(want, back); err != nil || !proto.Equal(back, m) {
			t.Errorf("%s: decoded %v (%v), want %v", name, back, err, m)
		}
		got.Free()
		want.Free()
	}
}

// pathMessages are the messages one federated tool call sends over the seams: the edge's
// request and mcpgateway's head, the tool host's request and answer.
func pathMessages() []proto.Message {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"bench"}}}`)
	return []proto.Message{
		&mcpgatewayv1.HttpServiceExchangeRequest{Kind: &mcpgatewayv1.HttpServiceExchangeRequest_Request{Request: &mcpgatewayv1.HttpRequest{
			Method: "POST", Path: "/mcp/servers/everything", Body: body, Headers: []*mcpgatewayv1.HttpHeader{
				{Name: "Accept", Values: []string{"application/json, text/event-stream"}}, {Name: "Content-Type", Values: []string{"application/json"}},
				{Name: "Mcp-Session-Id", Values: []string{strings.Repeat("s", 120)}}, {Name: "Mcp-Protocol-Version", Values: []string{"2025-11-25"}},
				{Name: "X-Request-Id", Values: []string{"0123456789abcdef"}}}}}},
		&mcpgatewayv1.HttpServiceExchangeResponse{Kind: &mcpgatewayv1.HttpServiceExchangeResponse_Head{Head: &mcpgatewayv1.HttpResponseHead{Status: 200,
			Headers: []*mcpgatewayv1.HttpHeader{{Name: "Content-Type", Values: []string{"application/json"}}, {Name: "Content-Length", Values: []string{"84"}}},
			Body:    []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Echo: bench"}]}}`)}}},
		&toolhostv1.CallRequest{Id: "everything", Method: "tools/call", Params: []byte(`{"name":"echo","arguments":{"message":"bench"}}`), Relays: &toolhostv1.Relays{}},
		&toolhostv1.CallResponse{Answer: &toolhostv1.CallResponse_Result{Result: []byte(`{"content":[{"type":"text","text":"Echo: bench"}]}`)}},
	}
}

// BenchmarkCodec encodes and decodes the path's four messages, by generated code and by
// reflection: go test -run '^$' -bench Codec -benchmem ./lib/vtcodec/
func BenchmarkCodec(b *testing.B) {
	msgs := pathMessages()
	for _, c := range []struct {
		name  string
		codec encoding.CodecV2
	}{{"vtprotobuf", New()}, {"reflection", reflection}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, m := range msgs {
					data, err := c.codec.Marshal(m)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.codec.Unmarshal(data, m.ProtoReflect().New().Interface()); err != nil {
						b.Fatal(err)
					}
					data.Free()
				}
			}
		})
	}
}
