package zestctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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

// serverFlags are the flags of add, edit and test: each one that is given sets its field.
type serverFlags struct {
	id, name, transport, command, workingDir, url, bearer, toolHost, jsonText, file, approval, approvalBy string
	args, env, allow, deny, approvalTools                                                                 []string
	timeoutMs                                                                                             int32
	insecure, enabled, expose                                                                             bool
	// Limits of the server's tool calls (docs/untrusted-tools.md).
	rateLimit      string
	maxConcurrency int32
}

func (f *serverFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.id, "id", "", "server id, [A-Za-z0-9_.-]{1,96} (default: derived from name, command or URL)")
	fs.StringVar(&f.name, "name", "", "name shown to people (default: id)")
	fs.StringVar(&f.transport, "transport", "", "stdio (default) or streamable-http")
	fs.StringVar(&f.command, "command", "", "stdio program")
	fs.StringArrayVar(&f.args, "arg", nil, "stdio program argument (repeatable, in order)")
	fs.StringVar(&f.workingDir, "working-dir", "", "stdio program's working directory")
	fs.StringArrayVar(&f.env, "env", nil, "KEY=${VAR} for the stdio program (repeatable; raw values are refused)")
	fs.StringVar(&f.toolHost, "tool-host", "", "pin the stdio program to the tool host of this name (ZEST_TOOLHOST_NAME); empty: placed by Zest")
	fs.StringVar(&f.url, "url", "", "Streamable HTTP endpoint")
	fs.StringVar(&f.bearer, "bearer-token", "", "${VAR} reference sent as Authorization: Bearer")
	fs.BoolVar(&f.insecure, "allow-insecure-http", false, "permit plain http to a non-loopback host")
	fs.BoolVar(&f.enabled, "enabled", true, "whether the server may be connected")
	fs.Int32Var(&f.timeoutMs, "timeout-ms", 0, "bound of connect and each call, 1000-300000")
	fs.StringVar(&f.rateLimit, "rate-limit", "", `tool calls of this server, all callers together: N/s, N/m or N/h with an optional burst ":B" (empty: none)`)
	fs.Int32Var(&f.maxConcurrency, "max-concurrency", 0, "tool calls of this server in flight at once, 1-1024 (0: none)")
	fs.StringArrayVar(&f.allow, "tools-allow", nil, "glob over tool names to expose (repeatable)")
	fs.StringArrayVar(&f.deny, "tools-deny", nil, "glob over tool names never to expose (repeatable; deny wins)")
	fs.BoolVar(&f.expose, "expose", true, "serve the server to API callers at /mcp/servers/{id}")
	fs.StringVar(&f.approval, "approval", "", `"required": every tool call waits for a person's approval (chats: an administrator; MCP clients: elicitation); "none": only --approval-tools`)
	fs.StringVar(&f.approvalBy, "approval-by", "", `who decides a held call: "admin" (default: only the admin key) or "client" (an MCP client's user, through elicitation)`)
	fs.StringArrayVar(&f.approvalTools, "approval-tools", nil, "glob over tool names whose calls need approval (repeatable)")
	fs.StringVar(&f.jsonText, "json", "", "the whole config as JSON (ServerInput; flags given beside it win)")
	fs.StringVarP(&f.file, "file", "f", "", "read the config as JSON from this file (- for stdin)")
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
		var r io.Reader = a.stdin
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
	// fields the JSON holds, so that edit --json keeps the stored ones it leaves out.
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

// apply sets on in every field whose flag was given.
func (f *serverFlags) apply(fs *pflag.FlagSet, in *mcpgatewayv1.ServerConfig) error {
	set := fs.Changed
	if set("transport") && in.GetTransport() != "" && in.GetTransport() != f.transport {
		// Switching transports drops the other transport's fields (mcpgateway refuses a mix).
		if strings.HasPrefix(f.transport, "stdio") {
			in.Url, in.BearerToken, in.AllowInsecureHttp = "", "", false
		} else {
			in.Command, in.Args, in.WorkingDir, in.Env, in.ToolHost, in.Sandbox = "", nil, "", nil, nil, nil
		}
	}
	str := func(flag string, v string, dst **string) {
		if set(flag) {
			*dst = proto.String(v)
		}
	}
	plain := func(flag string, v string, dst *string) {
		if set(flag) {
			*dst = v
		}
	}
	plain("id", f.id, &in.Id)
	plain("name", f.name, &in.Name)
	plain("transport", f.transport, &in.Transport)
	plain("command", f.command, &in.Command)
	plain("working-dir", f.workingDir, &in.WorkingDir)
	plain("url", f.url, &in.Url)
	plain("bearer-token", f.bearer, &in.BearerToken)
	str("tool-host", f.toolHost, &in.ToolHost)
	str("approval", f.approval, &in.Approval)
	str("approval-by", f.approvalBy, &in.ApprovalBy)
	if set("approval-tools") {
		in.ApprovalTools = f.approvalTools
	}
	if set("arg") {
		in.Args = f.args
	}
	if set("tools-allow") {
		in.ToolsAllow = f.allow
	}
	if set("tools-deny") {
		in.ToolsDeny = f.deny
	}
	if set("env") {
		in.Env = map[string]string{}
		for _, kv := range f.env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usagef("--env %q: want KEY=${VAR}", kv)
			}
			in.Env[k] = v
		}
	}
	if set("allow-insecure-http") {
		in.AllowInsecureHttp = f.insecure
	}
	if set("enabled") {
		in.Enabled = proto.Bool(f.enabled)
	}
	if set("expose") {
		in.Expose = proto.Bool(f.expose)
	}
	if set("timeout-ms") {
		in.TimeoutMs = proto.Int32(f.timeoutMs)
	}
	str("rate-limit", f.rateLimit, &in.RateLimit)
	if set("max-concurrency") {
		in.MaxConcurrency = proto.Int32(f.maxConcurrency)
	}
	return nil
}

// inputOf turns a stored server into the input that stores it again unchanged (its config),
// so that edit changes only the fields whose flags are given.
func inputOf(s *mcpgatewayv1.ServerState) *mcpgatewayv1.ServerConfig {
	if s.GetConfig() == nil {
		return &mcpgatewayv1.ServerConfig{}
	}
	return proto.CloneOf(s.GetConfig())
}

func (a *app) serverInputCmd(use string, edit bool) *cobra.Command {
	f := &serverFlags{}
	short := map[string]string{
		"add":  "Add (or replace) a server config",
		"edit": "Change the given fields of a registered server",
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
		adm, err := a.admin()
		if err != nil {
			return err
		}
		ctx, cancel := a.ctx(cmd)
		defer cancel()
		in := &mcpgatewayv1.ServerConfig{}
		if edit {
			got, err := adm.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: argv[0]})
			if err != nil {
				return err
			}
			in = inputOf(got.GetServer())
		}
		b, err := a.readInput(f.jsonText, f.file)
		if err != nil {
			return err
		}
		if b != nil {
			if err := unmarshalInput(b, "server", in); err != nil {
				return err
			}
		}
		if len(argv) == 1 {
			if cmd.Flags().Changed("id") && f.id != argv[0] {
				return usagef("the ID argument %q and --id %q differ: give one", argv[0], f.id)
			}
			in.Id = argv[0]
		}
		if err := f.apply(cmd.Flags(), in); err != nil {
			return err
		}
		if edit && in.GetId() != argv[0] {
			return usagef("edit %s cannot change the id to %q: add the new id, then rm the old one", argv[0], in.GetId())
		}
		if use == "test" {
			sp := a.spin("testing…")
			r, err := adm.TestServer(ctx, &mcpgatewayv1.TestServerRequest{Server: in})
			sp.Stop()
			if err != nil {
				return err
			}
			return a.showServer(r.GetServer())
		}
		r, err := adm.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: in})
		if err != nil {
			return err
		}
		return a.emit(r.GetServer(), func(w io.Writer) { fmt.Fprintf(w, "saved %s\n", r.GetServer().GetId()) })
	}
	return c
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
