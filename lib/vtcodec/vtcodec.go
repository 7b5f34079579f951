// Package vtcodec is gRPC's "proto" codec with vtprotobuf's generated code
// (proto/gen/**/*_vtproto.pb.go): a message of ours is sized, encoded and decoded by code
// generated for it instead of by protobuf's reflection; any other message (the health
// service's, reflection's) goes to gRPC's own codec. It replaces that codec by name when the
// package is imported, as gRPC registers its own (encoding.RegisterCodecV2 must be called at
// initialization), so every connection and server of a process that imports it — each
// service imports it through lib/grpcserve and lib/grpcdial — uses it, and so does a codec
// that wraps encoding.GetCodecV2("proto").
package vtcodec

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Message is what vtprotobuf generates for each message (features marshal, unmarshal, size).
type Message interface {
	SizeVT() int
	MarshalToSizedBufferVT(dAtA []byte) (int, error)
	UnmarshalVT(dAtA []byte) error
}

// Codec is the codec, with fallback for messages without generated code.
type Codec struct{ fallback encoding.CodecV2 }

// reflection is gRPC's own proto codec, taken before this one replaces it.
var reflection = encoding.GetCodecV2(grpcproto.Name)

// New returns the codec over gRPC's own proto codec.
func New() Codec { return Codec{fallback: reflection} }

func init() {
	encoding.RegisterCodecV2(New())
}

// Name is gRPC's proto codec's: the content subtype on the wire does not change.
func (Codec) Name() string { return grpcproto.Name }

// Marshal encodes v into one buffer of gRPC's pool.
func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(Message)
	if !ok {
		return c.fallback.Marshal(v)
	}
	size := m.SizeVT()
	if size == 0 {
		return mem.BufferSlice{}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVT((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal decodes data into v; vtprotobuf's decoding copies bytes and strings, so the
// buffer goes back to the pool.
func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(Message)
	if !ok {
		return c.fallback.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return m.UnmarshalVT(buf.ReadOnlyData())
}
