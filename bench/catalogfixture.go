package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// catalogFixtureRole, given as the bench binary's first argument, makes it the light stdio MCP
// server of the catalog scenario: 13 tools with schemas the size and shape of
// server-everything's (descriptions, nested objects, enums, arrays; about 800 bytes each, 2 KB per catalog entry; server-everything's are 370 to 1,200 bytes). A Go
// process costs a few MB where a Node server costs ~68 MB, so 100 of them fit on a laptop.
const catalogFixtureRole = "catalog-fixture"

// fixtureTools is the tools/list result of the fixture, built once.
func fixtureTools() []map[string]any {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	enum := func(desc string, vals ...string) map[string]any {
		return map[string]any{"type": "string", "description": desc, "enum": vals}
	}
	num := func(desc string, lo, hi int) map[string]any {
		return map[string]any{"type": "integer", "description": desc, "minimum": lo, "maximum": hi}
	}
	names := []string{"search_issues", "create_issue", "update_issue", "list_commits", "get_file_contents",
		"create_pull_request", "merge_pull_request", "list_branches", "search_code", "add_comment",
		"get_workflow_run", "list_releases", "fork_repository"}
	out := make([]map[string]any, 0, len(names))
	for i, name := range names {
		props := map[string]any{
			"owner": str("The repository's owner."),
			"repo":  str("The repository's name."),
			"state": enum("Which items to include.", "open", "closed", "all"),
			"page":  num("Page, from 1.", 1, 100),
			"filters": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"labels": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
					"author": map[string]any{"type": "object", "properties": map[string]any{
						"login": map[string]any{"type": "string"},
						"kind":  map[string]any{"type": "string", "enum": []string{"user", "bot"}},
					}},
				},
			},
		}
		out = append(out, map[string]any{
			"name":        name,
			"description": fmt.Sprintf("Tool %d of the catalog fixture: %s in a repository.", i+1, name),
			"inputSchema": map[string]any{"type": "object", "properties": props, "required": []string{"owner", "repo"}, "additionalProperties": false},
			"annotations": map[string]any{"title": name, "readOnlyHint": i%2 == 0},
		})
	}
	return out
}

// serveCatalogFixture answers initialize, ping and tools/list on stdin/stdout until stdin
// closes; notifications are read and ignored, any other request gets "method not found".
func serveCatalogFixture() error {
	list, err := json.Marshal(map[string]any{"tools": fixtureTools()})
	if err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue // a notification, or a line that is not JSON
		}
		var result string
		switch m.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"catalog-fixture","version":"1.0.0"}}`
		case "ping":
			result = `{}`
		case "tools/list":
			result = string(list)
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`+"\n", m.ID)
			out.Flush()
			continue
		}
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result)
		out.Flush()
	}
	return in.Err()
}
