package catalog

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Codec is gRPC's proto codec, but for the current snapshot's ListTools answer, whose
// encoding was kept when the snapshot was built: those bytes are sent as they are, so that
// answering the catalog costs a copy, not an encoding of every tool's three Structs. Install
// it with grpc.ForceServerCodecV2.
func (c *Catalog) Codec() encoding.CodecV2 {
	return codec{cat: c, proto: encoding.GetCodecV2(grpcproto.Name)}
}

type codec struct {
	cat   *Catalog
	proto encoding.CodecV2
}

func (k codec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := k.cat.Encoded(v); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return k.proto.Marshal(v)
}

func (k codec) Unmarshal(data mem.BufferSlice, v any) error { return k.proto.Unmarshal(data, v) }

func (k codec) Name() string { return k.proto.Name() }
