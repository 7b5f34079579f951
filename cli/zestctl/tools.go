package zestctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func (a *app) toolsCmd() *cobra.Command {
	var server string
	list := &cobra.Command{
		Use: "list", Short: "List the tools of connected servers", Args: args(0, "none"),
		RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, cmd *cobra.Command, _ []string) error {
			r, err := adm.ListTools(ctx, &mcpgatewayv1.ListToolsRequest{})
			if err != nil {
				return err
			}
			var tools []*mcpgatewayv1.ToolEntry
			for _, t := range r.GetTools() {
				if server == "" || t.GetServerId() == server {
					tools = append(tools, t)
				}
			}
			return a.emit(map[string]any{"tools": plainList(tools)}, func(w io.Writer) {
				fmt.Fprintln(w, "SERVER\tTOOL\tCHAT NAME\tDESCRIPTION")
				for _, t := range tools {
					row(w, t.GetServerId(), t.GetName(), t.GetChatName(), t.GetDescription())
				}
			})
		}),
	}
	list.Flags().StringVar(&server, "server", "", "only the tools of this server id")
	c := &cobra.Command{Use: "tools", Short: "Tools of connected servers (AdminService)"}
	c.AddCommand(list)
	return c
}

// parseArgs builds a tool's arguments from --json and then --arg k=v, each value JSON when it
// parses as JSON, else the string as given.
func parseArgs(jsonText string, kvs []string) (*structpb.Struct, error) {
	m := map[string]any{}
	if jsonText != "" {
		if len(jsonText) > maxInputBytes {
			return nil, usagef("--json holds %d bytes; the limit is %d", len(jsonText), maxInputBytes)
		}
		d := json.NewDecoder(strings.NewReader(jsonText))
		if err := d.Decode(&m); err != nil || m == nil {
			return nil, usagef("--json %q: want a JSON object of the tool's arguments (%v)", jsonText, err)
		}
		if d.More() {
			return nil, usagef("--json: want one JSON object, got more after it")
		}
	}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--arg %q: want NAME=VALUE (VALUE as JSON when it parses, else a string)", kv)
		}
		var val any = v
		var parsed any
		if d := json.NewDecoder(bytes.NewReader([]byte(v))); d.Decode(&parsed) == nil && !d.More() {
			val = parsed
		}
		m[k] = val
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, usagef("arguments: %v", err)
	}
	return s, nil
}

func (a *app) callCmd() *cobra.Command {
	var kvs []string
	var jsonText string
	var timeoutMs int32
	c := &cobra.Command{
		Use:   "call SERVER TOOL",
		Short: "Call one tool of one server; exit 6 when the tool answers isError",
		Long: `call runs TOOL (its own name) on the registered server SERVER, connecting first if needed.
Arguments come from --json '{...}' and then --arg NAME=VALUE (repeatable; VALUE is JSON when it
parses as JSON, e.g. 5, true or {"a":1}, else the string as given). The table output prints the
result's text content; json and yaml print the whole CallToolResponse. A result with
isError: true exits 6.`,
		Args:              args(2, "SERVER TOOL"),
		ValidArgsFunction: a.completeIDs(a.serverIDs),
		RunE: func(cmd *cobra.Command, argv []string) error {
			arguments, err := parseArgs(jsonText, kvs)
			if err != nil {
				return err
			}
			adm, err := a.admin()
			if err != nil {
				return err
			}
			req := &mcpgatewayv1.CallToolRequest{Id: argv[0], Name: argv[1], Arguments: arguments}
			if cmd.Flags().Changed("timeout-ms") {
				req.TimeoutMs = proto.Int32(timeoutMs)
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			sp := a.spin("calling " + argv[1] + "…")
			r, err := adm.CallTool(ctx, req)
			sp.Stop()
			if err != nil {
				return err
			}
			res := r.GetResult().GetFields()
			if err := a.emit(r, func(w io.Writer) { fmt.Fprint(w, resultText(r.GetResult())) }); err != nil {
				return err
			}
			if res["isError"].GetBoolValue() {
				return exitError{code: ExitToolIsError, msg: fmt.Sprintf("tool %s of %s answered isError", argv[1], argv[0])}
			}
			return nil
		},
	}
	c.Flags().StringArrayVar(&kvs, "arg", nil, "NAME=VALUE argument (repeatable; VALUE as JSON when it parses, else a string)")
	c.Flags().StringVar(&jsonText, "json", "", "the arguments as one JSON object")
	c.Flags().Int32Var(&timeoutMs, "timeout-ms", 0, "bound of the call, 1000-300000 (default: the server's timeout_ms)")
	return c
}

// resultText is a CallToolResult for people: its text content, else its structured content
// or other parts as JSON, one per line.
func resultText(r *structpb.Struct) string {
	var b strings.Builder
	for _, v := range r.GetFields()["content"].GetListValue().GetValues() {
		part := v.GetStructValue().GetFields()
		if part["type"].GetStringValue() == "text" {
			b.WriteString(part["text"].GetStringValue())
		} else {
			j, _ := v.MarshalJSON()
			b.Write(j)
		}
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		if sc, ok := r.GetFields()["structuredContent"]; ok {
			j, _ := sc.MarshalJSON()
			b.Write(j)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
