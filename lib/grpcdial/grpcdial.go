// Package grpcdial opens the client connections Zest's services use to reach each other.
package grpcdial

import (
	"fmt"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial returns a lazily connecting client for addr ("host:port"). When key is not empty every
// call carries it as a bearer token. Connections are plaintext: services talk on loopback or
// on a private network (see the README's deployment notes).
func Dial(addr, key string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	all := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(keyauth.Bearer(key)),
		// Services restart in about a second: reconnect within that, not after gRPC's
		// default 1 s → 120 s backoff has grown.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///"+addr, all...)
	if err != nil {
		return nil, fmt.Errorf("grpc client for %s: %w", addr, err)
	}
	return cc, nil
}
