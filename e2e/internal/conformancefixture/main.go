// Command conformancefixture is a stdio MCP server (mark3labs/mcp-go's stdio server) that
// has every fixture the official conformance suite (@modelcontextprotocol/conformance 0.1.16)
// calls by name: its tools, resources, resource template and prompts, a completion for
// test_prompt_with_arguments, and the capabilities logging and completions. The e2e tests
// register it on the tool host and run the suite through /mcp/servers/{id}; test_sampling
// and the elicitation tools ask the client through Zest's relay.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A 1×1 PNG and a WAV header with two bytes of samples, as base64.
const (
	pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	wavBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAgD4AAAB9AAACABAAZGF0YQIAAAAAAA=="
)

func main() {
	// -prompts-only serves the prompts alone, and declares no other capability: a server
	// without tools (see e2e's TestServerWithoutTools).
	promptsOnly := flag.Bool("prompts-only", false, "serve the fixture prompts only, with no tools, resources, logging or completions")
	flag.Parse()
	opts := []server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(true, false),
		server.WithPromptCapabilities(false),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(completer{}),
	}
	if *promptsOnly {
		opts = []server.ServerOption{server.WithPromptCapabilities(false)}
	}
	s := server.NewMCPServer("zest-conformance-fixture", "1.0.0", opts...)
	f := fixture{s: s}
	if !*promptsOnly {
		f.tools()
		f.resources()
	}
	f.prompts()
	// server.ServeStdio with a stdout of our own (see written).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := server.NewStdioServer(s).Listen(ctx, os.Stdin, out); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "conformancefixture:", err)
		os.Exit(1) //nolint:gocritic // the deferred stop only unregisters the signals; exiting does that too
	}
}

// written is the server's stdout, counting the notifications written by key (a progress
// token, or the method): mcp-go's stdio server writes notifications from a goroutine of their
// own, so a tool's answer may overtake its last notification, and the client would see that
// progress after the call ended. A tool that sends notifications waits until they are
// written before it answers.
type written struct {
	mu   sync.Mutex
	w    io.Writer
	seen map[string]int
}

var out = &written{w: os.Stdout, seen: map[string]int{}}

func (o *written) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if bytes.Contains(p, []byte(`"notifications/`)) {
		var m struct {
			Method string `json:"method"`
			Params struct {
				ProgressToken any `json:"progressToken"`
			} `json:"params"`
		}
		if json.Unmarshal(bytes.TrimSpace(p), &m) == nil {
			o.mu.Lock()
			o.seen[m.Method]++
			if m.Params.ProgressToken != nil {
				o.seen[fmt.Sprint(m.Params.ProgressToken)]++
			}
			o.mu.Unlock()
		}
	}
	return n, err
}

func (o *written) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[key]
}

// until waits (up to 5 s) for n notifications of key to be written.
func (o *written) until(ctx context.Context, key string, n int) {
	deadline := time.Now().Add(5 * time.Second)
	for o.count(key) < n && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
}

type fixture struct{ s *server.MCPServer }

func text(s string) *mcp.CallToolResult { return mcp.NewToolResultText(s) }

// tools registers every fixture tool.
func (f fixture) tools() {
	plain := func(name, description string, h server.ToolHandlerFunc) {
		f.s.AddTool(mcp.NewTool(name, mcp.WithDescription(description)), h)
	}
	plain("test_simple_text", "Answers with one text block.", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("This is a simple text response for testing."), nil
	})
	plain("test_image_content", "Answers with one PNG image.", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent(pngBase64, "image/png")}}, nil
	})
	plain("test_audio_content", "Answers with one WAV clip.", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewAudioContent(wavBase64, "audio/wav")}}, nil
	})
	plain("test_embedded_resource", "Answers with an embedded text resource.", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewEmbeddedResource(mcp.TextResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."})}}, nil
	})
	plain("test_multiple_content_types", "Answers with text, an image and a resource.", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewTextContent("Multiple content types test:"),
			mcp.NewImageContent(pngBase64, "image/png"),
			mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}),
		}}, nil
	})
	plain("test_error_handling", "Fails as a tool (isError).", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("This tool intentionally returns an error for testing"), nil
	})
	plain("test_tool_with_logging", "Logs three info messages while it runs.", func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		before := out.count("notifications/message")
		defer out.until(ctx, "notifications/message", before+3)
		for i, line := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if err := f.s.SendNotificationToClient(ctx, "notifications/message", map[string]any{"level": "info", "logger": "conformance-fixture", "data": line}); err != nil {
				return nil, err
			}
		}
		return text("Tool with logging executed successfully"), nil
	})
	plain("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
			return text("no progress token was given"), nil
		}
		token := fmt.Sprint(req.Params.Meta.ProgressToken)
		defer out.until(ctx, token, out.count(token)+3)
		for i, p := range []int{0, 50, 100} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if err := f.s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": p, "total": 100}); err != nil {
				return nil, err
			}
		}
		return text("Progress reported"), nil
	})
	f.s.AddTool(mcp.NewTool("test_sampling", mcp.WithDescription("Asks the client's LLM to answer prompt."),
		mcp.WithString("prompt", mcp.Required(), mcp.Description("What the LLM is asked."))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ask := mcp.CreateMessageRequest{Request: mcp.Request{Method: string(mcp.MethodSamplingCreateMessage)}}
			ask.Messages = []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(req.GetString("prompt", ""))}}
			ask.MaxTokens = 100
			res, err := f.s.RequestSampling(ctx, ask) //nolint:staticcheck // the session era's sampling, which this fixture serves
			if err != nil {
				return mcp.NewToolResultError("sampling failed: " + err.Error()), nil
			}
			answer := "(no text)"
			if t, ok := res.Content.(mcp.TextContent); ok {
				answer = t.Text
			}
			return text("LLM response: " + answer), nil
		})
	f.elicit("test_elicitation", "Asks the user for a username and an email.", func(req mcp.CallToolRequest) (string, map[string]any) {
		return req.GetString("message", ""), map[string]any{"type": "object", "required": []string{"username", "email"}, "properties": map[string]any{
			"username": map[string]any{"type": "string", "description": "User's response"},
			"email":    map[string]any{"type": "string", "description": "User's email address"},
		}}
	}, mcp.WithString("message", mcp.Required(), mcp.Description("What the user is shown.")))
	f.elicit("test_elicitation_sep1034_defaults", "Asks with a default for every primitive type (SEP-1034).", func(mcp.CallToolRequest) (string, map[string]any) {
		return "Please review the defaults", map[string]any{"type": "object", "properties": map[string]any{
			"name":     map[string]any{"type": "string", "default": "John Doe"},
			"age":      map[string]any{"type": "integer", "default": 30},
			"score":    map[string]any{"type": "number", "default": 95.5},
			"status":   map[string]any{"type": "string", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
			"verified": map[string]any{"type": "boolean", "default": true},
		}}
	})
	f.elicit("test_elicitation_sep1330_enums", "Asks with the five enum forms (SEP-1330).", func(mcp.CallToolRequest) (string, map[string]any) {
		titled := func(prefix string) []any {
			var out []any
			for i, t := range []string{"First", "Second", "Third"} {
				out = append(out, map[string]any{"const": fmt.Sprintf("%s%d", prefix, i+1), "title": t + " Option"})
			}
			return out
		}
		three := func(p string) []string { return []string{p + "1", p + "2", p + "3"} }
		return "Pick options", map[string]any{"type": "object", "properties": map[string]any{
			"untitledSingle": map[string]any{"type": "string", "enum": three("option")},
			"titledSingle":   map[string]any{"type": "string", "oneOf": titled("value")},
			"legacyEnum":     map[string]any{"type": "string", "enum": three("opt"), "enumNames": []string{"Option One", "Option Two", "Option Three"}},
			"untitledMulti":  map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": three("option")}},
			"titledMulti":    map[string]any{"type": "array", "items": map[string]any{"anyOf": titled("value")}},
		}}
	})
	f.inputRequired()
	// Not a conformance fixture: a call that stays in flight (its first progress notification
	// tells the caller it has begun), for the e2e test of attribution on a shared child.
	f.s.AddTool(mcp.NewTool("zest_wait", mcp.WithDescription("Reports progress 0, then waits ms milliseconds."),
		mcp.WithNumber("ms", mcp.Required(), mcp.Description("How long to wait."))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
				_ = f.s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": 0})
			}
			select {
			case <-time.After(time.Duration(req.GetFloat("ms", 0)) * time.Millisecond):
			case <-ctx.Done():
			}
			return text("waited"), nil
		})
	f.s.AddTool(mcp.NewToolWithRawSchema("json_schema_2020_12_tool", "Has an input schema with JSON Schema 2020-12 keywords.", json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
		"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
		"additionalProperties": false
	}`)), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, _ := json.Marshal(req.GetArguments())
		return text("received " + string(b)), nil
	})
}

// elicit registers a tool that asks the client (elicitation/create) with what ask returns.
func (f fixture) elicit(name, description string, ask func(mcp.CallToolRequest) (string, map[string]any), opts ...mcp.ToolOption) {
	f.s.AddTool(mcp.NewTool(name, append([]mcp.ToolOption{mcp.WithDescription(description)}, opts...)...),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			message, schema := ask(req)
			e := mcp.ElicitationRequest{Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)}}
			e.Params.Message, e.Params.RequestedSchema = message, schema
			res, err := f.s.RequestElicitation(ctx, e)
			if err != nil {
				return mcp.NewToolResultError("elicitation failed: " + err.Error()), nil
			}
			content, _ := json.Marshal(res.Content)
			return text(fmt.Sprintf("Elicitation completed: action=%s, content=%s", res.Action, content)), nil
		})
}

// resources registers the fixture resources and template.
func (f fixture) resources() {
	f.s.AddResource(mcp.NewResource("test://static-text", "static-text", mcp.WithResourceDescription("A fixed text."), mcp.WithMIMEType("text/plain")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: "test://static-text", MIMEType: "text/plain", Text: "This is the content of the static text resource."}}, nil
		})
	f.s.AddResource(mcp.NewResource("test://static-binary", "static-binary", mcp.WithResourceDescription("A fixed PNG."), mcp.WithMIMEType("image/png")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.BlobResourceContents{URI: "test://static-binary", MIMEType: "image/png", Blob: pngBase64}}, nil
		})
	f.s.AddResource(mcp.NewResource("test://watched-resource", "watched-resource", mcp.WithResourceDescription("A resource clients subscribe to."), mcp.WithMIMEType("text/plain")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: "test://watched-resource", MIMEType: "text/plain", Text: "watched"}}, nil
		})
	f.s.AddResourceTemplate(mcp.NewResourceTemplate("test://template/{id}/data", "template-data",
		mcp.WithTemplateDescription("Data for one id."), mcp.WithTemplateMIMEType("application/json")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			b, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}, nil
		})
}

// prompts registers the fixture prompts.
func (f fixture) prompts() {
	user := func(c mcp.Content) mcp.PromptMessage { return mcp.PromptMessage{Role: mcp.RoleUser, Content: c} }
	f.s.AddPrompt(mcp.NewPrompt("test_simple_prompt", mcp.WithPromptDescription("A prompt without arguments.")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{user(mcp.NewTextContent("This is a simple prompt for testing."))}}, nil
		})
	f.s.AddPrompt(mcp.NewPrompt("test_prompt_with_arguments", mcp.WithPromptDescription("A prompt with two required arguments."),
		mcp.WithArgument("arg1", mcp.ArgumentDescription("First argument"), mcp.RequiredArgument()),
		mcp.WithArgument("arg2", mcp.ArgumentDescription("Second argument"), mcp.RequiredArgument())),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{user(mcp.NewTextContent(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])))}}, nil
		})
	f.s.AddPrompt(mcp.NewPrompt("test_prompt_with_embedded_resource", mcp.WithPromptDescription("A prompt that embeds a resource."),
		mcp.WithArgument("resourceUri", mcp.ArgumentDescription("URI of the resource to embed"), mcp.RequiredArgument())),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
				user(mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."})),
				user(mcp.NewTextContent("Please process the embedded resource above.")),
			}}, nil
		})
	f.s.AddPrompt(mcp.NewPrompt("test_prompt_with_image", mcp.WithPromptDescription("A prompt with an image.")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
				user(mcp.NewImageContent(pngBase64, "image/png")),
				user(mcp.NewTextContent("Please analyze the image above.")),
			}}, nil
		})
}

// completer completes arg1 of test_prompt_with_arguments from a fixed list.
type completer struct{}

func (completer) CompletePromptArgument(_ context.Context, prompt string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	values := []string{}
	if prompt == "test_prompt_with_arguments" {
		for _, v := range []string{"paris", "park", "party", "test", "testing"} {
			if strings.HasPrefix(v, arg.Value) {
				values = append(values, v)
			}
		}
	}
	return &mcp.Completion{Values: values, Total: len(values)}, nil
}

// inputRequired registers the fixtures of conformance 0.2.0-alpha.12's input-required-result-*
// scenarios (protocol 2026-07-28) the session-era way: each asks its client with ordinary
// requests (elicitation/create, sampling/createMessage, roots/list), one at a time, which
// Zest turns into input_required rounds for a client of 2026-07-28.
func (f fixture) inputRequired() {
	elicit := func(ctx context.Context, message, field string) (string, error) {
		e := mcp.ElicitationRequest{Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)}}
		e.Params.Message = message
		e.Params.RequestedSchema = map[string]any{"type": "object", "required": []string{field},
			"properties": map[string]any{field: map[string]any{"type": "string"}}}
		res, err := f.s.RequestElicitation(ctx, e)
		if err != nil {
			return "", err
		}
		content, _ := res.Content.(map[string]any)
		return fmt.Sprint(content[field]), nil
	}
	sample := func(ctx context.Context, prompt string, maxTokens int) (string, error) {
		ask := mcp.CreateMessageRequest{Request: mcp.Request{Method: string(mcp.MethodSamplingCreateMessage)}}
		ask.Messages = []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(prompt)}}
		ask.MaxTokens = maxTokens
		res, err := f.s.RequestSampling(ctx, ask) //nolint:staticcheck // the session era's sampling, which this fixture serves
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(res.Content)
		var c struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(b, &c)
		return c.Text, nil
	}
	roots := func(ctx context.Context) (string, error) {
		res, err := f.s.RequestRoots(ctx, mcp.ListRootsRequest{Request: mcp.Request{Method: string(mcp.MethodListRoots)}})
		if err != nil {
			return "", err
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return strings.Join(uris, ", "), nil
	}
	tool := func(name, description string, run func(ctx context.Context) (string, error)) {
		f.s.AddTool(mcp.NewTool(name, mcp.WithDescription(description)), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			out, err := run(ctx)
			if err != nil {
				return mcp.NewToolResultError("asking the client failed: " + err.Error()), nil
			}
			return text(out), nil
		})
	}
	hello := func(ctx context.Context) (string, error) {
		name, err := elicit(ctx, "What is your name?", "name")
		return "Hello, " + name + "!", err
	}
	tool("test_input_required_result_elicitation", "Asks the user's name.", hello)
	tool("test_input_required_result_tampered_state", "Asks the user's name.", hello)
	tool("test_input_required_result_sampling", "Asks the client's LLM a question.", func(ctx context.Context) (string, error) {
		answer, err := sample(ctx, "What is the capital of France?", 100)
		return "LLM response: " + answer, err
	})
	tool("test_input_required_result_capabilities", "Asks the client's LLM a question (sampling only).", func(ctx context.Context) (string, error) {
		answer, err := sample(ctx, "What is the capital of France?", 100)
		return "LLM response: " + answer, err
	})
	tool("test_input_required_result_list_roots", "Asks the client's roots.", func(ctx context.Context) (string, error) {
		r, err := roots(ctx)
		return "Roots: " + r, err
	})
	tool("test_input_required_result_request_state", "Asks for a confirmation.", func(ctx context.Context) (string, error) {
		e := mcp.ElicitationRequest{Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)}}
		e.Params.Message = "Please confirm"
		e.Params.RequestedSchema = map[string]any{"type": "object", "required": []string{"ok"}, "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}
		res, err := f.s.RequestElicitation(ctx, e)
		if err != nil {
			return "", err
		}
		// The call resumed where it waited: Zest checked the requestState that named it.
		return fmt.Sprintf("state-ok: action=%s", res.Action), nil
	})
	tool("test_input_required_result_multi_round", "Asks two questions, one after the other.", func(ctx context.Context) (string, error) {
		name, err := elicit(ctx, "Step 1: What is your name?", "name")
		if err != nil {
			return "", err
		}
		color, err := elicit(ctx, "Step 2: What is your favorite color?", "color")
		return fmt.Sprintf("%s likes %s", name, color), err
	})
	tool("test_input_required_result_multiple_inputs", "Asks a name, a greeting and the roots.", func(ctx context.Context) (string, error) {
		name, err := elicit(ctx, "What is your name?", "name")
		if err != nil {
			return "", err
		}
		greeting, err := sample(ctx, "Generate a greeting", 50)
		if err != nil {
			return "", err
		}
		r, err := roots(ctx)
		return fmt.Sprintf("%s, %s (roots: %s)", greeting, name, r), err
	})
	f.s.AddPrompt(mcp.NewPrompt("test_input_required_result_prompt", mcp.WithPromptDescription("Asks the user for context first.")),
		func(ctx context.Context, _ mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			c, err := elicit(ctx, "What context should the prompt use?", "context")
			if err != nil {
				return nil, err
			}
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("Context: " + c)}}}, nil
		})
}
