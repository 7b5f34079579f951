// Package grpcdial opens the client connections Zest's services use to reach each other.
package grpcdial

import (
	"fmt"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/requestid"
	"github.com/zestmcp/zest/lib/tracing"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultMaxMessageBytes is the largest gRPC message a Zest service or client sends or
// receives unless ZEST_GRPC_MAX_MESSAGE_BYTES says otherwise: the edge's largest body
// (ZEST_MAX_BODY_BYTES, 32 MiB) plus room for the fields around it, so that every body the
// edge accepts fits in one call. A larger message fails that call alone (RESOURCE_EXHAUSTED);
// gRPC's own default is 4 MiB.
const DefaultMaxMessageBytes = 40 << 20

// MessageOverhead is the room a message needs beside the body it carries; the edge refuses a
// body limit closer than this to the message limit.
const MessageOverhead = 1 << 20

// DefaultMaxBodyBytes is MaxBodyBytes(DefaultMaxMessageBytes).
const DefaultMaxBodyBytes = DefaultMaxMessageBytes - MessageOverhead

// MaxBodyBytes is the largest body (a request, an answer) that travels in one gRPC message of
// up to maxMsg bytes (DefaultMaxMessageBytes when 0) with the fields around it.
func MaxBodyBytes(maxMsg int) int {
	if maxMsg <= 0 {
		maxMsg = DefaultMaxMessageBytes
	}
	return maxMsg - MessageOverhead
}

// OverheadText is MessageOverhead as it reads in help and error texts ("1 MiB").
var OverheadText = fmt.Sprintf("%d MiB", MessageOverhead>>20)

// Dial returns a lazily connecting client for addr ("host:port"). When key is not empty every
// call carries it as a bearer token; every call carries its context's request id. Messages
// up to maxMsg bytes (DefaultMaxMessageBytes when 0) go both ways. Connections are plaintext:
// services talk on loopback or on a private network (see the README's deployment notes).
func Dial(addr, key string, maxMsg int, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if maxMsg <= 0 {
		maxMsg = DefaultMaxMessageBytes
	}
	all := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(keyauth.Bearer(key)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
		grpc.WithChainUnaryInterceptor(requestid.UnaryClient, metrics.UnaryClient),
		grpc.WithChainStreamInterceptor(requestid.StreamClient, metrics.StreamClient),
		// Services restart in about a second: reconnect within that, not after gRPC's
		// default 1 s → 120 s backoff has grown.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
	}, opts...)
	// A client span per call, its trace context sent as traceparent, when tracing is on.
	all = append(all, tracing.DialOptions()...)
	cc, err := grpc.NewClient("passthrough:///"+addr, all...)
	if err != nil {
		return nil, fmt.Errorf("grpc client for %s: %w", addr, err)
	}
	return cc, nil
}
