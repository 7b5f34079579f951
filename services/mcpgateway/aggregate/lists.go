package aggregate

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/federate"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

// kind is one of the lists a preset serves.
type kind struct {
	method string // the list method
	key    string // the member of the result that holds the items
	rename bool   // items are served under their chat_name
	uri    string // the member that locates an item ("uri", "uriTemplate"): its owner is recorded
}

var (
	toolsList     = kind{method: "tools/list", key: "tools", rename: true}
	promptsList   = kind{method: "prompts/list", key: "prompts", rename: true}
	resourcesList = kind{method: "resources/list", key: "resources", uri: "uri"}
	templatesList = kind{method: "resources/templates/list", key: "resourceTemplates", uri: "uriTemplate"}
)

// MetaUnavailable is the member of a list result's _meta that names the providers the list
// leaves out because they could not be reached (the cause is in mcpgateway's log).
const MetaUnavailable = "io.github.zestmcp/unavailable"

// maxPages bounds the pages of one provider's list read to find a name or a URI.
const maxPages = 100

// pageCursor is where the next page of a preset's list starts: a provider, and the cursor
// that provider gave for its next page. A page of the preset's list ends where a provider's
// page has a next one, so no provider's cursor is lost; the client sees it opaque.
type pageCursor struct {
	Provider string `json:"p"`
	Cursor   string `json:"c,omitempty"`
}

func (c pageCursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (pageCursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var c pageCursor
	if err != nil || json.Unmarshal(b, &c) != nil || c.Provider == "" {
		return pageCursor{}, false
	}
	return c, true
}

// serves reports whether p may hold items of k (the built-in provider has tools only).
func serves(p provider, k kind) bool { return !p.builtin() || k == toolsList }

// list answers one page of a list: the providers' lists in the preset's order, from where the
// cursor points, up to the first provider that has more pages (the next page starts with its
// next page). A preset whose providers each answer in one page lists in one page. A provider that cannot be reached is skipped, logged,
// and named in the result's _meta (MetaUnavailable).
func (c *call) list(ctx context.Context, msg jsonrpc.Message, params json.RawMessage, k kind) []byte {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if params != nil && json.Unmarshal(params, &p) != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: params.cursor must be a string")
	}
	start, upCursor := 0, ""
	if p.Cursor != nil {
		cur, ok := decodeCursor(*p.Cursor)
		start = -1
		for i, pr := range c.provs {
			if ok && pr.id == cur.Provider && serves(pr, k) {
				start, upCursor = i, cur.Cursor
			}
		}
		if start < 0 {
			return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, errUnknownCursor.Error())
		}
	}
	// The providers' pages are read at once (a slow provider delays the list by its own time
	// only), then taken in order up to the first with another page.
	type result struct {
		items []json.RawMessage
		next  string
		err   error
	}
	results := make([]*result, len(c.provs))
	var wg sync.WaitGroup
	for i := start; i < len(c.provs); i++ {
		if !serves(c.provs[i], k) {
			continue
		}
		cursor := ""
		if i == start {
			cursor = upCursor
		}
		results[i] = &result{}
		wg.Add(1)
		go func(r *result, pr provider) {
			defer wg.Done()
			r.items, r.next, r.err = c.page(ctx, pr, k, cursor)
		}(results[i], c.provs[i])
	}
	wg.Wait()
	items := []json.RawMessage{}
	var unavailable []string
	var next *pageCursor
	for i := start; i < len(c.provs) && next == nil; i++ {
		r, pr := results[i], c.provs[i]
		switch {
		case r == nil:
		case r.err != nil:
			c.h.log.WarnContext(ctx, "a provider of a preset left out of a list", "preset", c.ep.preset, "server", pr.id, "method", k.method, "err", r.err)
			unavailable = append(unavailable, pr.id)
		default:
			c.record(pr, k, r.items)
			items = append(items, r.items...)
			if r.next != "" {
				next = &pageCursor{Provider: pr.id, Cursor: r.next}
			}
		}
	}
	res := map[string]any{k.key: items}
	if next != nil {
		res["nextCursor"] = next.encode()
	}
	if len(unavailable) > 0 {
		res["_meta"] = map[string]any{MetaUnavailable: unavailable}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, "Internal error: "+err.Error())
	}
	return jsonrpc.Result(msg.ID, b)
}

// errNotDeclared means a provider does not declare the capability a list needs: it has no
// items of that list, which is no failure.
var errNotDeclared = fmt.Errorf("not declared")

// page reads one page of provider p's list k from cursor, as the preset serves it: tools
// its filters hide left out, tools and prompts under their chat_name, tools shaped by the
// preset (toolshape). A provider that does not declare the list has none of it.
func (c *call) page(ctx context.Context, p provider, k kind, cursor string) ([]json.RawMessage, string, error) {
	if p.builtin() {
		tools, err := c.h.builtin.BuiltinTools(ctx)
		return p.shape.Tools(tools), "", err
	}
	raws, next, err := c.h.upstreamPage(ctx, p, k, cursor)
	if errors.Is(err, errNotDeclared) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	out := make([]json.RawMessage, 0, len(raws))
	for _, raw := range raws {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			continue // not an object: no client could use it
		}
		if k.rename {
			var name string
			if json.Unmarshal(m["name"], &name) != nil || name == "" {
				continue
			}
			if k == toolsList && !serverconfig.Exposed(p.cfg, name) {
				continue
			}
			chat := catalog.ChatName(p.id, name)
			m["name"], _ = json.Marshal(chat)
			raw, _ = json.Marshal(m)
			if k == toolsList && p.shape.Has(chat) {
				var shown bool
				if raw, shown = p.shape.Tool(raw); !shown {
					continue // hidden by the preset
				}
			}
		}
		out = append(out, raw)
	}
	return out, next, nil
}

// upstreamPage reads one page of a server's list as the server sends it.
func (h *Handler) upstreamPage(ctx context.Context, p provider, k kind, cursor string) ([]json.RawMessage, string, error) {
	inf, err := h.up.Info(ctx, p.cfg)
	if err != nil {
		return nil, "", err
	}
	if !federate.Declares(inf.Capabilities, k.method) {
		return nil, "", errNotDeclared
	}
	params := json.RawMessage(`{}`)
	if cursor != "" {
		params, _ = json.Marshal(map[string]string{"cursor": cursor})
	}
	res, err := h.up.Call(ctx, p.cfg, k.method, params, 0)
	if err != nil {
		return nil, "", err
	}
	var page map[string]json.RawMessage
	var items []json.RawMessage
	var next string
	if err := json.Unmarshal(res, &page); err != nil {
		return nil, "", fmt.Errorf("the %s result is not an object: %w", k.method, err)
	}
	if err := json.Unmarshal(page[k.key], &items); len(page[k.key]) > 0 && err != nil {
		return nil, "", fmt.Errorf("%s of the %s result is not an array: %w", k.key, k.method, err)
	}
	_ = json.Unmarshal(page["nextCursor"], &next)
	return items, next, nil
}

// all reads every page of one server's list k as the server sends it (at most maxPages:
// beyond, what was read comes with an error), recording the owners of the URIs.
func (c *call) all(ctx context.Context, p provider, k kind) ([]json.RawMessage, error) {
	var out []json.RawMessage
	cursor := ""
	for range maxPages {
		page, next, err := c.h.upstreamPage(ctx, p, k, cursor)
		if errors.Is(err, errNotDeclared) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		c.record(p, k, page)
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
	return out, fmt.Errorf("%s of %q has more than %d pages", k.method, p.id, maxPages)
}

// record remembers p as the owner of the URIs (or templates) of items of list k, unless a
// provider before it in the preset's order owns them: a URI two providers list is the first's.
func (c *call) record(p provider, k kind, items []json.RawMessage) {
	if k.uri == "" {
		return
	}
	rank := func(id string) int {
		return slices.IndexFunc(c.provs, func(q provider) bool { return q.id == id })
	}
	for _, u := range itemNames(items, k.uri) {
		key := k.uri + "\n" + u
		if id, ok := c.h.owners.get(c.ep.preset, key); ok && id != p.id && rank(id) >= 0 && rank(id) < rank(p.id) {
			continue
		}
		c.h.owners.put(c.ep.preset, key, p.id)
	}
}

// resourceProviders are the servers of the preset that declare resources.
func (c *call) resourceProviders(ctx context.Context) []provider {
	var out []provider
	for _, p := range c.provs {
		if p.builtin() {
			continue
		}
		if inf, err := c.h.up.Info(ctx, p.cfg); err == nil && federate.Declares(inf.Capabilities, "resources/read") {
			out = append(out, p)
		}
	}
	return out
}

func (c *call) byID(id string) (provider, bool) {
	for _, p := range c.provs {
		if p.id == id && !p.builtin() {
			return p, true
		}
	}
	return provider{}, false
}

// owner finds the provider of a resource URI: the one that listed it (recorded when a list
// passed, else looked for in the lists), else the one whose template matches it; with one
// provider of resources, that one.
func (c *call) owner(ctx context.Context, uri string) (provider, bool) {
	return c.find(ctx, "uri\n"+uri,
		search{resourcesList, func(u string) bool { return u == uri }},
		search{templatesList, func(t string) bool { return Matches(t, uri) }})
}

// templateOwner finds the provider that lists the resource template tmpl.
func (c *call) templateOwner(ctx context.Context, tmpl string) (provider, bool) {
	return c.find(ctx, "uriTemplate\n"+tmpl, search{templatesList, func(t string) bool { return t == tmpl }})
}

// search is one list to look in, and what to look for in its items' locating member.
type search struct {
	k     kind
	match func(string) bool
}

// find returns the provider recorded for key, else the one provider of resources, else the
// first whose list matches, in the order of searches.
func (c *call) find(ctx context.Context, key string, searches ...search) (provider, bool) {
	if id, ok := c.h.owners.get(c.ep.preset, key); ok {
		if p, ok := c.byID(id); ok {
			return p, true
		}
	}
	cands := c.resourceProviders(ctx)
	if len(cands) == 1 {
		return cands[0], true
	}
	for _, s := range searches {
		for _, p := range cands {
			items, _ := c.all(ctx, p, s.k)
			if slices.ContainsFunc(itemNames(items, s.k.uri), s.match) {
				return p, true
			}
		}
	}
	return provider{}, false
}

// Matches reports whether uri is an expansion of the URI template tmpl (RFC 6570): a simple
// expression {x} stands for one path segment or less, a reserved or fragment one ({+x},
// {#x}) for anything, a query one ({?x,y}, {&x}) for an optional query.
func Matches(tmpl, uri string) bool {
	var re strings.Builder
	re.WriteString("^")
	for tmpl != "" {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			re.WriteString(regexp.QuoteMeta(tmpl))
			break
		}
		re.WriteString(regexp.QuoteMeta(tmpl[:open]))
		end := strings.IndexByte(tmpl[open:], '}')
		if end < 0 {
			re.WriteString(regexp.QuoteMeta(tmpl[open:]))
			break
		}
		expr := tmpl[open+1 : open+end]
		switch {
		case strings.HasPrefix(expr, "+"), strings.HasPrefix(expr, "#"):
			re.WriteString(".*")
		case strings.HasPrefix(expr, "?"), strings.HasPrefix(expr, "&"):
			re.WriteString("(?:[?&].*)?")
		default:
			re.WriteString("[^/?#]*")
		}
		tmpl = tmpl[open+end+1:]
	}
	re.WriteString("$")
	ok, err := regexp.MatchString(re.String(), uri)
	return err == nil && ok
}

// maxOwners bounds the recorded owners of URIs (all presets): when full, the record starts
// over (an owner not recorded is looked for again).
const maxOwners = 10000

// owners records which provider listed a URI, per preset, on this replica.
type owners struct {
	mu sync.Mutex
	m  map[string]string
}

func (o *owners) put(preset, key, provider string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.m) >= maxOwners {
		clear(o.m)
	}
	o.m[preset+"\n"+key] = provider
}

// drop forgets the owners recorded for preset (nil: for every preset).
func (o *owners) drop(preset *string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if preset == nil {
		clear(o.m)
		return
	}
	for k := range o.m {
		if strings.HasPrefix(k, *preset+"\n") {
			delete(o.m, k)
		}
	}
}

func (o *owners) get(preset, key string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	id, ok := o.m[preset+"\n"+key]
	return id, ok
}
