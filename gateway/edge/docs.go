package edge

import (
	"fmt"
	"net/http"
	"strings"

	userdocs "github.com/zestmcp/zest/docs/user"
	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/gateway/openai"
	"github.com/zestmcp/zest/lib/service"
)

// docsIndex answers GET {prefix}docs as lemond does: {version, format, docs: [{id, title,
// url, bytes}]}, each url under the prefix the index was asked with. The pages are Zest's user
// docs of the APIs it serves (docs/user/pages.go), the ones the lemonade_docs tool reads.
func docsIndex(w http.ResponseWriter, r *http.Request) {
	prefix := strings.TrimSuffix(r.URL.Path, "docs")
	pages := userdocs.Pages()
	docs := make([]map[string]any, len(pages))
	for i, p := range pages {
		docs[i] = map[string]any{"id": p.ID, "title": p.Title, "url": prefix + "docs/" + p.ID, "bytes": p.Bytes}
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{"version": service.VersionString(), "format": "text/markdown", "docs": docs})
}

// docsPage answers GET {prefix}docs/{page...}: the page's Markdown, or 404 naming the index.
func docsPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("page")
	md, ok := userdocs.Read(id)
	if !ok {
		openai.WriteError(w, http.StatusNotFound, fmt.Sprintf("no documentation page %q is bundled; GET %sdocs lists them", id, strings.TrimSuffix(r.URL.Path, "docs/"+id)))
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	_, _ = w.Write([]byte(md))
}
