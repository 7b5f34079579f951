package zestctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxAuditLimit mirrors mcpgateway's bound of ListAudit's limit.
const maxAuditLimit = 1000

// auditFilters are the filters list and export share.
type auditFilters struct{ after, before, kind, server, who string }

func (f *auditFilters) register(c *cobra.Command) {
	c.Flags().StringVar(&f.after, "after", "", "only entries after this entry id, or at and after this RFC 3339 time")
	c.Flags().StringVar(&f.before, "before", "", "only entries before this entry id (a page's next_before) or RFC 3339 time")
	c.Flags().StringVar(&f.kind, "kind", "", `"admin" (admin changes), "tool" (tool calls) or "trim" (the trail's trims); every kind when empty`)
	c.Flags().StringVar(&f.server, "server", "", "only the entries of this server id")
	c.Flags().StringVar(&f.who, "who", "", "only the entries of this caller (12 hex digits of its key's SHA-256, or anonymous)")
}

func (f *auditFilters) check() error {
	if f.kind != "" && f.kind != "admin" && f.kind != "tool" && f.kind != "trim" {
		return usagef("--kind %q: want admin, tool or trim", f.kind)
	}
	return nil
}

func (a *app) auditCmd() *cobra.Command {
	var lf auditFilters
	var limit int32
	list := &cobra.Command{
		Use:   "list",
		Short: "A page of the audit trail, newest first (ListAudit): admin changes and tool calls of every replica",
		Args:  args(0, "none"),
		PreRunE: func(*cobra.Command, []string) error {
			if limit < 0 || limit > maxAuditLimit {
				return usagef("--limit %d: want 1 to %d (0: the server's default, 100); export gives everything", limit, maxAuditLimit)
			}
			return lf.check()
		},
		RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, _ *cobra.Command, _ []string) error {
			r, err := adm.ListAudit(ctx, &mcpgatewayv1.ListAuditRequest{After: lf.after, Before: lf.before, Limit: limit, Kind: lf.kind, Server: lf.server, Who: lf.who})
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tTIME\tKIND\tWHO\tACTION\tSERVER\tTARGET/TOOL\tOUTCOME\tMS\tCHANGED/ERROR")
				for _, e := range r.GetEntries() {
					what, note := e.GetTarget(), e.GetError()
					if e.GetKind() == "tool" {
						what = e.GetTool()
					}
					if len(e.GetChanged()) > 0 {
						note = strings.Join(e.GetChanged(), ",")
					}
					for i, tr := range e.GetTrimmed() { // a trim: what it removed
						if i == 0 {
							note = ""
						} else {
							note += "; "
						}
						note += fmt.Sprintf("removed %d %s (%s) %s..%s", tr.GetCount(), tr.GetKind(), tr.GetReason(), tr.GetFrom(), tr.GetTo())
					}
					row(w, e.GetId(), e.GetTime(), e.GetKind(), e.GetWho(), e.GetAction(), e.GetServerId(), what, e.GetOutcome(), e.GetDurationMs(), note)
				}
				if r.GetNextBefore() != "" {
					fmt.Fprintf(w, "# more: --before %s\n", r.GetNextBefore())
				}
			})
		}),
	}
	lf.register(list)
	list.Flags().Int32Var(&limit, "limit", 0, "at most this many entries, the newest (1-1000; 0: 100)")

	var ef auditFilters
	export := &cobra.Command{
		Use:     "export",
		Short:   "Every entry the filters select, oldest first, as JSON lines on stdout (ExportAudit)",
		Args:    args(0, "none"),
		PreRunE: func(*cobra.Command, []string) error { return ef.check() },
		RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, _ *cobra.Command, _ []string) error {
			stream, err := adm.ExportAudit(ctx, &mcpgatewayv1.ExportAuditRequest{After: ef.after, Before: ef.before, Kind: ef.kind, Server: ef.server, Who: ef.who})
			if err != nil {
				return err
			}
			for {
				msg, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				var buf []byte
				for _, e := range msg.GetEntries() {
					line, err := protojson.Marshal(e)
					if err != nil {
						return err
					}
					buf = append(append(buf, line...), '\n')
				}
				if _, err := a.stdout.Write(buf); err != nil {
					return err
				}
			}
		}),
	}
	ef.register(export)
	c := &cobra.Command{Use: "audit", Short: "The audit trail: admin changes and tool calls, kept in the registry (AdminService)"}
	c.AddCommand(list, export)
	return c
}
