package adminjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The admin answers' JSON is protojson's (every field emitted, snake_case names) but for two
// rules that keep the flat shape Lemonade's GUI reads, now that a server's state embeds its
// config (ServerState.config) and the config has field presence:
//
//   - Inline: a ServerState's config is written as the state's own fields, where config stands,
//     so that a state is one object {id, name, …, status, connected, tools, …}.
//   - Every field: each field of a ServerConfig is written, one that is unset as its zero value
//     ("", 0, false; null for the sandbox, as protojson writes an unset message), as before the
//     config had presence: a script finds the same keys every time.
//
// Shape applies them to protojson's JSON; the edge's writer of ListServers from its encoding
// (gateway/edge, appendJSON) applies the same rules, and a test holds the two together.

var (
	stateConfig  = (&mcpgatewayv1.ServerState{}).ProtoReflect().Descriptor().Fields().ByName("config")
	configFullNm = (&mcpgatewayv1.ServerConfig{}).ProtoReflect().Descriptor().FullName()
)

// Inlined reports whether fd's value is written as its parent's own fields (ServerState.config).
func Inlined(fd protoreflect.FieldDescriptor) bool { return fd == stateConfig }

// EveryField reports whether every field of a message of md is written, an unset one as its
// zero value (ServerConfig).
func EveryField(md protoreflect.MessageDescriptor) bool { return md.FullName() == configFullNm }

// ZeroJSON is the JSON of an unset field fd of a message written with EveryField: "" for a
// string, 0 for a number (a string "0" for the 64-bit ones, as protojson writes them), false,
// [] for a list, {} for a map, null for a message.
func ZeroJSON(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "{}"
	case fd.IsList():
		return "[]"
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind:
		return `""`
	case protoreflect.BoolKind:
		return "false"
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return `"0"`
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "null"
	case protoreflect.EnumKind:
		return `"` + string(fd.Enum().Values().ByNumber(0).Name()) + `"`
	}
	return "0"
}

// reachCache remembers, by message name, whether a message holds a ServerState or a
// ServerConfig somewhere (the only messages Shape changes).
var reachCache sync.Map

// reaches reports whether md is, or holds through its message fields, a ServerState or a
// ServerConfig.
func reaches(md protoreflect.MessageDescriptor) bool {
	if v, ok := reachCache.Load(md.FullName()); ok {
		return v.(bool)
	}
	r := reachesFrom(md, map[protoreflect.FullName]bool{})
	reachCache.Store(md.FullName(), r)
	return r
}

func reachesFrom(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if EveryField(md) || md.FullName() == stateConfig.ContainingMessage().FullName() {
		return true
	}
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		if m := fields.Get(i).Message(); m != nil && reachesFrom(m, seen) {
			return true
		}
	}
	return false
}

// Shape rewrites b, protojson's JSON of a message of md written with every field emitted
// (EmitUnpopulated; JSON or proto names), into the admin answers' shape: the rules above. A
// message that holds no ServerState or ServerConfig is returned as it is.
func Shape(md protoreflect.MessageDescriptor, b []byte) ([]byte, error) {
	if !reaches(md) {
		return b, nil
	}
	out, err := shapeMessage(make([]byte, 0, len(b)+len(b)/8), md, b)
	if err != nil {
		return nil, fmt.Errorf("admin JSON of %s: %w", md.FullName(), err)
	}
	return out, nil
}

// member is one member of a JSON object, its value raw.
type member struct {
	key   string
	value json.RawMessage
}

// members reads a JSON object's members in order.
func members(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{t.(string), v})
	}
	return out, nil
}

// shapeMessage appends the shaped object of a message of md written as b (an object, or null).
func shapeMessage(out []byte, md protoreflect.MessageDescriptor, b []byte) ([]byte, error) {
	out = append(out, '{')
	out, _, err := shapeMembers(out, md, b, true)
	return append(out, '}'), err
}

// shapeMembers appends the members of the shaped object of a message of md written as b,
// without braces; first says whether nothing precedes them in their object.
func shapeMembers(out []byte, md protoreflect.MessageDescriptor, b []byte, first bool) ([]byte, bool, error) {
	var ms []member
	if t := bytes.TrimSpace(b); !bytes.Equal(t, []byte("null")) {
		var err error
		if ms, err = members(t); err != nil {
			return out, first, err
		}
	}
	byName := make(map[string]json.RawMessage, len(ms))
	for _, m := range ms {
		byName[m.key] = m.value
	}
	every := EveryField(md)
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := fd.JSONName()
		v, ok := byName[name]
		if !ok {
			if v, ok = byName[string(fd.Name())]; ok {
				name = string(fd.Name()) // the caller writes proto names
			}
		}
		if Inlined(fd) {
			if !ok {
				v = []byte("null")
			}
			var err error
			if out, first, err = shapeMembers(out, fd.Message(), v, first); err != nil {
				return out, first, err
			}
			continue
		}
		if !ok && !every {
			continue // protojson left it out (an unset optional or oneof field): so does the shape
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		key, _ := json.Marshal(name)
		out = append(append(out, key...), ':')
		switch {
		case !ok:
			out = append(out, ZeroJSON(fd)...)
		case fd.Message() != nil && !fd.IsMap() && reaches(fd.Message()):
			var err error
			if out, err = shapeValue(out, fd, v); err != nil {
				return out, first, err
			}
		default:
			out = append(out, v...)
		}
	}
	return out, first, nil
}

// shapeValue appends the shaped value of message field fd written as v: a message, a list of
// them, or null.
func shapeValue(out []byte, fd protoreflect.FieldDescriptor, v []byte) ([]byte, error) {
	v = bytes.TrimSpace(v)
	if bytes.Equal(v, []byte("null")) {
		return append(out, v...), nil
	}
	if !fd.IsList() {
		return shapeMessage(out, fd.Message(), v)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return out, err
	}
	out = append(out, '[')
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = shapeMessage(out, fd.Message(), it); err != nil {
			return out, err
		}
	}
	return append(out, ']'), nil
}
