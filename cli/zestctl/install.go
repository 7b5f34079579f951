package zestctl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// maxAnswerBytes bounds the line read as the answer to "Save it?".
const maxAnswerBytes = 256

func (a *app) registry() (mcpgatewayv1.RegistryServiceClient, error) {
	cc, err := a.conn(a.mcpgwAddr)
	if err != nil {
		return nil, err
	}
	return mcpgatewayv1.NewRegistryServiceClient(cc), nil
}

// installCmd is `servers install NAME[@VERSION]`: the registry's server mapped by mcpgateway
// (RegistryService.PlanInstall), shown, confirmed, then saved with AdminService.UpsertServer.
func (a *app) installCmd() *cobra.Command {
	var id, workingDir, toolHost string
	var yes bool
	c := &cobra.Command{
		Use:   "install NAME[@VERSION]",
		Short: "Register a server of the MCP Registry, after showing what it will run",
		Long: `install reads NAME (e.g. io.github.modelcontextprotocol/server-everything) at VERSION (default:
the latest) from the MCP Registry mcpgateway reads (ZEST_MCP_REGISTRY_URL), shows what Zest would
run (npx for npm packages, uvx for PyPI, or the remote's URL) and the environment variables it
refers to, asks before saving (--yes to skip), then registers it as "zestctl servers add" does.
Secret variables are saved as ${NAME} references, never values: set them where the server runs.`,
		Args: args(1, "NAME[@VERSION]"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			name, version := argv[0], ""
			if i := strings.LastIndex(name, "@"); i > 0 {
				name, version = name[:i], name[i+1:]
			}
			reg, err := a.registry()
			if err != nil {
				return err
			}
			adm, err := a.admin()
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := reg.PlanInstall(ctx, &mcpgatewayv1.PlanInstallRequest{Name: name, Version: version})
			if err != nil {
				return err
			}
			srv := r.GetServer()
			if srv.GetRefused() != "" {
				return exitError{code: ExitServer, msg: fmt.Sprintf("%s %s: %s", srv.GetName(), srv.GetVersion(), srv.GetRefused())}
			}
			cfg := proto.CloneOf(srv.GetPlan().GetConfig())
			if id != "" {
				cfg.Id = id
			}
			if workingDir != "" {
				cfg.WorkingDir = workingDir
			}
			if toolHost != "" {
				cfg.ToolHost = proto.String(toolHost)
			}
			if err := a.checkFree(ctx, adm, cfg.GetId()); err != nil {
				return err
			}
			show := a.stdout
			if a.output != "table" {
				show = a.stderr // the data on stdout stays one document
			}
			describePlan(show, srv, cfg)
			if !yes {
				ok, err := a.confirm(show, "Save it? [y/N] ")
				if err != nil {
					return err
				}
				if !ok {
					return exitError{code: ExitServer, msg: "not installed: nothing was saved"}
				}
			}
			saved, err := adm.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: cfg})
			if err != nil {
				return err
			}
			return a.emit(saved.GetServer(), func(w io.Writer) {
				fmt.Fprintf(w, "Installed %q. Connect it: zestctl servers connect %s\n", saved.GetServer().GetId(), saved.GetServer().GetId())
			})
		},
	}
	fs := c.Flags()
	fs.StringVar(&id, "id", "", "the server's id in Zest (default: the last part of NAME)")
	fs.StringVar(&workingDir, "working-dir", "", "the stdio server's working directory on the tool host")
	fs.StringVar(&toolHost, "tool-host", "", "pin the stdio server to this tool host (its ZEST_TOOLHOST_NAME)")
	fs.BoolVarP(&yes, "yes", "y", false, "save without asking")
	return c
}

// searchCmd is `servers search [TEXT]`: the registry's latest versions whose name matches,
// each with what it would run or why Zest cannot install it (RegistryService.SearchRegistry).
func (a *app) searchCmd() *cobra.Command {
	var cursor string
	var limit int32
	c := &cobra.Command{
		Use:   "search [TEXT]",
		Short: "Find servers in the MCP Registry, with what each would run",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, argv []string) error {
			reg, err := a.registry()
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			req := &mcpgatewayv1.SearchRegistryRequest{Cursor: cursor, Limit: limit}
			if len(argv) == 1 {
				req.Search = argv[0]
			}
			r, err := reg.SearchRegistry(ctx, req)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) {
				fmt.Fprintln(w, "NAME\tVERSION\tRUNS")
				for _, s := range r.GetServers() {
					runs := s.GetPlan().GetCommandLine()
					if u := s.GetPlan().GetUrl(); u != "" {
						runs = u
					}
					if s.GetRefused() != "" {
						runs = "cannot install: " + strings.TrimPrefix(s.GetRefused(), "Zest cannot install this server: ")
					}
					row(w, s.GetName(), s.GetVersion(), runs)
				}
				if r.GetNextCursor() != "" {
					fmt.Fprintf(w, "More: --cursor %s\n", r.GetNextCursor())
				}
			})
		},
	}
	c.Flags().StringVar(&cursor, "cursor", "", "the next page's cursor, as the previous page printed it")
	c.Flags().Int32Var(&limit, "limit", 0, "servers per page (1-100; default 30)")
	return c
}

// checkFree refuses an id already registered: install never replaces a server.
func (a *app) checkFree(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, id string) error {
	_, err := adm.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: id})
	switch status.Code(err) {
	case codes.NotFound:
		return nil
	case codes.OK:
		return usagef("a server with id %q is registered already: give another with --id, or remove it first (zestctl servers rm %s)", id, id)
	}
	return err
}

// describePlan says what the server will run, in words for a person.
func describePlan(w io.Writer, srv *mcpgatewayv1.RegistryServer, cfg *mcpgatewayv1.ServerConfig) {
	plan := srv.GetPlan()
	fmt.Fprintf(w, "%s %s (%s)\n", srv.GetName(), srv.GetVersion(), plan.GetSource())
	if d := srv.GetDescription(); d != "" {
		fmt.Fprintf(w, "  %s\n", d)
	}
	fmt.Fprintf(w, "Will be registered as server %q (%s):\n", cfg.GetId(), cfg.GetTransport())
	if plan.GetCommandLine() != "" {
		fmt.Fprintf(w, "  runs:        %s\n", plan.GetCommandLine())
	}
	if cfg.GetWorkingDir() != "" {
		fmt.Fprintf(w, "  in:          %s\n", cfg.GetWorkingDir())
	}
	if plan.GetUrl() != "" {
		fmt.Fprintf(w, "  connects to: %s\n", plan.GetUrl())
	}
	if t := cfg.GetBearerToken(); t != "" {
		fmt.Fprintf(w, "  sends:       Authorization: Bearer %s (resolved in mcpgateway's environment)\n", t)
	}
	for _, v := range plan.GetVariables() {
		what := "optional, left out: add it with zestctl servers edit"
		if v.GetInConfig() {
			what = "required: set it where the server runs"
			if cfg.GetTransport() == "stdio" {
				what = "required: set it in the tool host's environment"
			}
		}
		if v.GetSecret() {
			what += "; secret, never stored"
		}
		if d := v.GetDefaultValue(); d != "" {
			what += "; default " + d
		}
		ref := v.GetName()
		if v.GetInConfig() {
			ref += "=${" + v.GetName() + "}"
		}
		fmt.Fprintf(w, "  env:         %s (%s)", ref, what)
		if d := v.GetDescription(); d != "" {
			fmt.Fprintf(w, " — %s", d)
		}
		fmt.Fprintln(w)
	}
}

// confirm asks question and reads one line: y or yes (any case) is yes.
func (a *app) confirm(w io.Writer, question string) (bool, error) {
	fmt.Fprint(w, question)
	line, err := bufio.NewReader(io.LimitReader(a.stdin, maxAnswerBytes)).ReadString('\n')
	if err != nil && err != io.EOF {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}
