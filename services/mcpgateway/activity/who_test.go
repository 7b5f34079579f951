package activity

import (
	"context"
	"testing"

	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/keyauth"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// TestCallersNameConfiguredKeysOnly: a token names its holder only when it is a configured
// key (the API key or the admin key); any other token — which gets through only while no API
// key is set — is anonymous, as no token is, so that a caller can neither pick its name nor
// take another's. The service key names nobody.
func TestCallersNameConfiguredKeysOnly(t *testing.T) {
	both := keyauth.Keys{API: "the-api-key", Admin: "the-admin-key", Service: "the-service-key-0123"}
	adminOnly := keyauth.Keys{Admin: "the-admin-key"}
	for _, c := range []struct {
		name          string
		keys          keyauth.Keys
		authorization string
		want          string
	}{
		{"the API key", both, "Bearer the-api-key", Who("the-api-key")},
		{"the admin key", both, "Bearer the-admin-key", Who("the-admin-key")},
		{"the scheme in any case", both, "bearer the-api-key", Who("the-api-key")},
		{"no token", both, "", Anonymous},
		{"another scheme", both, "Basic the-api-key", Anonymous},
		{"the service key", both, "Bearer the-service-key-0123", Anonymous},
		{"a key's prefix", both, "Bearer the-api-ke", Anonymous},
		{"no API key: a token the caller chose", adminOnly, "Bearer chosen-by-the-caller", Anonymous},
		{"no API key: the admin key", adminOnly, "Bearer the-admin-key", Who("the-admin-key")},
		{"no key at all", keyauth.Keys{}, "Bearer anything", Anonymous},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := NewCallers(c.keys)
			if got := cs.Of(c.authorization); got != c.want {
				t.Errorf("Of(%q) = %q, want %q", c.authorization, got, c.want)
			}
			ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", c.authorization))
			if got := WhoOf(cs.Context(ctx)); got != c.want {
				t.Errorf("WhoOf(Context) = %q, want %q", got, c.want)
			}
		})
	}
	if len(Who("the-api-key")) != 12 || Who("") != Anonymous {
		t.Errorf("Who: %q %q", Who("the-api-key"), Who(""))
	}
	var none *Callers
	if none.Of("Bearer the-api-key") != Anonymous {
		t.Error("a nil Callers named a caller")
	}
}

// TestWhoOfReadsNoToken: a context nobody named is anonymous, whatever token its metadata
// carries — WhoOf never hashes a caller's token itself.
func TestWhoOfReadsNoToken(t *testing.T) {
	ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer the-api-key"))
	if got := WhoOf(ctx); got != Anonymous {
		t.Fatalf("WhoOf of an unnamed call = %q, want %s", got, Anonymous)
	}
}

// whoHealth records WhoOf of the calls it serves.
type whoHealth struct {
	healthpb.UnimplementedHealthServer
	got chan string
}

func (h *whoHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.got <- WhoOf(ctx)
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *whoHealth) Watch(_ *healthpb.HealthCheckRequest, s grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	h.got <- WhoOf(s.Context())
	return s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// TestCallersServerOptions: through a gRPC server, unary and streaming handlers read the name
// of their caller.
func TestCallersServerOptions(t *testing.T) {
	h := &whoHealth{got: make(chan string, 1)}
	cs := NewCallers(keyauth.Keys{Admin: "the-admin-key"})
	cc := grpctest.Loopback(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, h) }, cs.ServerOptions()...)
	client := healthpb.NewHealthClient(cc)
	for token, want := range map[string]string{"the-admin-key": Who("the-admin-key"), "chosen": Anonymous, "": Anonymous} {
		ctx := t.Context()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		if got := <-h.got; got != want {
			t.Errorf("unary call with %q: who %q, want %q", token, got, want)
		}
		w, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatal(err)
		}
		if got := <-h.got; got != want {
			t.Errorf("streaming call with %q: who %q, want %q", token, got, want)
		}
	}
}

// BenchmarkCallersContext is what naming the caller adds to each gRPC call: its token hashed
// once and compared with the configured keys.
func BenchmarkCallersContext(b *testing.B) {
	cs := NewCallers(keyauth.Keys{API: "zest-bench-api-key", Admin: "zest-bench-admin-key"})
	ctx := metadata.NewIncomingContext(b.Context(), metadata.Pairs("authorization", "Bearer zest-bench-api-key"))
	b.ReportAllocs()
	for b.Loop() {
		if WhoOf(cs.Context(ctx)) == Anonymous {
			b.Fatal("the API key is anonymous")
		}
	}
}
