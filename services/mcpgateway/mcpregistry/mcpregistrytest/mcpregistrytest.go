// Package mcpregistrytest serves server.json documents as the MCP Registry's API (/v0.1)
// does, on 127.0.0.1, for the tests of the registry client, zestctl servers install and the
// console's install search. Its servers/ are the documents of real servers (see its README).
package mcpregistrytest

import (
	"embed"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

//go:embed servers/*.json
var servers embed.FS

// Documents are the server.json documents of servers/, by file name without ".json".
func Documents(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	names, err := servers.ReadDir("servers")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, n := range names {
		b, err := servers.ReadFile(path.Join("servers", n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(n.Name(), ".json")] = b
	}
	return out
}

// Registry is a registry served on 127.0.0.1 until the test ends.
type Registry struct {
	// URL is its base URL (ZEST_MCP_REGISTRY_URL).
	URL string
	// Requests counts the requests it answered.
	Requests atomic.Int64
	docs     []doc // sorted by name, then as given
}

type doc struct {
	name, version string
	latest        bool
	raw           json.RawMessage
}

// Start serves docs (each a server.json; a later version of a name is its latest) and, with
// none given, every document of Documents.
func Start(t testing.TB, docs ...json.RawMessage) *Registry {
	t.Helper()
	if len(docs) == 0 {
		all := Documents(t)
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range all {
				if !yield(k) {
					return
				}
			}
		}) {
			docs = append(docs, all[k])
		}
	}
	r := &Registry{}
	for _, raw := range docs {
		var head struct{ Name, Version string }
		if err := json.Unmarshal(raw, &head); err != nil || head.Name == "" {
			t.Fatalf("mcpregistrytest: a document without a name: %v", err)
		}
		for i := range r.docs {
			if r.docs[i].name == head.Name {
				r.docs[i].latest = false
			}
		}
		r.docs = append(r.docs, doc{name: head.Name, version: head.Version, latest: true, raw: raw})
	}
	slices.SortStableFunc(r.docs, func(a, b doc) int { return strings.Compare(a.name, b.name) })
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Registry) entry(d doc) map[string]any {
	return map[string]any{"server": d.raw, "_meta": map[string]any{
		"io.modelcontextprotocol.registry/official": map[string]any{
			"status": "active", "publishedAt": "2026-09-01T00:00:00Z", "updatedAt": "2026-09-01T00:00:00Z", "isLatest": d.latest,
		}}}
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.Requests.Add(1)
	if req.Method != http.MethodGet {
		problem(w, http.StatusMethodNotAllowed, "Method not allowed")
		return
	}
	p := req.URL.EscapedPath()
	if p == "/v0.1/servers" {
		r.list(w, req.URL.Query())
		return
	}
	rest, ok := strings.CutPrefix(p, "/v0.1/servers/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[1] != "versions" {
		problem(w, http.StatusNotFound, "Not Found")
		return
	}
	name, err1 := url.PathUnescape(parts[0])
	version, err2 := url.PathUnescape(parts[2])
	if err1 != nil || err2 != nil {
		problem(w, http.StatusBadRequest, "Bad path")
		return
	}
	for _, d := range r.docs {
		if d.name == name && (d.version == version || (version == "latest" && d.latest)) {
			writeJSON(w, r.entry(d))
			return
		}
	}
	problem(w, http.StatusNotFound, "Server not found")
}

// list answers GET /v0.1/servers: search is a substring of the name (any case), version=latest
// keeps the latest versions, cursor is the name (and version) the previous page ended at.
func (r *Registry) list(w http.ResponseWriter, q url.Values) {
	limit := 30
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			problem(w, http.StatusUnprocessableEntity, "limit must be 1-100")
			return
		}
		limit = n
	}
	search, cursor := strings.ToLower(q.Get("search")), q.Get("cursor")
	var page []map[string]any
	next := ""
	for _, d := range r.docs {
		key := d.name + ":" + d.version
		if (cursor != "" && key <= cursor) || (q.Get("version") == "latest" && !d.latest) || !strings.Contains(strings.ToLower(d.name), search) {
			continue
		}
		if len(page) == limit {
			next = cursor
			break
		}
		page = append(page, r.entry(d))
		cursor = key
	}
	if page == nil {
		page = []map[string]any{}
	}
	meta := map[string]any{"count": len(page)}
	if next != "" {
		meta["nextCursor"] = next
	}
	writeJSON(w, map[string]any{"servers": page, "metadata": meta})
}

func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": http.StatusText(status), "status": status, "detail": detail})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
