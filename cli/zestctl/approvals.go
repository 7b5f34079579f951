package zestctl

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// approvalsCmd lists and decides the tool calls that wait for approval (AdminService).
func (a *app) approvalsCmd() *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "The tool calls that wait for approval, on every replica, oldest first (ListApprovals)",
		Args:  args(0, "none"),
		RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, _ *cobra.Command, _ []string) error {
			r, err := adm.ListApprovals(ctx, &mcpgatewayv1.ListApprovalsRequest{})
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tSERVER\tTOOL\tWHO\tCREATED\tEXPIRES\tARGUMENTS")
				for _, x := range r.GetApprovals() {
					row(w, x.GetId(), x.GetServerId(), x.GetTool(), x.GetWho(), x.GetCreated(), x.GetExpires(), x.GetArguments())
				}
			})
		}),
	}
	decide := func(verb string) *cobra.Command {
		var reason string
		c := &cobra.Command{
			Use:   verb + " ID",
			Short: map[string]string{"approve": "Approve a waiting tool call: it runs (ApproveToolCall)", "deny": "Deny a waiting tool call: it fails, and the model is told the reason (DenyToolCall)"}[verb],
			Args:  args(1, "ID"),
			RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, _ *cobra.Command, argv []string) error {
				var got *mcpgatewayv1.Approval
				if verb == "approve" {
					r, err := adm.ApproveToolCall(ctx, &mcpgatewayv1.ApproveToolCallRequest{Id: argv[0], Reason: reason})
					if err != nil {
						return err
					}
					got = r.GetApproval()
				} else {
					r, err := adm.DenyToolCall(ctx, &mcpgatewayv1.DenyToolCallRequest{Id: argv[0], Reason: reason})
					if err != nil {
						return err
					}
					got = r.GetApproval()
				}
				return a.emit(got, func(w io.Writer) {
					fmt.Fprintf(w, "%s %s: %s of %s\n", got.GetState(), got.GetId(), got.GetTool(), got.GetServerId())
				})
			}),
		}
		c.Flags().StringVar(&reason, "reason", "", "why (at most 500 bytes; told to the model with a denial)")
		return c
	}
	c := &cobra.Command{Use: "approvals", Short: "Tool calls that wait for approval (docs/operator/untrusted-tools.md)"}
	c.AddCommand(list, decide("approve"), decide("deny"))
	return c
}
