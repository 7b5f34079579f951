package zestctl

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// maxActivityLimit mirrors mcpgateway's bound of ListActivity's limit.
const maxActivityLimit = 10000

func (a *app) sessionsCmd() *cobra.Command {
	var server, preset string
	end := &cobra.Command{
		Use:   "end SESSION_ID",
		Short: "End an MCP session (McpService.EndSession, as DELETE /mcp does): its id is refused afterwards",
		Long: `end ends the MCP session SESSION_ID of /mcp, or of /mcp/servers/{id} with --server, or of
/mcp/presets/{id} with --preset; every replica refuses the id afterwards.`,
		Args: args(1, "SESSION_ID"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if server != "" && preset != "" {
				return usagef("--server and --preset: a session belongs to one endpoint, give one")
			}
			cc, err := a.conn(a.mcpgwAddr)
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			if _, err := mcpgatewayv1.NewMcpServiceClient(cc).EndSession(ctx, &mcpgatewayv1.EndSessionRequest{
				SessionId: argv[0], ServerId: server, PresetId: preset}); err != nil {
				return err
			}
			return a.emit(map[string]any{"ended": argv[0]}, func(w io.Writer) { fmt.Fprintf(w, "ended %s\n", argv[0]) })
		},
	}
	end.Flags().StringVar(&server, "server", "", "the session is one of /mcp/servers/{id}")
	end.Flags().StringVar(&preset, "preset", "", "the session is one of /mcp/presets/{id}")
	c := &cobra.Command{Use: "sessions", Short: "MCP sessions (McpService)"}
	c.AddCommand(end)
	return c
}

func (a *app) activityCmd() *cobra.Command {
	var limit int32
	var after uint64
	c := &cobra.Command{
		Use:   "activity",
		Short: "The latest tool calls on every path of one mcpgateway replica, newest first (ListActivity)",
		Args:  args(0, "none"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 || limit > maxActivityLimit {
				return usagef("--limit %d: want 1 to %d (0: the server's default, 100)", limit, maxActivityLimit)
			}
			adm, err := a.admin()
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := adm.ListActivity(ctx, &mcpgatewayv1.ListActivityRequest{Limit: limit, After: after})
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tTIME\tPATH\tWHO\tSERVER\tTOOL\tOUTCOME\tMS\tERROR")
				for _, c := range r.GetCalls() {
					row(w, c.GetId(), c.GetTime(), c.GetPath(), c.GetWho(), c.GetServerId(), c.GetTool(), c.GetOutcome(), c.GetDurationMs(), c.GetError())
				}
			})
		},
	}
	c.Flags().Int32Var(&limit, "limit", 0, "at most this many calls, the newest (1-10000; 0: 100)")
	c.Flags().Uint64Var(&after, "after", 0, "only calls with a greater id (the previous answer's latest)")
	return c
}
