package adminjson

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"unicode"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The fields a body may hold, their camelCase aliases and their kinds come from the messages'
// descriptors (ServerConfig, Sandbox, PresetInput), not from lists kept beside them: a field
// added to the contract is read here as it is added.

// fieldSet is the JSON fields of a message: their snake_case names in declaration order (the
// JSON names of the admin contract) and the camelCase alias of each multi-word one.
type fieldSet struct {
	md      protoreflect.MessageDescriptor
	mt      protoreflect.MessageType
	names   []string
	aliases map[string]string
}

func fieldsOf(m interface {
	ProtoReflect() protoreflect.Message
}) fieldSet {
	md := m.ProtoReflect().Descriptor()
	fs := fieldSet{md: md, mt: m.ProtoReflect().Type(), aliases: map[string]string{}}
	fields := md.Fields()
	for i := range fields.Len() {
		name := string(fields.Get(i).Name())
		fs.names = append(fs.names, name)
		if strings.Contains(name, "_") {
			fs.aliases[name] = camel(name)
		}
	}
	return fs
}

// camel is a snake_case name in lowerCamelCase (working_dir → workingDir), as protojson and
// Lemonade's clients spell it.
func camel(snake string) string {
	parts := strings.Split(snake, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

var (
	serverFields  = fieldsOf(&mcpgatewayv1.ServerConfig{})
	sandboxFields = fieldsOf(&mcpgatewayv1.Sandbox{})
	presetFields  = fieldsOf(&mcpgatewayv1.PresetInput{})
	oauthFields   = fieldsOf(&mcpgatewayv1.UpstreamOAuth{})

	// nestedFields are the message fields' own fields, by message.
	nestedFields = map[protoreflect.FullName]fieldSet{sandboxFields.md.FullName(): sandboxFields, oauthFields.md.FullName(): oauthFields}

	// serverStateFields are the read-only fields of a server state (every field of ServerState
	// but its config, whose fields the state's JSON holds): a client that sends a state back (as
	// Lemonade's GUI did when it edited a server) is not refused for them; they are ignored.
	serverStateFields = func() []string {
		var out []string
		fields := (&mcpgatewayv1.ServerState{}).ProtoReflect().Descriptor().Fields()
		for i := range fields.Len() {
			if fd := fields.Get(i); !Inlined(fd) {
				out = append(out, string(fd.Name()))
			}
		}
		return out
	}()
)

// units name what an integer field counts, for its errors ("timeout_ms must be a number of
// milliseconds"); every integer field of a server config has one (TestEveryNumberHasAUnit).
var units = map[protoreflect.FullName]string{
	"zest.mcpgateway.v1.ServerConfig.timeout_ms":       "milliseconds",
	"zest.mcpgateway.v1.ServerConfig.max_output_bytes": "bytes",
	"zest.mcpgateway.v1.ServerConfig.max_concurrency":  "tool calls",
	"zest.mcpgateway.v1.Sandbox.memory_bytes":          "bytes",
	"zest.mcpgateway.v1.Sandbox.max_pids":              "processes",
	"zest.mcpgateway.v1.Sandbox.cpu_seconds":           "seconds",
	"zest.mcpgateway.v1.Sandbox.open_files":            "files",
}

// message reads every field of m's message from r.f (whose keys are its snake_case names,
// aliases folded) into m, in declaration order (the first error is kept), and returns the mask
// of the fields the body names, sorted. A null member is absent: left out of the mask, unless
// patch (a JSON merge patch, where null clears a field), then named. A member whose value is
// an object of a message field is named member by member when patch.
func (r *reader) message(m protoreflect.Message, patch bool) []string {
	var paths []string
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		k := string(fd.Name())
		raw, named := r.f[k]
		if !named {
			continue
		}
		if _, ok := r.get(k); !ok { // null
			if patch {
				paths = append(paths, k)
			}
			continue
		}
		if fd.IsList() && fd.Message() != nil { // a preset's tools
			if v, ok := r.messages(m, fd, k, raw); ok {
				m.Set(fd, v)
				paths = append(paths, k)
			}
			continue
		}
		if fd.Message() != nil && !fd.IsMap() { // the sandbox, oauth
			sub, members := r.nested(k, patch, nestedFields[fd.Message().FullName()])
			if sub != nil {
				m.Set(fd, protoreflect.ValueOfMessage(sub.ProtoReflect()))
			}
			if !patch {
				paths = append(paths, k) // an upsert replaces the whole block
				continue
			}
			for _, member := range members {
				paths = append(paths, k+"."+member)
			}
			continue
		}
		if v, ok := r.value(m, fd, k, raw); ok {
			m.Set(fd, v)
			paths = append(paths, k)
		}
	}
	sort.Strings(paths)
	return paths
}

// value reads the member k of field fd (a string, bool or integer, a list of strings, a map of
// strings) for message m.
func (r *reader) value(m protoreflect.Message, fd protoreflect.FieldDescriptor, k string, raw json.RawMessage) (protoreflect.Value, bool) {
	switch {
	case fd.IsMap():
		items := r.strMap(k)
		if items == nil {
			return protoreflect.Value{}, false
		}
		mp := m.NewField(fd).Map()
		for name, v := range items {
			mp.Set(protoreflect.ValueOfString(name).MapKey(), protoreflect.ValueOfString(v))
		}
		return protoreflect.ValueOfMap(mp), true
	case fd.IsList():
		items := r.strs(k)
		if items == nil {
			return protoreflect.Value{}, false
		}
		l := m.NewField(fd).List()
		for _, v := range items {
			l.Append(protoreflect.ValueOfString(v))
		}
		return protoreflect.ValueOfList(l), true
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		if v := r.str(k); v != nil {
			return protoreflect.ValueOfString(*v), true
		}
	case protoreflect.BoolKind:
		if v := r.boolean(k); v != nil {
			return protoreflect.ValueOfBool(*v), true
		}
	case protoreflect.Int32Kind:
		if v := r.whole32(k, units[fd.FullName()]); v != nil {
			return protoreflect.ValueOfInt32(*v), true
		}
	case protoreflect.Int64Kind:
		if v := r.whole(k, "a number of "+units[fd.FullName()], math.MaxInt64, true); v != nil {
			return protoreflect.ValueOfInt64(*v), true
		}
	default: // a kind no admin message has yet: refused rather than dropped
		r.fail(k, "a value of a kind this edge does not read ("+fd.Kind().String()+")", raw)
	}
	return protoreflect.Value{}, false
}

// messages reads the member k of fd, a list of messages (a preset's tools), each item read by
// protojson as its own message: an unknown member or a value of the wrong kind is refused,
// naming the item (tools[2]).
func (r *reader) messages(m protoreflect.Message, fd protoreflect.FieldDescriptor, k string, raw json.RawMessage) (protoreflect.Value, bool) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		r.fail(k, "an array of objects", raw)
		return protoreflect.Value{}, false
	}
	l := m.NewField(fd).List()
	for i, it := range items {
		item := l.NewElement()
		if err := protojson.Unmarshal(it, item.Message().Interface()); err != nil {
			// protojson's words, without its "proto:" and position, its odd spaces made plain.
			why := strings.ReplaceAll(strings.TrimPrefix(err.Error(), "proto:"), "\u00a0", " ")
			why = strings.TrimLeftFunc(jsonPosition.ReplaceAllString(why, ": "), func(r rune) bool { return r == ':' || unicode.IsSpace(r) })
			r.setErr(fmt.Errorf("%w: %s[%d]: %s; an item's members are %s", r.kind, k, i, why, memberNames(fd.Message())))
			return protoreflect.Value{}, false
		}
		l.Append(item)
	}
	return protoreflect.ValueOfList(l), true
}

// jsonPosition is protojson's "(line 1:13)" in an error: the body is one line to a user.
var jsonPosition = regexp.MustCompile(`\s*\(line \d+:\d+\):?\s*`)

// memberNames are the JSON names of md's fields, for an error that says what an item holds.
func memberNames(md protoreflect.MessageDescriptor) string {
	names := make([]string, 0, md.Fields().Len())
	for i := range md.Fields().Len() {
		names = append(names, md.Fields().Get(i).JSONName())
	}
	return strings.Join(names, ", ")
}
