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
)

// sandboxFields are the members of a server's "sandbox" object (docs/untrusted-tools.md).
var sandboxFields = []string{"enabled", "network", "allow_hosts", "writable_paths", "readable_paths",
	"memory_bytes", "max_pids", "cpu_seconds", "open_files"}

var sandboxAliases = map[string]string{
	"allow_hosts": "allowHosts", "writable_paths": "writablePaths", "readable_paths": "readablePaths",
	"memory_bytes": "memoryBytes", "max_pids": "maxPids", "cpu_seconds": "cpuSeconds", "open_files": "openFiles",
}

const sandboxExample = `true, false or an object such as {"network":"none","writable_paths":["/var/lib/my-server"]}`

// sandbox reads "sandbox": true, false (enabled alone) or an object of sandboxFields. The
// members' errors name them as sandbox.<member>; mcpgateway checks the values.
func (r *reader) sandbox(k string) *mcpgatewayv1.Sandbox {
	raw, ok := r.get(k)
	if !ok {
		return nil
	}
	switch raw[0] {
	case 't', 'f':
		b := r.boolean(k)
		if b == nil {
			return nil
		}
		return &mcpgatewayv1.Sandbox{Enabled: b}
	case '{':
	default:
		r.fail(k, sandboxExample, raw)
		return nil
	}
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil {
		r.fail(k, sandboxExample, raw)
		return nil
	}
	sub := map[string]json.RawMessage{}
	var unknown []string
	for name, v := range f {
		if snake, ok := camelToSnake(name); ok {
			if _, both := f[snake]; both {
				r.setErr(fmt.Errorf("%w: %s.%s and %s.%s are the same field: send one of them", r.kind, k, snake, k, name))
				return nil
			}
			name = snake
		}
		if !slices.Contains(sandboxFields, name) {
			unknown = append(unknown, strconv.Quote(name))
			continue
		}
		sub[k+"."+name] = v
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		r.setErr(fmt.Errorf("%w: unknown field %s in %s: its fields are %s", r.kind, strings.Join(unknown, ", "), k, strings.Join(sandboxFields, ", ")))
		return nil
	}
	s := reader{f: sub, kind: r.kind}
	sb := &mcpgatewayv1.Sandbox{
		Enabled: s.boolean(k + ".enabled"), Network: s.str(k + ".network"),
		AllowHosts: s.strs(k + ".allow_hosts"), WritablePaths: s.strs(k + ".writable_paths"), ReadablePaths: s.strs(k + ".readable_paths"),
		MemoryBytes: s.whole(k+".memory_bytes", "a number of bytes", math.MaxInt64),
	}
	sb.MaxPids = int32p(s.whole(k+".max_pids", "a number of processes", math.MaxInt32))
	sb.CpuSeconds = int32p(s.whole(k+".cpu_seconds", "a number of seconds", math.MaxInt32))
	sb.OpenFiles = int32p(s.whole(k+".open_files", "a number of files", math.MaxInt32))
	if s.err != nil {
		r.setErr(s.err)
		return nil
	}
	return sb
}

func camelToSnake(name string) (string, bool) {
	for snake, camel := range sandboxAliases {
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

// whole reads a whole number from 0 to most (mcpgateway checks the range).
func (r *reader) whole(k, want string, most float64) *int64 {
	raw, ok := r.get(k)
	if !ok {
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

func int32p(v *int64) *int32 {
	if v == nil {
		return nil
	}
	n := int32(*v)
	return &n
}
