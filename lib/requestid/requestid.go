// Package requestid carries one request id through every service a request touches: the edge
// takes the client's X-Request-Id (or makes one) and returns it; gRPC calls carry it as
// x-request-id metadata; each service puts it on its log lines (lib/logging reads it from the
// context), so an operator can follow one request across the suite.
package requestid

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Header is the HTTP header; MetadataKey the gRPC metadata key.
const (
	Header      = "X-Request-Id"
	MetadataKey = "x-request-id"
)

// MaxLen bounds an id taken from a client.
const MaxLen = 128

type ctxKey struct{}

// New returns a fresh random id (16 hex digits).
func New() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Valid reports whether a client's id may be kept: 1–128 characters of [A-Za-z0-9._:-], so
// that it cannot forge log fields or headers.
func Valid(id string) bool {
	if id == "" || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':'
		if !ok {
			return false
		}
	}
	return true
}

// Ensure returns id when it is valid, else a new one.
func Ensure(id string) string {
	if Valid(id) {
		return id
	}
	return New()
}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the id ctx carries ("" when none).
func From(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// fromIncoming takes the id of an incoming gRPC call, or makes one.
func fromIncoming(ctx context.Context) context.Context {
	id := ""
	// ValueFromIncomingContext reads the one key without copying the call's whole metadata.
	if v := metadata.ValueFromIncomingContext(ctx, MetadataKey); len(v) > 0 {
		id = v[0]
	}
	return With(ctx, Ensure(id))
}

// UnaryServer puts the call's id (from metadata, or new) in its context.
func UnaryServer(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(fromIncoming(ctx), req)
}

// StreamServer puts the stream's id (from metadata, or new) in its context.
func StreamServer(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &ctxStream{ServerStream: ss, ctx: fromIncoming(ss.Context())})
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// outgoing adds ctx's id to the outgoing metadata, unless the caller set one.
func outgoing(ctx context.Context) context.Context {
	id := From(ctx)
	if id == "" {
		return ctx
	}
	// ValueFromOutgoingContext looks the one key up without copying the outgoing metadata.
	if len(metadata.ValueFromOutgoingContext(ctx, MetadataKey)) > 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, MetadataKey, id)
}

// UnaryClient sends ctx's id with every unary call.
func UnaryClient(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(outgoing(ctx), method, req, reply, cc, opts...)
}

// StreamClient sends ctx's id with every stream.
func StreamClient(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(outgoing(ctx), desc, cc, method, opts...)
}
