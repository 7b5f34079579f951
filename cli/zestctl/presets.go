package zestctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

func (a *app) presetsCmd() *cobra.Command {
	c := &cobra.Command{Use: "presets", Short: "Chat presets: a model, a system prompt and MCP providers (AdminService)", Aliases: []string{"preset"}}
	showPreset := func(p *mcpgatewayv1.Preset) error {
		return a.emit(p, func(w io.Writer) {
			row(w, "id", p.GetId())
			row(w, "name", p.GetName())
			row(w, "model", p.GetModel())
			row(w, "providers", strings.Join(p.GetMcpServerIds(), ", "))
			row(w, "system_prompt", p.GetSystemPrompt())
			for _, t := range p.GetTools() {
				row(w, "tool", shapedTool(t))
			}
		})
	}
	c.AddCommand(&cobra.Command{
		Use: "list", Short: "List every preset", Args: args(0, "none"),
		RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, cmd *cobra.Command, _ []string) error {
			r, err := adm.ListPresets(ctx, &mcpgatewayv1.ListPresetsRequest{})
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"presets": plainList(r.GetPresets())}, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tNAME\tMODEL\tPROVIDERS")
				for _, p := range r.GetPresets() {
					row(w, p.GetId(), p.GetName(), p.GetModel(), strings.Join(p.GetMcpServerIds(), ","))
				}
			})
		}),
	}, &cobra.Command{
		Use: "get ID", Short: "Show one preset", Args: args(1, "ID"), ValidArgsFunction: a.completeIDs(a.presetIDs),
		RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, cmd *cobra.Command, argv []string) error {
			r, err := adm.GetPreset(ctx, &mcpgatewayv1.GetPresetRequest{Id: argv[0]})
			if err != nil {
				return err
			}
			return showPreset(r.GetPreset())
		}),
	}, &cobra.Command{
		Use: "rm ID", Short: "Forget a preset", Aliases: []string{"delete"}, Args: args(1, "ID"),
		ValidArgsFunction: a.completeIDs(a.presetIDs),
		RunE: a.withAdmin(func(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, cmd *cobra.Command, argv []string) error {
			r, err := adm.DeletePreset(ctx, &mcpgatewayv1.DeletePresetRequest{Id: argv[0]})
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) { fmt.Fprintf(w, "removed %s\n", r.GetRemoved()) })
		}),
	})

	var id, name, model, system, jsonText, file string
	var servers []string
	var toolsEnabled bool
	add := &cobra.Command{
		Use: "add [ID]", Short: "Add (or replace) a preset", Args: wrapArgs(cobra.RangeArgs(0, 1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			in := &mcpgatewayv1.PresetInput{}
			b, err := a.readInput(jsonText, file)
			if err != nil {
				return err
			}
			var mask *fieldmaskpb.FieldMask
			if b != nil {
				if err := unmarshalInput(b, "preset", in); err != nil {
					return err
				}
				if namesTools(b) { // "tools": [] clears the shaping; left out, it is kept
					mask = &fieldmaskpb.FieldMask{Paths: []string{"tools"}}
				}
			}
			set := cmd.Flags().Changed
			if len(argv) == 1 {
				if set("id") && id != argv[0] {
					return usagef("the ID argument %q and --id %q differ: give one", argv[0], id)
				}
				id = argv[0]
				in.Id = proto.String(id)
			}
			for _, s := range []struct {
				flag, v string
				dst     **string
			}{{"id", id, &in.Id}, {"name", name, &in.Name}, {"model", model, &in.Model}, {"system-prompt", system, &in.SystemPrompt}} {
				if set(s.flag) {
					*s.dst = proto.String(s.v)
				}
			}
			if set("server") {
				in.McpServerIds = servers
			}
			if set("tools-enabled") {
				in.ToolsEnabled = proto.Bool(toolsEnabled)
			}
			adm, err := a.admin()
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := adm.UpsertPreset(ctx, &mcpgatewayv1.UpsertPresetRequest{Preset: in, UpdateMask: mask})
			if err != nil {
				return err
			}
			return showPreset(r.GetPreset())
		},
	}
	fs := add.Flags()
	fs.StringVar(&id, "id", "", "preset id, [A-Za-z0-9_.-]{1,96} (default: derived from name)")
	fs.StringVar(&name, "name", "", "name shown to people (default: id)")
	fs.StringVar(&model, "model", "", "model the chat uses unless the request names one")
	fs.StringVar(&system, "system-prompt", "", "system prompt put first in the conversation")
	fs.StringArrayVar(&servers, "server", nil, `provider: a registered server id, or "lemonade" for the built-in tools (repeatable, 0-4)`)
	fs.BoolVar(&toolsEnabled, "tools-enabled", false, `Lemonade's legacy flag: with no --server, true selects "lemonade"`)
	fs.StringVar(&jsonText, "json", "", "the whole preset as JSON (PresetInput; flags given beside it win)")
	fs.StringVarP(&file, "file", "f", "", "read the preset as JSON from this file (- for stdin)")
	c.AddCommand(add)
	return c
}

// namesTools reports whether a preset's JSON (bare, or wrapped in {"preset":…}) names tools.
func namesTools(b []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(b, &probe) != nil {
		return false
	}
	if inner, ok := probe["preset"]; ok && len(probe) == 1 {
		probe = nil
		if json.Unmarshal(inner, &probe) != nil {
			return false
		}
	}
	_, ok := probe["tools"]
	return ok
}

// shapedTool is one of a preset's tools in a line: "add ← mcp_x__get-sum: fixed a; defaults b".
func shapedTool(t *mcpgatewayv1.PresetTool) string {
	line := t.GetTool()
	if t.GetName() != "" {
		line = t.GetName() + " ← " + line
	}
	var parts []string
	if t.GetHidden() {
		parts = append(parts, "hidden")
	}
	if t.GetDescription() != "" {
		parts = append(parts, "new description")
	}
	if f := t.GetArguments().GetFixed(); len(f) > 0 {
		parts = append(parts, "fixed "+strings.Join(slices.Sorted(maps.Keys(f)), ", "))
	}
	if d := t.GetArguments().GetDefaults(); len(d) > 0 {
		parts = append(parts, "defaults "+strings.Join(slices.Sorted(maps.Keys(d)), ", "))
	}
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, "; ")
	}
	return line
}
