package grpcdial

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// LogUnavailable returns the dial options that log, at warn to log, each call that fails
// UNAVAILABLE, with its method and the replica it was sent to ("replica"; empty when no
// replica was reachable to send it to). Such a call was in flight on a replica that died, or
// sent to one whose connection had closed before its caller saw it close: a SIGKILLed
// replica's kernel closes its connections at once, but under load the caller's reader may run
// tens of milliseconds later, and a call it sends meanwhile fails (docs/operator/scale-out.md,
// "Several inference nodes and mcpgateways"). It is never sent again unless its method is a read (policy.go). The
// line names which replica an operator should look at; its request_id joins it to the
// caller's access line.
func LogUnavailable(log *slog.Logger) []grpc.DialOption {
	u := unavailableLog{log}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(u.unary), grpc.WithChainStreamInterceptor(u.stream)}
}

type unavailableLog struct{ log *slog.Logger }

// healthMethods are not logged: a failed health check is the caller's health state, which
// says so itself (a replica out of the balance, "tool host down").
const healthMethods = "/grpc.health.v1.Health/"

func (u unavailableLog) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	if err != nil {
		u.failed(ctx, method, &p, err)
	}
	return err
}

func (u unavailableLog) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	p := &peer.Peer{}
	s, err := streamer(ctx, desc, cc, method, append(opts, grpc.Peer(p))...)
	if err != nil {
		u.failed(ctx, method, p, err)
		return nil, err
	}
	return &unavailableStream{ClientStream: s, u: u, ctx: ctx, method: method, peer: p}, nil
}

// failed logs err when it is UNAVAILABLE. p is filled when the call reached a connection.
func (u unavailableLog) failed(ctx context.Context, method string, p *peer.Peer, err error) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || strings.HasPrefix(method, healthMethods) {
		return
	}
	replica := ""
	if p.Addr != nil {
		replica = p.Addr.String()
	}
	u.log.WarnContext(ctx, "a call failed: the replica it was sent to was unreachable or went away",
		"method", method, "replica", replica, "err", st.Message())
}

// unavailableStream logs the error that ends a stream (gRPC fills the peer as it ends).
type unavailableStream struct {
	grpc.ClientStream
	u      unavailableLog
	ctx    context.Context
	method string
	peer   *peer.Peer
}

func (s *unavailableStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil && !errors.Is(err, io.EOF) {
		s.u.failed(s.ctx, s.method, s.peer, err)
	}
	return err
}
