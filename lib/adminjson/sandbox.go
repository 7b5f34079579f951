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

// sandbox reads "sandbox": true, false (enabled alone) or an object of Sandbox's fields (snake
// or camelCase). The members' errors name them as sandbox.<member>; mcpgateway checks the
// values. members are the fields the value names ("enabled" for true and false), for a merge
// patch's mask; with patch a null member is named too (to clear it), else it is absent.
func (r *reader) sandbox(k string, patch bool) (sb *mcpgatewayv1.Sandbox, members []string) {
	raw, ok := r.get(k)
	if !ok {
		return nil, nil
	}
	switch raw[0] {
	case 't', 'f':
		b := r.boolean(k)
		if b == nil {
			return nil, nil
		}
		return &mcpgatewayv1.Sandbox{Enabled: b}, []string{"enabled"}
	case '{':
	default:
		r.fail(k, sandboxExample, raw)
		return nil, nil
	}
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil {
		r.fail(k, sandboxExample, raw)
		return nil, nil
	}
	sub := map[string]json.RawMessage{}
	var unknown []string
	for name, v := range f {
		if snake, ok := camelToSnake(name); ok {
			if _, both := f[snake]; both {
				r.setErr(fmt.Errorf("%w: %s.%s and %s.%s are the same field: send one of them", r.kind, k, snake, k, name))
				return nil, nil
			}
			name = snake
		}
		if !slices.Contains(sandboxFields.names, name) {
			unknown = append(unknown, strconv.Quote(name))
			continue
		}
		sub[k+"."+name] = v
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		r.setErr(fmt.Errorf("%w: unknown field %s in %s: its fields are %s", r.kind, strings.Join(unknown, ", "), k, strings.Join(sandboxFields.names, ", ")))
		return nil, nil
	}
	s := reader{f: sub, kind: r.kind}
	sb = &mcpgatewayv1.Sandbox{}
	m := sb.ProtoReflect()
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
	return sb, members
}

func camelToSnake(name string) (string, bool) {
	for snake, camel := range sandboxFields.aliases {
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
