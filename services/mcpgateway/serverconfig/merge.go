package serverconfig

import (
	"slices"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A server config's fields are Lemonade's or Zest's. Lemonade's are the ones Lemonade's own
// API and GUI know (its MCP client host's config): an upsert replaces them whole, as Lemonade
// does. Zest's are the rest — the server's policy: an upsert keeps those it leaves out, so
// that a client that knows only Lemonade's fields (GUI3's Edit → Save, Lemonade's smoke
// script) never erases a server's filters, approvals, limits or visibility. Every field of
// ServerConfig that lemonadeFields does not name is Zest's (TestLemonadeFieldsExist).
var lemonadeFields = []protoreflect.Name{"id", "name", "transport", "command", "args", "working_dir", "env", "url",
	"bearer_token", "allow_insecure_http", "enabled", "timeout_ms"}

// LemonadeField reports whether fd is one of Lemonade's fields of a server config.
func LemonadeField(fd protoreflect.FieldDescriptor) bool {
	return slices.Contains(lemonadeFields, fd.Name())
}

// stdioZestFields are the Zest fields only a stdio server may set: an upsert that moves a server
// to streamable-http drops the stored ones it keeps no more than Lemonade's own stdio fields.
var stdioZestFields = []protoreflect.Name{"tool_host", "sandbox"}

// httpZestFields are the Zest fields only a streamable-http server may set, dropped likewise
// when an upsert moves a server to stdio.
var httpZestFields = []protoreflect.Name{FieldOAuth}

// HTTPOnlyField reports whether fd is a Zest field only a streamable-http server may set.
func HTTPOnlyField(fd protoreflect.FieldDescriptor) bool {
	return slices.Contains(httpZestFields, fd.Name())
}

var configFields = (&mcpgatewayv1.ServerConfig{}).ProtoReflect().Descriptor().Fields()

// checkPaths refuses a field mask path that names no field of a server config (nested: one of
// a message field's own, such as sandbox.network, when nested is true).
func checkPaths(paths []string, nested bool) error {
	for _, p := range paths {
		name, sub, hasSub := strings.Cut(p, ".")
		fd := configFields.ByName(protoreflect.Name(name))
		switch {
		case fd == nil:
			return invalid("update_mask path %q names no field of a server config: use its snake_case names (rate_limit, tools_deny, …)", truncate(p, 80))
		case hasSub && (!nested || fd.Message() == nil || fd.IsList() || fd.IsMap() || fd.Message().Fields().ByName(protoreflect.Name(sub)) == nil):
			return invalid("update_mask path %q names no field of a server config: only the sandbox's own fields may follow a dot, as in sandbox.network", truncate(p, 80))
		}
	}
	return nil
}

// merge sets on a copy of stored the fields paths name, from in: one in holds is copied, one
// it leaves unset (or empty, for a list or a map) is cleared, so that Parse gives it its
// default. A path "sandbox.network" sets one field of the stored sandbox.
func merge(stored, in *mcpgatewayv1.ServerConfig, paths []string) *mcpgatewayv1.ServerConfig {
	out := proto.CloneOf(stored)
	dst, src := out.ProtoReflect(), in.ProtoReflect()
	for _, p := range paths {
		name, sub, nested := strings.Cut(p, ".")
		fd := configFields.ByName(protoreflect.Name(name))
		d, s := dst, src
		if nested {
			d = dst.Mutable(fd).Message()
			s = src.Get(fd).Message()
			fd = fd.Message().Fields().ByName(protoreflect.Name(sub))
		}
		if s.Has(fd) {
			d.Set(fd, cloneValue(s.Get(fd), fd))
		} else {
			d.Clear(fd)
		}
	}
	return out
}

// cloneValue is v, a value of fd, copied so that the merged config shares nothing with in.
func cloneValue(v protoreflect.Value, fd protoreflect.FieldDescriptor) protoreflect.Value {
	if fd.Message() != nil && !fd.IsList() && !fd.IsMap() {
		return protoreflect.ValueOfMessage(proto.Clone(v.Message().Interface()).ProtoReflect())
	}
	return v
}

// Upsert returns the config an upsert of in stores over stored (nil for a new server), before
// Parse checks it: Lemonade's fields as in sends them (an absent one cleared, for its
// default); Zest's that in populates or mask names from in; the other Zest fields as stored.
// When the upsert moves the server off stdio, the stored stdio-only Zest fields it would keep
// are dropped. mask holds top-level field names; a name of no field is refused.
func Upsert(stored, in *mcpgatewayv1.ServerConfig, mask []string) (*mcpgatewayv1.ServerConfig, error) {
	if in == nil {
		return Parse(nil, nil) // the error of a missing server
	}
	if err := checkPaths(mask, false); err != nil {
		return nil, err
	}
	if stored == nil {
		return in, nil
	}
	src := in.ProtoReflect()
	var paths []string
	for i := range configFields.Len() {
		fd := configFields.Get(i)
		if LemonadeField(fd) || src.Has(fd) || slices.Contains(mask, string(fd.Name())) {
			paths = append(paths, string(fd.Name()))
		}
	}
	out := merge(stored, in, paths)
	if transportOf(out) != TransportStdio && transportOf(stored) == TransportStdio {
		for _, name := range stdioZestFields {
			if fd := configFields.ByName(name); !slices.Contains(paths, string(name)) {
				out.ProtoReflect().Clear(fd)
			}
		}
	}
	if transportOf(out) == TransportStdio && transportOf(stored) != TransportStdio {
		for _, name := range httpZestFields {
			if fd := configFields.ByName(name); !slices.Contains(paths, string(name)) {
				out.ProtoReflect().Clear(fd)
			}
		}
	}
	return out, nil
}

// Update returns the config an update of stored stores (before Parse checks it): the fields
// mask names, from in — set when in holds them, cleared (to their defaults) when it does not;
// "sandbox.network" and the like set one field of the sandbox. An empty mask names the fields
// in populates (AIP-134); "*" names every field. in.id names the server and never changes.
func Update(stored, in *mcpgatewayv1.ServerConfig, mask []string) (*mcpgatewayv1.ServerConfig, error) {
	if in == nil {
		return Parse(nil, nil)
	}
	switch {
	case len(mask) == 0:
		in.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			mask = append(mask, string(fd.Name()))
			return true
		})
	case slices.Contains(mask, "*"):
		if len(mask) > 1 {
			return nil, invalid(`update_mask "*" replaces the whole config: send it alone`)
		}
		mask = nil
		for i := range configFields.Len() {
			mask = append(mask, string(configFields.Get(i).Name()))
		}
	}
	if err := checkPaths(mask, true); err != nil {
		return nil, err
	}
	out := merge(stored, in, mask)
	out.Id = stored.GetId() // in.id names the server: it is never changed
	return out, nil
}

// transportOf is cfg's transport as Parse stores it ("" is stdio, or streamable-http for a
// server with a url and no command, as Lemonade's mcp_servers.json takes it; "http" and the
// other aliases streamable-http); another value is left to Parse to refuse.
func transportOf(cfg *mcpgatewayv1.ServerConfig) string {
	switch strings.ToLower(cfg.GetTransport()) {
	case "":
		if cfg.GetUrl() != "" && cfg.GetCommand() == "" {
			return TransportHTTP
		}
		return TransportStdio
	case TransportStdio:
		return TransportStdio
	case TransportHTTP, "http", "streamable_http", "streamablehttp":
		return TransportHTTP
	}
	return cfg.GetTransport()
}
