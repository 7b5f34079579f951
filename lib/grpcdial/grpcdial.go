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
	// Client-side health checking (healthCheckConfig in policy.go) runs only when this
	// package is linked in.
	_ "google.golang.org/grpc/health"
	"google.golang.org/grpc/keepalive"
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

// Reconnection and failure detection. A replica killed on a live machine (SIGKILL, a crash)
// has its connections closed by its kernel: the client sees it at once and the balancer stops
// picking it. A restarted replica is connected again within ReconnectMax (the backoff between
// attempts grows from 100 ms to it), then picked once its health answers SERVING. A machine
// that vanishes (power, network) closes nothing: keepalive pings find it within
// KeepaliveTime + KeepaliveTimeout (the health check's stream keeps every connection in use,
// so pings run whenever a connection is silent). grpc-go pings at most every 10 s; lib/grpcserve
// lets clients ping that often (its enforcement policy would else close the connection).
const (
	ReconnectMax     = time.Second
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 3 * time.Second
)

// Dial returns a lazily connecting client for target: one host:port, a comma-separated list
// of host:port, or dns:///name:port (see ParseTarget). Calls are balanced round robin over the
// addresses whose gRPC health answers SERVING, and a read that fails with UNAVAILABLE is sent
// again to another (policy.go). When key is not empty every call carries it as a bearer
// token; every call carries its context's request id. Messages up to maxMsg bytes
// (DefaultMaxMessageBytes when 0) go both ways. Connections are plaintext: services talk on
// loopback or on a private network (docs/operator/deploy.md, "Networks"). opts come last (a
// probe of one process passes grpc.WithDisableHealthCheck to read its status itself).
func Dial(target, key string, maxMsg int, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	t, err := ParseTarget(target)
	if err != nil {
		return nil, fmt.Errorf("grpc client: %v: %s", err, TargetForms)
	}
	if maxMsg <= 0 {
		maxMsg = DefaultMaxMessageBytes
	}
	dialTarget, res := t.grpcTarget()
	all := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(keyauth.Bearer(key)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
		grpc.WithChainUnaryInterceptor(requestid.UnaryClient, metrics.UnaryClient),
		grpc.WithChainStreamInterceptor(requestid.StreamClient, metrics.StreamClient),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithDisableServiceConfig(), // ours only: not one a DNS TXT record carries
		// Services restart in about a second: reconnect within that, not after gRPC's
		// default 1 s → 120 s backoff has grown.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: ReconnectMax},
			MinConnectTimeout: 2 * time.Second,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
	}
	if res != nil {
		all = append(all, grpc.WithResolvers(res))
	}
	all = append(all, opts...)
	// A client span per call, its trace context sent as traceparent, when tracing is on.
	all = append(all, tracing.DialOptions()...)
	cc, err := grpc.NewClient(dialTarget, all...)
	if err != nil {
		return nil, fmt.Errorf("grpc client for %s: %w", target, err)
	}
	return cc, nil
}
