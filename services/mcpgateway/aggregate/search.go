package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
)

// WithToolSearch is the shared index a preset with tool_search searches (toolsearch.Shared:
// one per catalog version, for every session). Without it, tool_search is ignored and the
// preset lists its tools.
func WithToolSearch(s *toolsearch.Shared) Option { return func(h *Handler) { h.search = s } }

// toolSearch reports whether the call's preset serves its tools through search_tools and
// call_tool (its tool_search; the registry is read from memory).
func (c *call) toolSearch(ctx context.Context) bool {
	if c.h.search == nil {
		return false
	}
	p, err := c.h.reg.GetPreset(ctx, c.ep.preset)
	return err == nil && p.GetToolSearch()
}

// listMeta answers tools/list of a preset with tool_search: the two meta-tools, in one page.
func (c *call) listMeta(msg jsonrpc.Message, params json.RawMessage) []byte {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if params != nil && json.Unmarshal(params, &p) != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: params.cursor must be a string")
	}
	if p.Cursor != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, errUnknownCursor.Error())
	}
	b, _ := json.Marshal(map[string]any{"tools": toolsearch.MetaTools})
	return jsonrpc.Result(msg.ID, b)
}

// callMeta runs search_tools or call_tool (name) of a preset with tool_search. search_tools
// searches the shared index among the tools of the providers this caller may use; call_tool
// calls the tool it names as a tools/call of it would, through the one pipeline (entry
// toolcall.EntrySearch): a tool the preset does not serve to this caller is unknown.
func (c *call) callMeta(ctx context.Context, msg jsonrpc.Message, name string, params json.RawMessage) []byte {
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
		Meta      json.RawMessage `json:"_meta,omitempty"`
	}
	_ = json.Unmarshal(params, &p) // params is an object: tools/call's name was read from it
	if name == toolsearch.SearchToolName {
		return c.searchTools(ctx, msg, p.Arguments)
	}
	a, err := toolsearch.ParseCall(p.Arguments)
	if err != nil {
		return jsonrpc.Result(msg.ID, toolsearch.ErrorResult(err))
	}
	if toolsearch.IsMeta(a.Name) {
		return mcpserve.UnknownTool(msg.ID, a.Name)
	}
	inner := map[string]json.RawMessage{"name": mustJSON(a.Name)}
	if len(a.Arguments) > 0 {
		inner["arguments"] = a.Arguments
	}
	if len(p.Meta) > 0 {
		inner["_meta"] = p.Meta // the progress token, and 2026-07-28's members, are the call's
	}
	b, _ := json.Marshal(inner)
	return c.invokeTool(ctx, msg, b, toolcall.EntrySearch)
}

// searchTools answers search_tools: the providers' tools are listed first (cached; a server
// not yet connected connects), so that the catalog holds them, then the shared index is
// searched among them, the tools found shaped as the preset serves them (hidden ones never
// found; call_tool maps a shaped name back, as tools/call does: invokeTool).
func (c *call) searchTools(ctx context.Context, msg jsonrpc.Message, args json.RawMessage) []byte {
	a, err := toolsearch.ParseSearch(args)
	if err != nil {
		return jsonrpc.Result(msg.ID, toolsearch.ErrorResult(err))
	}
	servers := make([]string, 0, len(c.provs))
	var wg sync.WaitGroup
	for _, pr := range c.provs {
		servers = append(servers, pr.id)
		if pr.builtin() {
			continue
		}
		wg.Go(func() {
			if _, err := c.h.up.ListTools(ctx, pr.cfg, false); err != nil {
				c.h.log.WarnContext(ctx, "a provider of a preset left out of a tool search", "preset", c.ep.preset, "server", pr.id, "err", err)
			}
		})
	}
	wg.Wait()
	answer, err := c.h.search.Search(ctx, a, servers, c.shape())
	switch {
	case errors.Is(err, toolsearch.ErrUnknownServer):
		return jsonrpc.Result(msg.ID, toolsearch.ErrorResult(err))
	case err != nil:
		return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, "Internal error: tool search: "+err.Error())
	}
	return jsonrpc.Result(msg.ID, toolsearch.Result(answer))
}

func mustJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
