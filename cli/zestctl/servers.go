package zestctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/zestmcp/zest/lib/adminjson"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// maxInputBytes bounds a --json value or --file: the edge's admin bodies are 1 MiB at most.
const maxInputBytes = 1 << 20

func (a *app) admin() (mcpgatewayv1.AdminServiceClient, error) {
	cc, err := a.conn(a.mcpgwAddr)
	if err != nil {
		return nil, err
	}
	return mcpgatewayv1.NewAdminServiceClient(cc), nil
}

func (a *app) serversCmd() *cobra.Command {
	c := &cobra.Command{Use: "servers", Short: "Registered MCP servers (AdminService)", Aliases: []string{"server"}}
	c.AddCommand(
		&cobra.Command{
			Use: "list", Short: "List every registered server and its state", Args: args(0, "none"),
			RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, cmd *cobra.Command, _ []string) error {
				r, err := adm.ListServers(ctx, &mcpgatewayv1.ListServersRequest{})
				if err != nil {
					return err
				}
				return a.emit(map[string]any{"servers": plainList(r.GetServers())}, func(w io.Writer) {
					fmt.Fprintln(w, "ID\tTRANSPORT\tSTATUS\tTOOLS\tENABLED\tEXPOSE\tTOOL HOST\tTARGET\tLAST ERROR")
					for _, s := range r.GetServers() {
						c := s.GetConfig()
						row(w, c.GetId(), c.GetTransport(), s.GetStatus(), len(s.GetTools()), c.GetEnabled(), c.GetExpose(), placement(s), target(s), s.GetLastError())
					}
				})
			}),
		},
		a.serverIDCmd("get", "Show one server, with its tool host process state", "", func(cmd *cobra.Command, adm mcpgatewayv1.AdminServiceClient, id string) (*mcpgatewayv1.ServerState, error) {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := adm.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: id})
			return r.GetServer(), err
		}),
		a.serverIDCmd("connect", "Connect a server and discover its tools", "connecting", func(cmd *cobra.Command, adm mcpgatewayv1.AdminServiceClient, id string) (*mcpgatewayv1.ServerState, error) {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := adm.ConnectServer(ctx, &mcpgatewayv1.ConnectServerRequest{Id: id})
			return r.GetServer(), err
		}),
		a.serverIDCmd("disconnect", "Close a server's connection", "", func(cmd *cobra.Command, adm mcpgatewayv1.AdminServiceClient, id string) (*mcpgatewayv1.ServerState, error) {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := adm.DisconnectServer(ctx, &mcpgatewayv1.DisconnectServerRequest{Id: id})
			return r.GetServer(), err
		}),
		a.serverIDCmd("refresh", "List a server's tools again", "refreshing", func(cmd *cobra.Command, adm mcpgatewayv1.AdminServiceClient, id string) (*mcpgatewayv1.ServerState, error) {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := adm.RefreshTools(ctx, &mcpgatewayv1.RefreshToolsRequest{Id: id})
			return r.GetServer(), err
		}),
		&cobra.Command{
			Use: "rm ID", Short: "Disconnect and forget a server", Aliases: []string{"delete"}, Args: args(1, "ID"),
			ValidArgsFunction: a.completeIDs(a.serverIDs),
			RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, cmd *cobra.Command, argv []string) error {
				r, err := adm.DeleteServer(ctx, &mcpgatewayv1.DeleteServerRequest{Id: argv[0]})
				if err != nil {
					return err
				}
				return a.emit(r, func(w io.Writer) { fmt.Fprintf(w, "removed %s\n", r.GetRemoved()) })
			}),
		},
		a.serverInputCmd("add", false), a.serverInputCmd("edit", true), a.serverInputCmd("test", false),
		a.installCmd(), a.searchCmd(), a.signInCmd(),
		a.importLemonadeCmd(),
		a.pinsCmd(),
	)
	return c
}

// target is what a server runs or reaches, for the table.
func target(s *mcpgatewayv1.ServerState) string {
	c := s.GetConfig()
	if c.GetUrl() != "" {
		return c.GetUrl()
	}
	return strings.TrimSpace(c.GetCommand() + " " + strings.Join(c.GetArgs(), " "))
}

func (a *app) serverIDCmd(use, short, spin string, call func(*cobra.Command, mcpgatewayv1.AdminServiceClient, string) (*mcpgatewayv1.ServerState, error)) *cobra.Command {
	return &cobra.Command{
		Use: use + " ID", Short: short, Args: args(1, "ID"), ValidArgsFunction: a.completeIDs(a.serverIDs),
		RunE: func(cmd *cobra.Command, argv []string) error {
			adm, err := a.admin()
			if err != nil {
				return err
			}
			var sp *spinner
			if spin != "" {
				sp = a.spin(spin + " " + argv[0] + "…")
			}
			s, err := call(cmd, adm, argv[0])
			if sp != nil {
				sp.Stop()
			}
			if err != nil {
				return err
			}
			return a.showServer(s)
		},
	}
}

func (a *app) showServer(s *mcpgatewayv1.ServerState) error {
	c := s.GetConfig()
	return a.emit(s, func(w io.Writer) {
		row(w, "id", c.GetId())
		row(w, "name", c.GetName())
		row(w, "transport", c.GetTransport())
		row(w, "target", target(s))
		if c.GetTransport() == "stdio" {
			row(w, "tool_host", placement(s))
		}
		row(w, "status", s.GetStatus())
		if o := s.GetOauthState(); o != nil {
			row(w, "oauth", oauthLine(o))
		}
		row(w, "enabled", c.GetEnabled())
		row(w, "expose", c.GetExpose())
		row(w, "timeout_ms", c.GetTimeoutMs())
		if s.GetProtocolVersion() != "" {
			row(w, "protocol", s.GetProtocolVersion())
		}
		if s.GetLastError() != "" {
			row(w, "last_error", s.GetLastError())
		}
		if p := s.GetProcess(); p != nil {
			row(w, "process", fmt.Sprintf("%s pid %d restarts %d", p.GetState(), p.GetPid(), p.GetRestartCount()))
		}
		names := make([]string, 0, len(s.GetTools()))
		for _, t := range s.GetTools() {
			names = append(names, t.GetName())
		}
		row(w, "tools", fmt.Sprintf("%d %s", len(names), strings.Join(names, ", ")))
	})
}

// placement is where a stdio server runs, marked "(pinned)" when its config pins it there;
// "-" for an HTTP server or when no tool host is healthy.
func placement(s *mcpgatewayv1.ServerState) string {
	p := s.GetPlacement()
	switch {
	case p == "":
		return "-"
	case p == s.GetConfig().GetToolHost():
		return p + " (pinned)"
	}
	return p
}

// serverFlags are the flags of add, edit and test: one per field of a server config (the
// field's name in kebab case; args is --arg, repeated), each one that is given sets its field
// and names it in the request's mask (TestEveryConfigFieldHasAFlag), plus --json and --file
// for a whole config (read as the edge reads a body: lib/adminjson).
type serverFlags struct {
	jsonText, file string
}

// fieldFlags maps a config field to its flag where the names differ.
var fieldFlags = map[protoreflect.Name]string{"args": "arg"}

// flagOf is the flag of config field fd.
func flagOf(fd protoreflect.FieldDescriptor) string {
	if f, ok := fieldFlags[fd.Name()]; ok {
		return f
	}
	return strings.ReplaceAll(string(fd.Name()), "_", "-")
}

func (f *serverFlags) register(fs *pflag.FlagSet) {
	fs.String("id", "", "server id, [A-Za-z0-9_.-]{1,96} (default: derived from name, command or URL)")
	fs.String("name", "", "name shown to people (default: id)")
	fs.String("transport", "", "stdio (default) or streamable-http; on edit, a new transport clears the other's fields not given")
	fs.String("command", "", "stdio program")
	fs.StringArray("arg", nil, "stdio program argument (repeatable, in order)")
	fs.String("working-dir", "", "stdio program's working directory")
	fs.StringArray("env", nil, "KEY=${VAR} for the stdio program (repeatable; raw values are refused)")
	fs.String("url", "", "Streamable HTTP endpoint")
	fs.String("bearer-token", "", "${VAR} reference sent as Authorization: Bearer")
	fs.Bool("allow-insecure-http", false, "permit plain http to a non-loopback host")
	fs.Bool("enabled", true, "whether the server may be connected")
	fs.Int32("timeout-ms", 0, "bound of connect and each call, 1000-300000")
	fs.StringArray("tools-allow", nil, `glob over tool names to expose (repeatable; --tools-allow "" alone: none, every tool exposed)`)
	fs.StringArray("tools-deny", nil, `glob over tool names never to expose (repeatable; deny wins; --tools-deny "" alone: none)`)
	fs.Bool("expose", true, "serve the server to API callers at /mcp/servers/{id}")
	fs.String("tool-host", "", "pin the stdio program to the tool host of this name (ZEST_TOOLHOST_NAME); empty: placed by Zest")
	fs.Int32("max-output-bytes", 0, "largest tools/call result of the server, 1024-41943040 (0: the operator's ZEST_TOOL_OUTPUT_MAX_BYTES)")
	fs.String("sandbox", "", `confine the stdio program: true, false, or the sandbox as JSON, e.g. '{"network":"none","writable_paths":["/var/lib/s"]}' (on edit: its fields given change, the others stay)`)
	fs.String("oauth", "", `sign Zest in to the streamable-http server by OAuth, as JSON, e.g. '{"client_id":"zest","scopes":["read"]}' or '{"client_id":"zest","client_secret":"${SECRET}","grant":"client_credentials"}' (then: zestctl servers sign-in ID)`)
	fs.String("rate-limit", "", `tool calls of this server, all callers together: N/s, N/m or N/h with an optional burst ":B" (empty: none)`)
	fs.Int32("max-concurrency", 0, "tool calls of this server in flight at once, 1-1024 (0: none)")
	fs.String("approval", "", `"required": every tool call waits for a person's approval (chats: an administrator; MCP clients: elicitation); "none": only --approval-tools`)
	fs.StringArray("approval-tools", nil, `glob over tool names whose calls need approval (repeatable; --approval-tools "" alone: none)`)
	fs.String("approval-by", "", `who decides a held call: "admin" (default: only the admin key) or "client" (an MCP client's user, through elicitation)`)
	fs.Bool("pin-tools", true, "pin the server's tool definitions: a changed or new tool is held until an administrator accepts it (zestctl servers pins)")
	fs.StringVar(&f.jsonText, "json", "", "the config as JSON, as POST /internal/mcp/servers takes it (on edit: a JSON merge patch, as PATCH takes it); flags given beside it win")
	fs.StringVarP(&f.file, "file", "f", "", "read --json's JSON from this file (- for stdin)")
}

// readInput reads --json or --file (at most maxInputBytes), or returns nil when neither is given.
func (a *app) readInput(jsonText, file string) ([]byte, error) {
	switch {
	case jsonText != "" && file != "":
		return nil, usagef("--json and --file: give one of them")
	case jsonText != "":
		if len(jsonText) > maxInputBytes {
			return nil, usagef("--json holds %d bytes; the limit is %d", len(jsonText), maxInputBytes)
		}
		return []byte(jsonText), nil
	case file != "":
		r := a.stdin
		if file != "-" {
			fh, err := os.Open(file)
			if err != nil {
				return nil, usagef("--file: %v", err)
			}
			defer fh.Close()
			r = fh
		}
		b, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
		if err != nil {
			return nil, usagef("--file %s: %v", file, err)
		}
		if len(b) > maxInputBytes {
			return nil, usagef("--file %s holds more than %d bytes", file, maxInputBytes)
		}
		return b, nil
	}
	return nil, nil
}

// unmarshalInput reads JSON into m, bare or wrapped as {"<wrap>": {...}}, naming bad fields.
func unmarshalInput(b []byte, wrap string, m proto.Message) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err == nil && len(probe) == 1 {
		if inner, ok := probe[wrap]; ok {
			b = inner
		}
	}
	// protojson resets what it reads into: read into a fresh message, then set on m only the
	// fields the JSON holds.
	fresh := m.ProtoReflect().New()
	if err := protojson.Unmarshal(b, fresh.Interface()); err != nil {
		return usagef("input JSON: %v", err)
	}
	dst := m.ProtoReflect()
	fresh.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	return nil
}

// transportFields are the fields of each transport that edit --transport clears unless given.
var transportFields = map[string][]string{
	"stdio":           {"command", "args", "working_dir", "env", "tool_host", "sandbox"},
	"streamable-http": {"url", "bearer_token", "allow_insecure_http", "oauth"},
}

// apply sets on in every field whose flag was given, and adds it to mask. patch (edit) reads
// --sandbox as a merge patch of the stored sandbox, and a --transport names the other
// transport's fields to clear.
func apply(fs *pflag.FlagSet, in *mcpgatewayv1.ServerConfig, mask []string, patch bool) ([]string, error) {
	m := in.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		flag := flagOf(fd)
		if !fs.Changed(flag) {
			continue
		}
		name := string(fd.Name())
		var err error
		switch {
		case fd.Message() != nil && !fd.IsMap(): // --sandbox, --oauth: the API's JSON
			read := adminjson.Server
			if patch {
				read = adminjson.ServerPatch
			}
			text, _ := fs.GetString(flag)
			got, gotMask, err := read([]byte(`{"` + name + `":` + text + `}`))
			if err != nil {
				return nil, usagef("--%s: %v", flag, err)
			}
			if got.ProtoReflect().Has(fd) {
				m.Set(fd, got.ProtoReflect().Get(fd))
			}
			mask = withPaths(mask, gotMask.GetPaths()...)
			continue
		case fd.IsMap(): // --env KEY=${VAR}
			var pairs []string
			pairs, err = fs.GetStringArray(flag)
			mp := m.NewField(fd).Map()
			for _, kv := range pairs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return nil, usagef("--%s %q: want KEY=${VAR}", flag, kv)
				}
				mp.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString(v))
			}
			m.Set(fd, protoreflect.ValueOfMap(mp))
		case fd.IsList():
			var items []string
			items, err = fs.GetStringArray(flag)
			if len(items) == 1 && items[0] == "" {
				items = nil // --tools-deny "": the list emptied
			}
			l := m.NewField(fd).List()
			for _, it := range items {
				l.Append(protoreflect.ValueOfString(it))
			}
			m.Set(fd, protoreflect.ValueOfList(l))
		case fd.Kind() == protoreflect.StringKind:
			var v string
			v, err = fs.GetString(flag)
			m.Set(fd, protoreflect.ValueOfString(v))
		case fd.Kind() == protoreflect.BoolKind:
			var v bool
			v, err = fs.GetBool(flag)
			m.Set(fd, protoreflect.ValueOfBool(v))
		case fd.Kind() == protoreflect.Int32Kind:
			var v int32
			v, err = fs.GetInt32(flag)
			m.Set(fd, protoreflect.ValueOfInt32(v))
		default:
			return nil, fmt.Errorf("--%s: zestctl cannot set a %s field: use --json", flag, fd.Kind())
		}
		if err != nil {
			return nil, usagef("--%s: %v", flag, err)
		}
		mask = withPaths(mask, name)
	}
	if patch && fs.Changed("transport") {
		// Moving to a transport clears the fields of the other (mcpgateway refuses a mix),
		// unless they are given too.
		other := "streamable-http"
		if t := strings.ToLower(in.GetTransport()); t != "" && !strings.HasPrefix(t, "stdio") {
			other = "stdio"
		}
		for _, name := range transportFields[other] {
			if !slices.ContainsFunc(mask, func(p string) bool { return p == name || strings.HasPrefix(p, name+".") }) {
				mask = withPaths(mask, name)
			}
		}
	}
	return mask, nil
}

// withPaths is mask with paths added once each.
func withPaths(mask []string, paths ...string) []string {
	for _, p := range paths {
		if !slices.Contains(mask, p) {
			mask = append(mask, p)
		}
	}
	return mask
}

func (a *app) serverInputCmd(use string, edit bool) *cobra.Command {
	f := &serverFlags{}
	short := map[string]string{
		"add":  "Add a server, or replace a registered one's Lemonade fields (its Zest fields not given are kept)",
		"edit": "Change the given fields of a registered server (UpdateServer: the others are kept)",
		"test": "Connect, discover and disconnect a config without saving it",
	}[use]
	c := &cobra.Command{Use: use, Short: short}
	if edit {
		c.Use, c.Args, c.ValidArgsFunction = "edit ID", args(1, "ID"), a.completeIDs(a.serverIDs)
	} else {
		c.Use, c.Args = use+" [ID]", cobra.RangeArgs(0, 1)
	}
	c.Args = wrapArgs(c.Args)
	f.register(c.Flags())
	c.RunE = func(cmd *cobra.Command, argv []string) error {
		in, mask, err := a.serverInput(cmd.Flags(), f, argv, edit)
		if err != nil {
			return err
		}
		adm, err := a.admin()
		if err != nil {
			return err
		}
		ctx, cancel := a.ctx(cmd)
		defer cancel()
		var saved *mcpgatewayv1.ServerConfig
		switch {
		case use == "test":
			sp := a.spin("testing…")
			r, err := adm.TestServer(ctx, &mcpgatewayv1.TestServerRequest{Server: in})
			sp.Stop()
			if err != nil {
				return err
			}
			return a.showServer(r.GetServer())
		case edit:
			r, err := adm.UpdateServer(ctx, &mcpgatewayv1.UpdateServerRequest{Server: in, UpdateMask: &fieldmaskpb.FieldMask{Paths: mask}})
			if err != nil {
				return err
			}
			saved = r.GetServer()
		default:
			r, err := adm.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: in, UpdateMask: &fieldmaskpb.FieldMask{Paths: mask}})
			if err != nil {
				return err
			}
			saved = r.GetServer()
		}
		return a.emit(saved, func(w io.Writer) { fmt.Fprintf(w, "saved %s\n", saved.GetId()) })
	}
	return c
}

// serverInput is the config and mask of add, edit or test: --json or --file (read as the edge
// reads a body, a merge patch for edit), then the ID argument, then the flags given.
func (a *app) serverInput(fs *pflag.FlagSet, f *serverFlags, argv []string, edit bool) (*mcpgatewayv1.ServerConfig, []string, error) {
	in := &mcpgatewayv1.ServerConfig{}
	var mask []string
	b, err := a.readInput(f.jsonText, f.file)
	if err != nil {
		return nil, nil, err
	}
	if b != nil {
		read := adminjson.Server
		if edit {
			read = adminjson.ServerPatch
		}
		m, jsonMask, err := read(b)
		if err != nil {
			return nil, nil, usagef("--json: %v", err)
		}
		in, mask = m, jsonMask.GetPaths()
	}
	if mask, err = apply(fs, in, mask, edit); err != nil {
		return nil, nil, err
	}
	if len(argv) == 1 {
		if fs.Changed("id") && in.GetId() != argv[0] {
			return nil, nil, usagef("the ID argument %q and --id %q differ: give one", argv[0], in.GetId())
		}
		in.Id = argv[0]
		mask = withPaths(mask, "id")
	}
	if edit && len(mask) == 1 { // the id alone
		return nil, nil, usagef("edit %s: give the fields to change as flags (or --json)", argv[0])
	}
	return in, mask, nil
}

// wrapArgs makes cobra's argument checks usage errors.
func wrapArgs(p cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, argv []string) error {
		if err := p(cmd, argv); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// withAdmin runs a command with the AdminService client and a context bounded by --timeout.
func (a *app) withAdmin(run func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, cmd *cobra.Command, argv []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, argv []string) error {
		adm, err := a.admin()
		if err != nil {
			return err
		}
		ctx, cancel := a.ctx(cmd)
		defer cancel()
		return run(ctx, adm, cmd, argv)
	}
}

// oauthLine is a server's OAuth sign-in for people: "signed in as … until …" or "needs sign-in: …".
func oauthLine(o *mcpgatewayv1.UpstreamOAuthState) string {
	if o.GetStatus() == "signed_in" {
		return "signed in as " + o.GetSubject() + " until " + o.GetExpires()
	}
	return "needs sign-in: " + o.GetMessage()
}
