package toolsearch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/zestmcp/zest/services/mcpgateway/toolshape"
)

// The two meta-tools a preset with tool_search serves in place of its tools, and their bounds.
const (
	// SearchToolName finds tools: a query, an optional server and limit.
	SearchToolName = "search_tools"
	// CallToolName calls a tool search_tools found, by its name and with its arguments.
	CallToolName = "call_tool"
	// DefaultLimit is how many tools search_tools answers when its limit is not given.
	DefaultLimit = 5
	// MaxLimit is the largest limit search_tools accepts: each tool answered costs its
	// description and schema in the model's context.
	MaxLimit = 20
)

// MetaTools are the MCP Tool objects of search_tools and call_tool, as tools/list serves them.
var MetaTools = []json.RawMessage{
	json.RawMessage(`{"name":"` + SearchToolName + `","title":"Search tools",` +
		`"description":"Find the tools that can do something, by a request in plain words (\"which programs are running\", \"open a pull request\"). Answers the best matches with their names, descriptions and input schemas; call one with call_tool.",` +
		`"inputSchema":{"type":"object","properties":{` +
		`"query":{"type":"string","description":"What you want to do, in plain words."},` +
		`"server":{"type":"string","description":"Only tools of this MCP server (its id, the part after mcp_ in a tool's name)."},` +
		`"limit":{"type":"integer","minimum":1,"maximum":` + fmt.Sprint(MaxLimit) + `,"description":"How many tools to answer (default ` + fmt.Sprint(DefaultLimit) + `)."}},` +
		`"required":["query"]},"annotations":{"readOnlyHint":true,"openWorldHint":false}}`),
	json.RawMessage(`{"name":"` + CallToolName + `","title":"Call a tool",` +
		`"description":"Call a tool that search_tools found: its name exactly as search_tools answered it, and its arguments as its input schema asks.",` +
		`"inputSchema":{"type":"object","properties":{` +
		`"name":{"type":"string","description":"The tool's name, as search_tools answered it."},` +
		`"arguments":{"type":"object","description":"The tool's arguments, as its input schema asks."}},` +
		`"required":["name"]}}`),
}

// IsMeta reports whether name is one of the meta-tools.
func IsMeta(name string) bool { return name == SearchToolName || name == CallToolName }

// SearchArgs are search_tools' arguments.
type SearchArgs struct {
	Query  string `json:"query"`
	Server string `json:"server,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// ParseSearch reads search_tools' arguments (a JSON object): a query is needed, a limit is
// 1 to MaxLimit (DefaultLimit when absent).
func ParseSearch(args json.RawMessage) (SearchArgs, error) {
	var a SearchArgs
	if err := decodeArgs(args, &a); err != nil {
		return a, err
	}
	switch {
	case strings.TrimSpace(a.Query) == "":
		return a, fmt.Errorf("%w: query is required: say in plain words what you want to do", ErrBadArguments)
	case a.Limit == 0:
		a.Limit = DefaultLimit
	case a.Limit < 1 || a.Limit > MaxLimit:
		return a, fmt.Errorf("%w: limit must be 1 to %d, not %d", ErrBadArguments, MaxLimit, a.Limit)
	}
	return a, nil
}

// CallArgs are call_tool's arguments.
type CallArgs struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ParseCall reads call_tool's arguments: a tool's name, and its arguments (an object, or none).
func ParseCall(args json.RawMessage) (CallArgs, error) {
	var a CallArgs
	if err := decodeArgs(args, &a); err != nil {
		return a, err
	}
	if a.Name == "" {
		return a, fmt.Errorf("%w: name is required: a tool's name as search_tools answered it", ErrBadArguments)
	}
	if args := bytes.TrimSpace(a.Arguments); len(args) > 0 && string(args) != "null" && args[0] != '{' {
		return a, fmt.Errorf("%w: arguments must be an object, as the tool's input schema asks", ErrBadArguments)
	}
	return a, nil
}

func decodeArgs(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage(`{}`)
	}
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadArguments, err)
	}
	return nil
}

// Found is one tool search_tools answers: what a client needs to call it through call_tool.
type Found struct {
	Name        string         `json:"name"` // the name call_tool takes: the chat_name, or the preset's new name for it
	Server      string         `json:"server"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

// Answer is what a search found, and how it ranked them.
type Answer struct {
	Tools []Found
	// Ranking is RankedBM25 or RankedBlended: whether the embedding model had a part.
	Ranking string
}

// The rankings of an Answer: BM25 alone (no embedding model named, the catalog not embedded
// yet, or the query's embedding failed), or BM25 blended with the embedding model.
const (
	RankedBM25    = "bm25"
	RankedBlended = "blended"
)

// MetaRanking is the key of search_tools' result _meta that says how its tools were ranked
// (RankedBM25, RankedBlended): for the console and an operator, not for a model, which reads
// the content.
const MetaRanking = "zest/ranking"

// Search answers search_tools over the tools of servers (the providers the caller may use,
// in any order), narrowed to args.Server when set: the best matches of the shared index,
// best first, as the preset's shape serves them (toolshape; nil: as they are). The index is
// one per catalog version, for every preset: a tool the preset hides is left out before the
// limit, and the others are shaped as they are answered (their new name, description and
// schema); the words matched are the tool's own. A server filter that is not one of servers
// is an error that lists them.
func (s *Shared) Search(ctx context.Context, args SearchArgs, servers []string, shape *toolshape.Shape) (Answer, error) {
	if args.Server != "" && !slices.Contains(servers, args.Server) {
		return Answer{}, fmt.Errorf("%w: %q: use one of %s", ErrUnknownServer, args.Server, strings.Join(servers, ", "))
	}
	ix, err := s.Index(ctx)
	if err != nil {
		return Answer{}, err
	}
	allow := func(d *Doc) bool { return slices.Contains(servers, d.Server) }
	if args.Server != "" {
		allow = func(d *Doc) bool { return d.Server == args.Server }
	}
	if shape != nil {
		inServers := allow
		allow = func(d *Doc) bool {
			_, shown := shape.Served(d.Entry.GetChatName())
			return shown && inServers(d)
		}
	}
	vector := s.queryVector(ctx, ix, args.Query)
	ranking := RankedBM25
	if vector != nil {
		ranking = RankedBlended
	}
	searchesMetric.WithLabelValues(ranking).Inc()
	hits := ix.Search(args.Query, Options{Limit: args.Limit, Allow: allow, Vector: vector})
	out := make([]Found, 0, len(hits))
	for _, h := range hits {
		e := h.Doc.Entry
		name, desc, schema, _ := shape.Function(e.GetChatName(), e.GetDescription(), e.GetInputSchema().AsMap())
		out = append(out, Found{Name: name, Server: e.GetServerId(), Title: e.GetTitle(), Description: desc, InputSchema: schema})
	}
	return Answer{Tools: out, Ranking: ranking}, nil
}

// Result is search_tools' MCP result for a: the tools as JSON text, what a model reads, and
// in _meta how they were ranked (MetaRanking). Not also as structuredContent: a client may
// hand both to its model, and the schemas are most of an answer's tokens.
func Result(a Answer) json.RawMessage {
	text, _ := json.Marshal(map[string]any{"tools": a.Tools})
	if len(a.Tools) == 0 {
		text = []byte(`{"tools":[],"hint":"No tool matched: try other words, or no server filter."}`)
	}
	res := map[string]any{"content": []map[string]any{{"type": "text", "text": string(text)}}}
	if a.Ranking != "" {
		res["_meta"] = map[string]any{MetaRanking: a.Ranking}
	}
	b, _ := json.Marshal(res)
	return b
}

// ErrorResult is a meta-tool's MCP result for an error the caller can correct (isError: the
// model reads it and tries again).
func ErrorResult(err error) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"content": []map[string]any{{"type": "text", "text": err.Error()}},
		"isError": true,
	})
	return b
}
