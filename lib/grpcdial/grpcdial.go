// Package grpcdial opens the client connections Zest's services use to reach each other.
package grpcdial

import (
	"fmt"

	"github.com/zestmcp/zest/lib/keyauth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial returns a lazily connecting client for addr ("host:port"). When key is not empty every
// call carries it as a bearer token. Connections are plaintext: services talk on loopback or
// on a private network (see the README's deployment notes).
func Dial(addr, key string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	all := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(keyauth.Bearer(key)),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///"+addr, all...)
	if err != nil {
		return nil, fmt.Errorf("grpc client for %s: %w", addr, err)
	}
	return cc, nil
}
