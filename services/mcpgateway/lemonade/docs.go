package lemonade

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	userdocs "github.com/zestmcp/zest/docs/user"
)

// Docs is the tool that reads the API reference bundled with the server (Lemonade's
// lemonade_docs): Zest's user docs of the APIs it serves to Lemonade's clients
// (docs/user/pages.go), the same pages GET {prefix}docs serves.
const Docs = "lemonade_docs"

const docsSchema = `{"type": "object", "properties": {
    "page": {"type": "string", "description": "Optional. Page id from the listing, e.g. 'user/lemonade'. Omit to list."}},
  "additionalProperties": false}`

// docs lists the bundled pages (a summary, then {"pages":[{id,title,bytes}]} as JSON text), or
// returns one page's Markdown; an unknown page is an isError result naming the ids.
func (t *Tools) docs(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Page string `json:"page"`
	}
	if err := bindArgs(req, &args); err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	pages := userdocs.Pages()
	ids := make([]string, len(pages))
	for i, p := range pages {
		ids[i] = p.ID
	}
	if args.Page != "" {
		md, ok := userdocs.Read(strings.Trim(args.Page, "/"))
		if !ok {
			return mcp.NewToolResultError(fmt.Sprintf("no page %q is bundled; call %s with no arguments to list them (%s)", args.Page, Docs, strings.Join(ids, ", "))), nil
		}
		return mcp.NewToolResultText(md), nil
	}
	b, err := json.Marshal(map[string]any{"pages": pages})
	if err != nil {
		return nil, err
	}
	summary := fmt.Sprintf("%d pages of this server's API reference: %s. Pass page (an id) to read one as Markdown.", len(pages), strings.Join(ids, ", "))
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(summary), mcp.NewTextContent(string(b))}}, nil
}
