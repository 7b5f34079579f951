package adminjson

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

const sandboxExample = `true, false or an object such as {"network":"none","writable_paths":["/var/lib/my-server"]}`

// nestedExamples are what each message field of a server config takes, for its errors.
var nestedExamples = map[protoreflect.FullName]string{
	"zest.mcpgateway.v1.Sandbox":       sandboxExample,
	"zest.mcpgateway.v1.UpstreamOAuth": `an object such as {"client_id":"zest","scopes":["read"]}`,
}

// nested reads a message field k of a server config: an object of its message's fields (snake
// or camelCase); for "sandbox" also true or false (enabled alone). The members' errors name
// them as k.<member>; mcpgateway checks the values. members are the fields the value names
// ("enabled" for true and false), for a merge patch's mask; with patch a null member is named
// too (to clear it), else it is absent.
func (r *reader) nested(k string, patch bool, fs fieldSet) (out protoreflect.ProtoMessage, members []string) {
	raw, ok := r.get(k)
	if !ok {
		return nil, nil
	}
	example := nestedExamples[fs.md.FullName()]
	switch raw[0] {
	case 't', 'f':
		if fs.md != sandboxFields.md {
			r.fail(k, example, raw)
			return nil, nil
		}
		b := r.boolean(k)
		if b == nil {
			return nil, nil
		}
		return &mcpgatewayv1.Sandbox{Enabled: b}, []string{"enabled"}
	case '{':
	default:
		r.fail(k, example, raw)
		return nil, nil
	}
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil {
		r.fail(k, example, raw)
		return nil, nil
	}
	sub := map[string]json.RawMessage{}
	var unknown []string
	for name, v := range f {
		if snake, ok := camelToSnake(fs, name); ok {
			if _, both := f[snake]; both {
				r.setErr(fmt.Errorf("%w: %s.%s and %s.%s are the same field: send one of them", r.kind, k, snake, k, name))
				return nil, nil
			}
			name = snake
		}
		if !slices.Contains(fs.names, name) {
			unknown = append(unknown, strconv.Quote(name))
			continue
		}
		sub[k+"."+name] = v
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		r.setErr(fmt.Errorf("%w: unknown field %s in %s: its fields are %s", r.kind, strings.Join(unknown, ", "), k, strings.Join(fs.names, ", ")))
		return nil, nil
	}
	s := reader{f: sub, kind: r.kind}
	m := fs.mt.New()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		key := k + "." + string(fd.Name())
		raw, named := sub[key]
		if !named {
			continue
		}
		if _, ok := s.get(key); !ok { // null
			if patch {
				members = append(members, string(fd.Name()))
			}
			continue
		}
		if fd.Kind() == protoreflect.Int32Kind { // from 0: a count of the server's own
			if v := s.whole(key, "a number of "+units[fd.FullName()], math.MaxInt32, false); v != nil {
				m.Set(fd, protoreflect.ValueOfInt32(int32(*v)))
			}
		} else if v, ok := s.value(m, fd, key, raw); ok {
			m.Set(fd, v)
		}
		members = append(members, string(fd.Name()))
	}
	if s.err != nil {
		r.setErr(s.err)
		return nil, nil
	}
	return m.Interface(), members
}

func camelToSnake(fs fieldSet, name string) (string, bool) {
	for snake, camel := range fs.aliases {
		if camel == name {
			return snake, true
		}
	}
	return "", false
}

func (r *reader) setErr(err error) {
	if r.err == nil {
		r.err = err
	}
}

// whole reads a whole number from 0 to most (mcpgateway checks the range). quoted (a 64-bit
// field) also reads a string of decimal digits, as protojson writes such a number, so that a
// state sent back reads as it was written.
func (r *reader) whole(k, want string, most float64, quoted bool) *int64 {
	raw, ok := r.get(k)
	if !ok {
		return nil
	}
	if quoted && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
				return &n
			}
		}
		r.fail(k, want+" (or a string of its decimal digits)", raw)
		return nil
	}
	var x float64
	if json.Unmarshal(raw, &x) != nil { // only a JSON number decodes into a float64
		r.fail(k, want, raw)
		return nil
	}
	if x != math.Trunc(x) || x < 0 || x >= most {
		r.setErr(fmt.Errorf("%w: %s %v must be a whole number from 0 to %.0f", r.kind, k, x, most))
		return nil
	}
	v := int64(x)
	return &v
}
