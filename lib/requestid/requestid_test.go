package requestid

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

// An incoming call keeps a valid id of its metadata and gets a new one otherwise.
func TestFromIncoming(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   metadata.MD
		keep string
	}{
		{name: "valid", md: metadata.Pairs(MetadataKey, "abc-1", "authorization", "Bearer k"), keep: "abc-1"},
		{name: "first of two", md: metadata.Pairs(MetadataKey, "first", MetadataKey, "second"), keep: "first"},
		{name: "invalid", md: metadata.Pairs(MetadataKey, "bad id\n")},
		{name: "absent", md: metadata.Pairs("authorization", "Bearer k")},
		{name: "no metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tc.md)
			}
			got := From(fromIncoming(ctx))
			switch {
			case tc.keep != "" && got != tc.keep:
				t.Fatalf("id = %q, want %q", got, tc.keep)
			case tc.keep == "" && (!Valid(got) || len(got) != 16):
				t.Fatalf("id = %q, want a new one (16 hex digits)", got)
			}
		})
	}
}

// An outgoing call carries the context's id unless the caller set one, in any case of the key.
func TestOutgoing(t *testing.T) {
	sent := func(ctx context.Context) []string {
		md, _ := metadata.FromOutgoingContext(outgoing(ctx))
		return md.Get(MetadataKey)
	}
	bg := context.Background()
	if got := sent(bg); len(got) != 0 {
		t.Fatalf("without an id: sent %q, want nothing", got)
	}
	if got := sent(With(metadata.AppendToOutgoingContext(bg, "authorization", "Bearer k"), "ctx-id")); len(got) != 1 || got[0] != "ctx-id" {
		t.Fatalf("sent %q, want [ctx-id]", got)
	}
	if got := sent(With(metadata.AppendToOutgoingContext(bg, MetadataKey, "caller"), "ctx-id")); len(got) != 1 || got[0] != "caller" {
		t.Fatalf("the caller's appended id: sent %q, want [caller]", got)
	}
	if got := sent(With(metadata.NewOutgoingContext(bg, metadata.MD{"X-Request-Id": {"caller"}}), "ctx-id")); len(got) != 1 || got[0] != "caller" {
		t.Fatalf("the caller's id under a mixed-case key: sent %q, want [caller]", got)
	}
}
