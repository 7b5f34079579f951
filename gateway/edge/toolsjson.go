package edge

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/zestmcp/zest/lib/adminjson"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The tool catalog (GET /internal/mcp/tools) is the admin API's one big answer: every tool
// of every connected server, each with three google.protobuf.Struct (its input schema, the
// tool as the server sent it, the OpenAI function); the servers' states
// (GET /internal/mcp/servers) carry the same entries. Decoding them into Structs and encoding
// those with protojson cost the edge ~170 ms at 390 tools; writing the JSON straight from the
// proto encoding costs a few. So the admin routes' client receives ListTools and ListServers
// undecoded (lazyAdminClient), and the admin marshaler writes them with appendJSON, which writes what
// protojson with EmitUnpopulated writes (fields in declaration order under their JSON names,
// Struct keys sorted, the same escapes and number format). An encoding appendJSON does not
// handle (a field kind the catalog does not use, a repeated singular field, a Value protojson
// refuses) is decoded and written by protojson instead, so that nothing differs but the cost.

// lazyAdminClient is the AdminService client of the admin routes: ListTools and ListServers
// (every server's state carries its tools) keep their answers encoded, as the unknown fields
// of an empty answer, for the admin marshaler.
type lazyAdminClient struct {
	mcpgatewayv1.AdminServiceClient
	cc grpc.ClientConnInterface
}

func (c lazyAdminClient) ListTools(ctx context.Context, in *mcpgatewayv1.ListToolsRequest, opts ...grpc.CallOption) (*mcpgatewayv1.ListToolsResponse, error) {
	out := new(mcpgatewayv1.ListToolsResponse)
	if err := c.invokeLazy(ctx, mcpgatewayv1.AdminService_ListTools_FullMethodName, in, out, opts); err != nil {
		return nil, err
	}
	return out, nil
}

func (c lazyAdminClient) ListServers(ctx context.Context, in *mcpgatewayv1.ListServersRequest, opts ...grpc.CallOption) (*mcpgatewayv1.ListServersResponse, error) {
	out := new(mcpgatewayv1.ListServersResponse)
	if err := c.invokeLazy(ctx, mcpgatewayv1.AdminService_ListServers_FullMethodName, in, out, opts); err != nil {
		return nil, err
	}
	return out, nil
}

func (c lazyAdminClient) invokeLazy(ctx context.Context, method string, in, out proto.Message, opts []grpc.CallOption) error {
	opts = append(opts[:len(opts):len(opts)], grpc.ForceCodecV2(lazyCodec{encoding.GetCodecV2(grpcproto.Name)}))
	return c.cc.Invoke(ctx, method, in, out, opts...)
}

// lazyCodec encodes requests as gRPC's proto codec does, and keeps an answer undecoded in the
// unknown fields of the message it is read into.
type lazyCodec struct{ proto encoding.CodecV2 }

func (c lazyCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c lazyCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(proto.Message).ProtoReflect().SetUnknown(data.Materialize())
	return nil
}

func (c lazyCodec) Name() string { return c.proto.Name() }

// lazyEncoding is the encoding a lazyAdminClient answer carries, if m is one.
func lazyEncoding(m any) (proto.Message, []byte, bool) {
	switch r := m.(type) {
	case *mcpgatewayv1.ListToolsResponse:
		if len(r.GetTools()) == 0 {
			return r, r.ProtoReflect().GetUnknown(), true
		}
	case *mcpgatewayv1.ListServersResponse:
		if len(r.GetServers()) == 0 {
			return r, r.ProtoReflect().GetUnknown(), true
		}
	}
	return nil, nil, false
}

// appendJSON appends the JSON of the message of descriptor md encoded in b; ok is false when
// b holds something it does not handle (the caller then decodes b and uses protojson). It
// writes the admin answers' shape (lib/adminjson): a ServerState's config inline, every field
// of a ServerConfig.
func appendJSON(out []byte, md protoreflect.MessageDescriptor, b []byte) ([]byte, bool) {
	switch md.FullName() {
	case "google.protobuf.Struct":
		return appendStruct(out, b)
	case "google.protobuf.ListValue":
		return appendList(out, b)
	case "google.protobuf.Value":
		return appendValue(out, b)
	}
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return out, false // another well-known type: protojson's own shape
	}
	out = append(out, '{')
	out, _, ok := appendMembers(out, md, b, true)
	return append(out, '}'), ok
}

// appendMembers appends the members of the JSON object of the message of descriptor md
// encoded in b, without braces; first says whether nothing precedes them in their object.
func appendMembers(out []byte, md protoreflect.MessageDescriptor, b []byte, first bool) ([]byte, bool, bool) {
	fields := md.Fields()
	vals := make([][][]byte, fields.Len()) // the encoded values of each field, by index
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return out, first, false
		}
		b = b[n:]
		fd := fields.ByNumber(num)
		if fd == nil { // unknown to this edge: protojson leaves it out too
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return out, first, false
			}
			b = b[n:]
			continue
		}
		v, n := consumeValue(fd, typ, b)
		if n < 0 || (fd.Cardinality() != protoreflect.Repeated && len(vals[fd.Index()]) > 0) {
			return out, first, false // a singular field twice: proto merges, protojson decides
		}
		b = b[n:]
		vals[fd.Index()] = append(vals[fd.Index()], v)
	}
	every := adminjson.EveryField(md)
	for i := range fields.Len() {
		fd := fields.Get(i)
		var ok bool
		if adminjson.Inlined(fd) {
			var v []byte // an unset config: every field's zero value
			if len(vals[i]) > 0 {
				v = vals[i][0]
			}
			if out, first, ok = appendMembers(out, fd.Message(), v, first); !ok {
				return out, first, false
			}
			continue
		}
		if len(vals[i]) == 0 && fd.ContainingOneof() != nil && !every {
			continue // protojson emits no unpopulated oneof member
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out, _ = appendString(out, fd.JSONName())
		out = append(out, ':')
		if fd.IsMap() {
			if out, ok = appendStringMap(out, vals[i]); !ok {
				return out, first, false
			}
			continue
		}
		if fd.Cardinality() == protoreflect.Repeated {
			out = append(out, '[')
			for j, v := range vals[i] {
				if j > 0 {
					out = append(out, ',')
				}
				if out, ok = appendField(out, fd, v); !ok {
					return out, first, false
				}
			}
			out = append(out, ']')
			continue
		}
		if len(vals[i]) == 0 {
			out = appendZero(out, fd, every)
			continue
		}
		if out, ok = appendField(out, fd, vals[i][0]); !ok {
			return out, first, false
		}
	}
	return out, first, true
}

// consumeValue reads one value of fd (a string, bool, int32, int64, message or
// map<string, string> entry, as the catalog's and the servers' states have) from b, which follows a tag of wire
// type typ: the value's bytes and their length.
func consumeValue(fd protoreflect.FieldDescriptor, typ protowire.Type, b []byte) ([]byte, int) {
	if fd.IsMap() {
		if typ != protowire.BytesType || fd.MapKey().Kind() != protoreflect.StringKind || fd.MapValue().Kind() != protoreflect.StringKind {
			return nil, -1
		}
		return protowire.ConsumeBytes(b)
	}
	if fd.IsPacked() {
		return nil, -1
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.MessageKind:
		if typ != protowire.BytesType {
			return nil, -1
		}
		return protowire.ConsumeBytes(b)
	case protoreflect.BoolKind, protoreflect.Int32Kind, protoreflect.Int64Kind:
		if typ != protowire.VarintType {
			return nil, -1
		}
		_, n := protowire.ConsumeVarint(b)
		return b[:max(n, 0)], n
	}
	return nil, -1
}

// appendField appends one value of fd read by consumeValue.
func appendField(out []byte, fd protoreflect.FieldDescriptor, v []byte) ([]byte, bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return appendString(out, v)
	case protoreflect.BoolKind:
		x, _ := protowire.ConsumeVarint(v)
		return strconv.AppendBool(out, x != 0), true
	case protoreflect.Int32Kind:
		x, _ := protowire.ConsumeVarint(v)
		return strconv.AppendInt(out, int64(int32(x)), 10), true
	case protoreflect.Int64Kind: // a string, as protojson writes 64-bit numbers
		x, _ := protowire.ConsumeVarint(v)
		return append(strconv.AppendInt(append(out, '"'), int64(x), 10), '"'), true
	case protoreflect.MessageKind:
		return appendJSON(out, fd.Message(), v)
	}
	return out, false
}

// appendStringMap appends a map<string, string> from its encoded entries (key = 1,
// value = 2) as one object, keys sorted as protojson sorts them.
func appendStringMap(out []byte, entries [][]byte) ([]byte, bool) {
	pairs := make([]mapPair, 0, len(entries))
	for _, e := range entries {
		p, _, ok := readMapEntry(e)
		if !ok || !utf8.Valid(p.value) { // an unset value is "", as in proto
			return out, false
		}
		pairs = append(pairs, p)
	}
	return appendSortedObject(out, pairs, appendString[[]byte])
}

// mapPair is one map entry's key and encoded value.
type mapPair struct{ key, value []byte }

// readMapEntry reads a map entry whose key (1) and value (2) are length-delimited; hasValue
// reports whether the value was set. ok is false for an encoding proto refuses or that
// protojson must decide: a key that is not UTF-8 (proto checks every key it reads, even one a
// later key replaces), a value given twice.
func readMapEntry(e []byte) (p mapPair, hasValue, ok bool) {
	for len(e) > 0 {
		num, typ, n := consumeTag(e)
		if n < 0 {
			return p, false, false
		}
		e = e[n:]
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(e)
			if n < 0 {
				return p, false, false
			}
			if num == 1 {
				if !utf8.Valid(v) {
					return p, false, false
				}
				p.key = v
			} else {
				if hasValue {
					return p, false, false
				}
				p.value, hasValue = v, true
			}
			e = e[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, e); n < 0 {
			return p, false, false
		}
		e = e[n:]
	}
	return p, hasValue, true
}

// appendSortedObject appends pairs as one JSON object, keys sorted as protojson sorts them,
// each value written by value; a key given twice is declined (the last wins in proto,
// decided by protojson).
func appendSortedObject(out []byte, pairs []mapPair, value func([]byte, []byte) ([]byte, bool)) ([]byte, bool) {
	slices.SortFunc(pairs, func(a, b mapPair) int { return bytes.Compare(a.key, b.key) })
	out = append(out, '{')
	for i, p := range pairs {
		if i > 0 {
			if bytes.Equal(p.key, pairs[i-1].key) {
				return out, false
			}
			out = append(out, ',')
		}
		var ok bool
		if out, ok = appendString(out, p.key); !ok {
			return out, false
		}
		out = append(out, ':')
		if out, ok = value(out, p.value); !ok {
			return out, false
		}
	}
	return append(out, '}'), true
}

// appendZero appends what protojson with EmitUnpopulated writes for an unset singular field
// (null for one with presence), or, in a message written with every field, its zero value.
func appendZero(out []byte, fd protoreflect.FieldDescriptor, every bool) []byte {
	if every || !fd.HasPresence() {
		return append(out, adminjson.ZeroJSON(fd)...)
	}
	return append(out, "null"...)
}

// appendStruct appends a google.protobuf.Struct: its fields (map<string, Value>, field 1)
// as one object, keys sorted as protojson sorts them.
func appendStruct(out []byte, b []byte) ([]byte, bool) {
	var scratch [16]mapPair // a schema's object rarely has more keys
	pairs := scratch[:0]
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return out, false
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return out, false
			}
			b = b[n:]
			continue
		}
		e, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return out, false
		}
		b = b[n:]
		p, hasValue, ok := readMapEntry(e)
		if !ok || !hasValue { // an unset Value: protojson refuses it
			return out, false
		}
		pairs = append(pairs, p)
	}
	return appendSortedObject(out, pairs, appendValue)
}

// appendList appends a google.protobuf.ListValue (repeated Value values = 1).
func appendList(out []byte, b []byte) ([]byte, bool) {
	out = append(out, '[')
	first := true
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return out, false
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return out, false
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return out, false
		}
		b = b[n:]
		if !first {
			out = append(out, ',')
		}
		first = false
		var ok bool
		if out, ok = appendValue(out, v); !ok {
			return out, false
		}
	}
	return append(out, ']'), true
}

// appendValue appends a google.protobuf.Value: exactly one of null_value (1), number_value
// (2), string_value (3), bool_value (4), struct_value (5), list_value (6).
func appendValue(out []byte, b []byte) ([]byte, bool) {
	var kind protowire.Number
	var raw []byte
	var num64 uint64
	var varint uint64
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return out, false
		}
		b = b[n:]
		if num < 1 || num > 6 {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return out, false
			}
			b = b[n:]
			continue
		}
		if kind != 0 {
			return out, false // two kinds: the last wins in proto, decided by protojson
		}
		kind = num
		switch {
		case (num == 1 || num == 4) && typ == protowire.VarintType:
			varint, n = protowire.ConsumeVarint(b)
		case num == 2 && typ == protowire.Fixed64Type:
			num64, n = protowire.ConsumeFixed64(b)
		case (num == 3 || num == 5 || num == 6) && typ == protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			return out, false
		}
		if n < 0 {
			return out, false
		}
		b = b[n:]
	}
	switch kind {
	case 1:
		return append(out, "null"...), varint == 0
	case 2:
		f := math.Float64frombits(num64)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return out, false // protojson refuses them in a Value
		}
		return appendFloat(out, f), true
	case 3:
		return appendString(out, raw)
	case 4:
		return strconv.AppendBool(out, varint != 0), true
	case 5:
		return appendStruct(out, raw)
	case 6:
		return appendList(out, raw)
	}
	return out, false // no kind: protojson refuses it
}

// appendString appends s quoted as protojson quotes it: ", \ and control characters escaped
// (\b \f \n \r \t, else \u00XX), everything else as it is; false for invalid UTF-8, which
// protojson refuses.
func appendString[T string | []byte](out []byte, s T) ([]byte, bool) {
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			if r == utf8.RuneError && n == 1 {
				return out, false
			}
			i += n
			continue
		}
		if c >= ' ' && c != '"' && c != '\\' {
			i++
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
		}
		i++
		start = i
	}
	return append(append(out, s[start:]...), '"'), true
}

const hexDigit = "0123456789abcdef"

// appendFloat appends f as protojson (and encoding/json) writes a double: the shortest
// representation, with an exponent below 1e-6 and from 1e21 on.
func appendFloat(out []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	out = strconv.AppendFloat(out, f, format, -1, 64)
	if format == 'e' { // e-07 → e-7
		if n := len(out); n >= 4 && out[n-4] == 'e' && out[n-3] == '-' && out[n-2] == '0' {
			out[n-2] = out[n-1]
			out = out[:n-1]
		}
	}
	return out
}

// consumeTag is protowire.ConsumeTag refusing the field numbers proto refuses (0, the
// reserved 19000-19999 are accepted as proto accepts them, above 2^29-1), so that an encoding
// proto.Unmarshal rejects is declined here too.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && (num < protowire.MinValidNumber || num > protowire.MaxValidNumber) {
		return 0, 0, -1
	}
	return num, typ, n
}
