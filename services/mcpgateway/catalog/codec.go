package catalog

import (
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Codec is gRPC's proto codec, but for the answers that carry the catalog's entries, whose
// encodings the snapshot kept when it built them: the current snapshot's ListTools answer is
// sent as the bytes it kept, and a ListServers answer has each server's state encoded
// without its tools and its tools appended from the kept encodings, so that answering costs
// copies, not an encoding of every tool's three Structs. Install it with
// grpc.ForceServerCodecV2.
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
	if r, ok := v.(*mcpgatewayv1.ListServersResponse); ok {
		b, err := k.cat.encodeServers(r)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return k.proto.Marshal(v)
}

func (k codec) Unmarshal(data mem.BufferSlice, v any) error { return k.proto.Unmarshal(data, v) }

func (k codec) Name() string { return k.proto.Name() }

// The fields the codec writes itself.
var (
	listToolsField   = fieldOf(&mcpgatewayv1.ListToolsResponse{}, "tools")
	listServersField = fieldOf(&mcpgatewayv1.ListServersResponse{}, "servers")
	stateToolsField  = fieldOf(&mcpgatewayv1.ServerState{}, "tools")
)

func fieldOf(m proto.Message, name protoreflect.Name) protoreflect.FieldDescriptor {
	return m.ProtoReflect().Descriptor().Fields().ByName(name)
}

// appendEntry appends one entry of a repeated ToolEntry field fd, already encoded.
func appendEntry(b []byte, fd protoreflect.FieldDescriptor, wire []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, fd.Number(), protowire.BytesType), wire)
}

// encodeServers encodes a ListServers answer: each state without its tools by the proto
// encoder, then its tools from the encodings the current snapshot kept for them (encoded
// here when the snapshot holds other entries for that server).
func (c *Catalog) encodeServers(r *mcpgatewayv1.ListServersResponse) ([]byte, error) {
	snap := c.cur.Load()
	var out []byte
	for _, st := range r.GetServers() {
		shell := &mcpgatewayv1.ServerState{}
		sr := shell.ProtoReflect()
		st.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if fd != stateToolsField {
				sr.Set(fd, v) // shared, not copied: the shell is only encoded
			}
			return true
		})
		body, err := proto.Marshal(shell)
		if err != nil {
			return nil, err
		}
		wires := snap.wiresOf(st.GetConfig().GetId(), st.GetTools())
		for i, e := range st.GetTools() {
			w := wires[i]
			if w == nil {
				if w, err = (proto.MarshalOptions{Deterministic: true}).Marshal(e); err != nil {
					return nil, err
				}
			}
			body = appendEntry(body, stateToolsField, w)
		}
		out = appendEntry(out, listServersField, body)
	}
	return out, nil
}

// wiresOf returns the kept encodings of entries when they are the entries s holds for
// server id, else a slice of nils.
func (s *Snapshot) wiresOf(id string, entries []*mcpgatewayv1.ToolEntry) [][]byte {
	if v := s.view(id); v != nil && len(v.entries) == len(entries) {
		same := true
		for i, e := range entries {
			if v.entries[i] != e || v.wires[i] == nil {
				same = false
				break
			}
		}
		if same {
			return v.wires
		}
	}
	return make([][]byte, len(entries))
}
