package toolchat

import (
	"context"
	"encoding/json"
	"errors"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"github.com/zestmcp/zest/services/mcpgateway/toolshape"
)

// Option configures a Loop.
type Option func(*Loop)

// WithToolSearch is the shared tool-search index a chat of a preset with tool_search
// searches (without it, tool_search is ignored and the model is offered the tools).
func WithToolSearch(s *toolsearch.Shared) Option { return func(l *Loop) { l.search = s } }

// searchMode is what a chat of a preset with tool_search offers the model: search_tools and
// call_tool, in place of the tools it may call (callable, gathered as for any chat: what the
// filters and the caller's visibility leave).
type searchMode struct {
	callable map[string]*tool // by the name the preset serves (shaped)
	servers  []string         // the providers that gave tools: a search looks among theirs
	shape    *toolshape.Shape // the preset's: what a search finds is shaped as callable is
}

// metaTools are the chat's definitions of search_tools and call_tool (OpenAI functions).
func metaTools() map[string]*tool {
	out := map[string]*tool{}
	for _, raw := range toolsearch.MetaTools {
		var m struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"inputSchema"`
		}
		_ = json.Unmarshal(raw, &m) // fixed JSON, read by toolsearch's tests
		out[m.Name] = &tool{chatName: m.Name, served: m.Name, name: m.Name, meta: true, openai: map[string]any{"type": "function",
			"function": map[string]any{"name": m.Name, "description": m.Description, "parameters": m.InputSchema}}}
	}
	return out
}

// newSearchMode keeps the chat's tools (shaped: by the names the preset serves, the hidden
// ones left out) as what call_tool may call; the servers a search looks among are those that
// gave them, and what it finds is shaped by shape as they are.
func newSearchMode(callable map[string]*tool, providers []string, shape *toolshape.Shape) *searchMode {
	gave := map[string]bool{}
	for _, t := range callable {
		gave[t.serverID()] = true
	}
	var servers []string
	for _, id := range providers {
		if gave[id] {
			servers = append(servers, id)
		}
	}
	return &searchMode{callable: callable, servers: servers, shape: shape}
}

// searchTools answers search_tools (arguments args): the best matches among the chat's tools.
func (l *Loop) searchTools(ctx context.Context, s *searchMode, args string) ran {
	a, err := toolsearch.ParseSearch(json.RawMessage(args))
	if err == nil {
		var answer toolsearch.Answer
		answer, err = l.search.Search(ctx, a, s.servers, s.shape)
		if err == nil {
			kept := answer.Tools[:0]
			for _, f := range answer.Tools {
				if s.callable[f.Name] != nil { // what this chat may call (by its shaped name), and only that
					kept = append(kept, f)
				}
			}
			answer.Tools = kept
			text, isErr := resultText(toolsearch.Result(answer))
			return ran{text: text, isErr: isErr}
		}
	}
	if errors.Is(err, toolsearch.ErrBadArguments) || errors.Is(err, toolsearch.ErrUnknownServer) {
		return failed(err.Error())
	}
	return failed("The tool search failed: " + err.Error())
}

// resolveCall turns a call of call_tool into the call of the tool it names, with that tool's
// arguments: the call then goes as any other (the pipeline, its record, its events). A name
// the chat may not call is the model's mistake: the text tells it what to do.
func (s *searchMode) resolveCall(c *inferencev1.ToolCall) (*tool, *inferencev1.ToolCall, string) {
	a, err := toolsearch.ParseCall(json.RawMessage(c.GetFunction().GetArguments()))
	if err != nil {
		return nil, nil, err.Error()
	}
	t := s.callable[a.Name]
	if t == nil {
		return nil, nil, "Unknown tool " + a.Name + ": call search_tools first and use a name it answers"
	}
	args := string(a.Arguments)
	if args == "" || args == "null" {
		args = "{}"
	}
	return t, &inferencev1.ToolCall{Id: c.GetId(), Type: c.GetType(), Function: &inferencev1.FunctionCall{Name: a.Name, Arguments: args}}, ""
}

// lookup is the tool a model's call names: one the chat offers, or with tool search one it
// may call (a model that learned a name from search_tools may call it by that name).
func lookup(tools map[string]*tool, s *searchMode, name string) *tool {
	if t := tools[name]; t != nil || s == nil {
		return t
	}
	return s.callable[name]
}
