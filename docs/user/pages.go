// Package user embeds the user docs that describe the APIs Zest serves to Lemonade's clients,
// so that a running Zest answers them offline and for its own version: the lemonade_docs tool
// of /mcp and GET {prefix}docs of the edge read them here (Lemonade bundles its API reference
// the same way). Which pages: Pages' list, and docs/user/builtin-tools.md says why.
package user

import (
	"embed"
	"sort"
	"strings"
)

// The pages that describe Lemonade's API as Zest serves it: its REST routes, the OpenAI
// routes, the built-in tools of /mcp, and how an MCP client reaches /mcp.
//
//go:embed lemonade.md openai-api.md builtin-tools.md mcp-clients.md
var files embed.FS

// Page is one bundled page: its id (the page's path under docs/, without .md, as Lemonade's
// ids mirror the path of its documentation site), its title (its first heading) and its size.
type Page struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Bytes int    `json:"bytes"`
}

// idPrefix is the folder the pages live in, the first part of their ids.
const idPrefix = "user/"

// Pages lists the bundled pages, by id.
func Pages() []Page {
	entries, _ := files.ReadDir(".")
	out := make([]Page, 0, len(entries))
	for _, e := range entries {
		b, _ := files.ReadFile(e.Name())
		out = append(out, Page{ID: idPrefix + strings.TrimSuffix(e.Name(), ".md"), Title: title(string(b)), Bytes: len(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Read returns the Markdown of the page id ("user/lemonade"); ok is false for an id that is
// not bundled.
func Read(id string) (markdown string, ok bool) {
	name, found := strings.CutPrefix(id, idPrefix)
	if !found || name == "" || strings.ContainsAny(name, "/\\") {
		return "", false
	}
	b, err := files.ReadFile(name + ".md")
	if err != nil {
		return "", false
	}
	return string(b), true
}

// title is the text of the first "# " heading.
func title(md string) string {
	for line := range strings.Lines(md) {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "# "); ok {
			return strings.Trim(strings.TrimSpace(t), "`")
		}
	}
	return ""
}
