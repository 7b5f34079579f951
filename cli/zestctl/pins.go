package zestctl

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// pinsCmd lists and decides the held tool definitions (docs/operator/untrusted-tools.md#pinned-tool-definitions).
func (a *app) pinsCmd() *cobra.Command {
	list := &cobra.Command{
		Use:   "list [SERVER]",
		Short: "The tool definitions pinned and the changes held, of one server or every one (ListToolPins)",
		Args:  cobra.MaximumNArgs(1), ValidArgsFunction: a.completeIDs(a.serverIDs),
		RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, _ *cobra.Command, argv []string) error {
			req := &mcpgatewayv1.ListToolPinsRequest{}
			if len(argv) == 1 {
				req.ServerId = argv[0]
			}
			r, err := adm.ListToolPins(ctx, req)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) {
				fmt.Fprintln(w, "SERVER\tTOOL\tSTATE\tSHA256\tSINCE\tCHANGE")
				for _, p := range r.GetServers() {
					for _, h := range p.GetHeld() {
						row(w, p.GetServerId(), h.GetName(), h.GetState(), short(h.GetNewSha256()), h.GetHeldAt(), change(h))
					}
					for _, t := range p.GetPinned() {
						row(w, p.GetServerId(), t.GetName(), "pinned", short(t.GetSha256()), t.GetPinnedAt(), "")
					}
				}
			})
		}),
	}
	decide := func(verb string) *cobra.Command {
		return &cobra.Command{
			Use: verb + " SERVER [TOOL...]",
			Short: map[string]string{
				"accept": "Accept held tool definitions (every pending one of SERVER without TOOL): they are pinned, listed and callable (AcceptToolPins)",
				"refuse": "Refuse held tool definitions (every pending one of SERVER without TOOL): they stay hidden until another definition comes (RefuseToolPins)",
			}[verb],
			Args: cobra.MinimumNArgs(1), ValidArgsFunction: a.completeIDs(a.serverIDs),
			RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, _ *cobra.Command, argv []string) error {
				var r interface {
					proto.Message
					GetDecided() []*mcpgatewayv1.HeldTool
				}
				var err error
				if verb == "accept" {
					r, err = adm.AcceptToolPins(ctx, &mcpgatewayv1.AcceptToolPinsRequest{ServerId: argv[0], Tools: argv[1:]})
				} else {
					r, err = adm.RefuseToolPins(ctx, &mcpgatewayv1.RefuseToolPinsRequest{ServerId: argv[0], Tools: argv[1:]})
				}
				if err != nil {
					return err
				}
				return a.emit(r, func(w io.Writer) {
					for _, h := range r.GetDecided() {
						fmt.Fprintf(w, "%sed %s of %s (sha256 %s)\n", strings.TrimSuffix(verb, "e"), h.GetName(), argv[0], short(h.GetNewSha256()))
					}
				})
			}),
		}
	}
	c := &cobra.Command{Use: "pins", Short: "Pinned tool definitions and the changes held until you decide (docs/operator/untrusted-tools.md)"}
	c.AddCommand(list, decide("accept"), decide("refuse"))
	return c
}

// short is the first 12 hex digits of a hash, as the table shows it.
func short(sum string) string { return sum[:min(12, len(sum))] }

// change says in a few words what a held change is: a new tool, or the members that differ.
func change(h *mcpgatewayv1.HeldTool) string {
	if h.GetOldDefinition() == nil {
		return "new tool"
	}
	var differ []string
	old, cur := h.GetOldDefinition().GetFields(), h.GetNewDefinition().GetFields()
	for _, k := range []string{"title", "description", "inputSchema", "outputSchema", "annotations"} {
		if !same(old[k], cur[k]) {
			differ = append(differ, k)
		}
	}
	return strings.Join(differ, ", ") + " changed"
}

func same(a, b *structpb.Value) bool {
	ja, _ := a.MarshalJSON()
	jb, _ := b.MarshalJSON()
	return string(ja) == string(jb)
}
