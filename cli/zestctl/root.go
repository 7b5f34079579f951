// Package zestctl is the zestctl command line: a client of Zest's typed gRPC contracts
// (AdminService, ChatService, McpService, InferenceService, gRPC health) for administrators
// and scripts.
//
// Exit codes, for scripts:
//
//	0  ok
//	1  the server refused or failed (any gRPC error not listed below)
//	2  usage error: a bad flag, argument or input file (nothing was sent)
//	3  not found (gRPC NOT_FOUND, or an HTTP 404 when probing an MCP endpoint)
//	4  unauthenticated or permission denied (a missing or wrong key)
//	5  unavailable: a service could not be reached, or did not answer in time
//	6  a tool call answered a result with isError: true
package zestctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/service"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exit codes (see the package comment).
const (
	ExitOK           = 0
	ExitServer       = 1
	ExitUsage        = 2
	ExitNotFound     = 3
	ExitAuth         = 4
	ExitUnavailable  = 5
	ExitToolIsError  = 6
	defaultTimeout   = 2 * time.Minute
	minTimeout       = time.Second
	maxTimeout       = time.Hour
	defaultMcpgwAddr = "127.0.0.1:13311"
	defaultInfAddr   = "127.0.0.1:13310"
	defaultHostAddr  = "127.0.0.1:13312"
	defaultEdgeAddr  = "127.0.0.1:13305"
)

// usageError is a mistake of the command line, found before anything is sent.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitError carries an exit code chosen by a command (e.g. a tool's isError) with its message
// (empty: nothing more to print).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// ExitCode maps an error to the documented exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ExitUnavailable
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.NotFound:
			return ExitNotFound
		case codes.Unauthenticated, codes.PermissionDenied:
			return ExitAuth
		case codes.Unavailable, codes.DeadlineExceeded:
			return ExitUnavailable
		}
		return ExitServer
	}
	// cobra's own complaints (an unknown command) are usage errors too.
	if m := err.Error(); strings.HasPrefix(m, "unknown command") || strings.HasPrefix(m, "unknown flag") ||
		strings.HasPrefix(m, "unknown shorthand flag") || strings.HasPrefix(m, "invalid argument") {
		return ExitUsage
	}
	return ExitServer
}

// app holds the settings every command shares and the connections it opened.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	mcpgwAddr, infAddr, hostAddr string
	output                       string
	timeout                      time.Duration
	key                          string
	conns                        map[string]*grpc.ClientConn
}

// envOr returns the variable's value, or def when it is unset or empty.
func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

// Main runs zestctl with args and returns its exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if getenv == nil {
		getenv = os.Getenv
	}
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, conns: map[string]*grpc.ClientConn{}}
	defer a.close()
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(context.Background())
	code := ExitCode(err)
	if err != nil && err.Error() != "" {
		fmt.Fprintf(stderr, "zestctl: %s\n", describe(err))
		if code == ExitUsage {
			fmt.Fprintln(stderr, "Run 'zestctl --help' (or the command with --help) for usage.")
		}
	}
	return code
}

// describe words an error for people: a gRPC status as its code and message, with a hint
// for the codes a setting usually causes.
func describe(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := fmt.Sprintf("%s: %s", st.Code(), st.Message())
	switch st.Code() {
	case codes.Unauthenticated, codes.PermissionDenied:
		msg += " (set " + keyauth.EnvAdminKey + ", or " + keyauth.EnvAPIKey + ", to the suite's key)"
	case codes.Unavailable:
		msg += " (is the suite running? check --mcpgateway-addr / --inference-addr)"
	}
	return msg
}

func (a *app) close() {
	for _, c := range a.conns {
		c.Close()
	}
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "zestctl",
		Short: "Administer a running Zest suite over its gRPC contracts",
		Long: `zestctl talks to Zest's services over their typed gRPC contracts: MCP servers, tools,
presets, tool-loop chats, MCP sessions, tool-call activity, the audit trail and health, and
prints ready MCP client configurations.

Addresses come from flags, else from the services' own variables (ZEST_MCPGATEWAY_ADDR,
ZEST_INFERENCE_ADDR, ZEST_TOOLHOST_ADDR, ZEST_EDGE_ADDR). The key is read from
LEMONADE_ADMIN_API_KEY, else LEMONADE_API_KEY, and sent as "authorization: Bearer <key>"
metadata, as the edge does; it is never a flag (flags show in ps).

Exit codes: 0 ok, 1 server error, 2 usage error, 3 not found, 4 unauthenticated or
permission denied, 5 unavailable, 6 a tool answered isError.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints the version make build stamps into every binary.
		Version: service.VersionString(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch a.output {
			case "table", "json", "yaml":
			default:
				return usagef("--output %q: want table, json or yaml", a.output)
			}
			if a.timeout < minTimeout || a.timeout > maxTimeout {
				return usagef("--timeout %v: want %v to %v", a.timeout, minTimeout, maxTimeout)
			}
			for _, f := range []struct{ name, v string }{{"mcpgateway-addr", a.mcpgwAddr}, {"inference-addr", a.infAddr}} {
				if err := grpcdial.ValidateTarget("--"+f.name, f.v); err != nil {
					return usageError{err}
				}
			}
			if _, _, err := toolhostAddrs(a.hostAddr); err != nil {
				return usagef("--toolhost-addr %q: %v", a.hostAddr, err)
			}
			a.key = envOr(a.getenv, keyauth.EnvAdminKey, a.getenv(keyauth.EnvAPIKey))
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.mcpgwAddr, "mcpgateway-addr", envOr(a.getenv, "ZEST_MCPGATEWAY_ADDR", defaultMcpgwAddr), "mcpgateway's gRPC address: host:port, a comma-separated list of replicas, or dns:///name:port (ZEST_MCPGATEWAY_ADDR)")
	pf.StringVar(&a.infAddr, "inference-addr", envOr(a.getenv, "ZEST_INFERENCE_ADDR", defaultInfAddr), "the inference service's gRPC address: host:port, a comma-separated list of replicas, or dns:///name:port (ZEST_INFERENCE_ADDR)")
	pf.StringVar(&a.hostAddr, "toolhost-addr", envOr(a.getenv, "ZEST_TOOLHOST_ADDR", defaultHostAddr), "the tool hosts' gRPC addresses, for status (each is checked): host:port, a comma-separated list, or dns:///name:port (ZEST_TOOLHOST_ADDR)")
	pf.StringVarP(&a.output, "output", "o", envOr(a.getenv, "ZEST_OUTPUT", "table"), "output format: table, json or yaml (ZEST_OUTPUT)")
	pf.DurationVar(&a.timeout, "timeout", defaultTimeout, "longest time one command may take (1s to 1h)")

	root.AddCommand(a.statusCmd(), a.serversCmd(), a.toolsCmd(), a.callCmd(), a.presetsCmd(),
		a.chatCmd(), a.sessionsCmd(), a.activityCmd(), a.auditCmd(), a.approvalsCmd(), a.configCmd())
	return root
}

// conn returns the (lazily connecting) client connection to addr, carrying the key.
func (a *app) conn(addr string) (*grpc.ClientConn, error) {
	if c, ok := a.conns[addr]; ok {
		return c, nil
	}
	c, err := grpcdial.Dial(addr, a.key, 0)
	if err != nil {
		return nil, err
	}
	a.conns[addr] = c
	return c, nil
}

// ctx bounds one command by --timeout.
func (a *app) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), a.timeout)
}

// args checks a command's positional arguments, naming what is wanted.
func args(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, got []string) error {
		if len(got) != n {
			return usagef("want %d argument(s) (%s), got %d: %q", n, names, len(got), got)
		}
		return nil
	}
}

// completeIDs completes the first argument with the ids list returns (server or preset ids),
// asked of mcpgateway with a short deadline; a failure completes nothing.
func (a *app) completeIDs(list func(cmd *cobra.Command) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, argv []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(argv) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		// Completion skips PersistentPreRunE: read the key here.
		a.key = envOr(a.getenv, keyauth.EnvAdminKey, a.getenv(keyauth.EnvAPIKey))
		ids, err := list(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

func (a *app) serverIDs(cmd *cobra.Command) ([]string, error) {
	adm, err := a.admin()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
	defer cancel()
	r, err := adm.ListServers(ctx, &mcpgatewayv1.ListServersRequest{})
	var ids []string
	for _, s := range r.GetServers() {
		ids = append(ids, s.GetConfig().GetId())
	}
	return ids, err
}

func (a *app) presetIDs(cmd *cobra.Command) ([]string, error) {
	adm, err := a.admin()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
	defer cancel()
	r, err := adm.ListPresets(ctx, &mcpgatewayv1.ListPresetsRequest{})
	var ids []string
	for _, p := range r.GetPresets() {
		ids = append(ids, p.GetId())
	}
	return ids, err
}
