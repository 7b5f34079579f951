// Package catalog names external tools for chat without collisions (docs/dev/contracts.md's chat_name
// algorithm) and builds the catalog entries and OpenAI function definitions of the tools a
// server exposes (its tools_allow and tools_deny, decided by serverconfig.CheckTool).
//
// A Catalog keeps the catalog of the connected servers as one immutable Snapshot that every
// reader shares:
//
//	snap, err := cat.Snapshot(ctx) // the same *Snapshot until something changes
//	snap.ListTools()               // every entry, by chat_name (AdminService.ListTools)
//	snap.Server(id)                // one server's entries, in its order (nil: not connected)
//	snap.Servers(preset.GetMcpServerIds()) // a preset's servers' entries, by chat_name
//
// Snapshot checks, on each call, every registered server's config (by pointer, else by
// value) and the version of the tool list it last kept (upstream.Manager.Listed): a server
// registered, edited (its filters included), deleted, connected, disconnected or listing
// other tools (a refresh, a list_changed, a reconnect) makes a new snapshot, in which only the
// changed servers' entries are built again. So a reader sees every change that came before
// its call, and nothing is built when nothing changed. A snapshot also keeps the proto
// encoding of its ListTools answer, which Codec sends as it is. Nothing a snapshot returns may
// be modified.
package catalog

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/protobuf/types/known/structpb"
)

// MaxChatName is the longest chat_name (OpenAI's limit on function names).
const MaxChatName = 64

// clean is a part of a chat_name (serverconfig.ChatNamePart: a preset's tools are checked
// against the same names).
func clean(part string) string { return serverconfig.ChatNamePart(part) }

// ChatName is the collision-free name of tool of server serverID.
func ChatName(serverID, tool string) string {
	s, t := clean(serverID), clean(tool)
	name := "mcp_" + s + "__" + t
	h := fnv.New64a()
	h.Write([]byte(serverID + "\n" + tool))
	suffix := fmt.Sprintf("_%016x", h.Sum64())
	if s != serverID || t != tool || strings.Contains(s, "__") || strings.Contains(t, "__") {
		name += suffix
	}
	if len(name) > MaxChatName {
		name = strings.TrimRight(name[:MaxChatName-len(suffix)], "_-") + suffix
	}
	return name
}

// Tool is the part of an MCP Tool object the catalog reads.
type Tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations struct {
		Title string `json:"title"`
	} `json:"annotations"`
}

// Entry builds the catalog entry of one tool, given as the server sent it.
func Entry(serverID, serverName string, raw json.RawMessage) (*mcpgatewayv1.ToolEntry, error) {
	t, err := decode(serverID, raw)
	if err != nil {
		return nil, err
	}
	return build(serverID, serverName, raw, t)
}

// decode reads the part of a tool the catalog needs; a tool must have a name.
func decode(serverID string, raw json.RawMessage) (Tool, error) {
	var t Tool
	if err := json.Unmarshal(raw, &t); err != nil {
		return Tool{}, fmt.Errorf("tool of %q is not a JSON object: %w", serverID, err)
	}
	if t.Name == "" {
		return Tool{}, fmt.Errorf("a tool of %q has no name", serverID)
	}
	return t, nil
}

// build makes the entry of tool t (decoded from raw). The input schema is one Struct, shared
// by the entry's input_schema, its tool (when the server sent a schema) and its OpenAI
// function's parameters: entries are read, never modified, and one Struct instead of three
// is a third of a catalog's memory.
func build(serverID, serverName string, raw json.RawMessage, t Tool) (*mcpgatewayv1.ToolEntry, error) {
	rawStruct := &structpb.Struct{}
	if err := rawStruct.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("tool %q of %q: %w", t.Name, serverID, err)
	}
	schema := &structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("object")}}
	if len(t.InputSchema) > 0 && string(t.InputSchema) != "null" {
		if v := rawStruct.GetFields()["inputSchema"].GetStructValue(); v != nil {
			schema = v // the same JSON, decoded once
		} else if err := schema.UnmarshalJSON(t.InputSchema); err != nil {
			return nil, fmt.Errorf("tool %q of %q: inputSchema: %w", t.Name, serverID, err)
		}
	}
	title := t.Title
	if title == "" {
		title = t.Annotations.Title
	}
	chat := ChatName(serverID, t.Name)
	desc := t.Description
	openai := &structpb.Struct{Fields: map[string]*structpb.Value{
		"type": structpb.NewStringValue("function"),
		"function": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"name":        structpb.NewStringValue(chat),
			"description": structpb.NewStringValue("[" + serverName + "] " + desc),
			"parameters":  structpb.NewStructValue(schema),
		}}),
	}}
	return &mcpgatewayv1.ToolEntry{
		ServerId: serverID, ServerName: serverName, Name: t.Name, ChatName: chat, Title: title,
		Description: desc, InputSchema: schema, Tool: rawStruct, OpenaiTool: openai,
	}, nil
}

// Entries builds the catalog entries of the tools of cfg's server (raws, as it listed them)
// that its filters expose, in the server's order. A malformed tool is left out and reported
// to skipped (when not nil), with the error that says why.
func Entries(cfg *mcpgatewayv1.ServerConfig, raws []json.RawMessage, skipped func(error)) []*mcpgatewayv1.ToolEntry {
	out := make([]*mcpgatewayv1.ToolEntry, 0, len(raws))
	for _, raw := range raws {
		t, err := decode(cfg.GetId(), raw)
		if err == nil && !serverconfig.Exposed(cfg, t.Name) {
			continue // a hidden tool costs no entry
		}
		var e *mcpgatewayv1.ToolEntry
		if err == nil {
			e, err = build(cfg.GetId(), cfg.GetName(), raw, t)
		}
		if err != nil {
			if skipped != nil {
				skipped(err)
			}
			continue
		}
		out = append(out, e)
	}
	return out
}
