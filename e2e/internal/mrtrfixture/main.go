// Command mrtrfixture is a Streamable HTTP MCP server of protocol 2026-07-28 alone (mark3labs/mcp-go; initialize refused)
// whose tools ask the client for input the revision's way: an input_required result, answered
// by a retry that carries inputResponses and the requestState (SEP-2322). The e2e tests
// register it as an HTTP upstream and call its tools through /mcp/servers/{id} with
// session-era clients, which Zest bridges. It listens on a loopback port of its own and prints
// its endpoint on the first line of stdout.
//
// Tools: test_sampling and test_elicitation (the conformance suite's names and arguments),
// and zest_two_rounds (an elicitation, then a sampling that uses its answer).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/mcptest"
)

func main() {
	s := server.NewMCPServer("zest-mrtr-fixture", "1.0.0", server.WithToolCapabilities(false), server.WithElicitation())
	s.EnableSampling()
	tools(s)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mrtrfixture:", err)
		os.Exit(1)
	}
	fmt.Printf("http://%s/mcp\n", l.Addr())
	mux := http.NewServeMux()
	// 2026-07-28 alone: a server that also served the session era would get session-era
	// clients' calls in a session of their own, not bridged (Zest follows the client's era).
	mux.Handle("/mcp", mcptest.ModernOnly(server.NewStreamableHTTPServer(s, server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20260728))))
	srv := &http.Server{Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "mrtrfixture:", err)
		os.Exit(1) //nolint:gocritic // the deferred stop only unregisters the signals; exiting does that too
	}
}

func sample(prompt string) mcp.CreateMessageParams {
	return mcp.CreateMessageParams{Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(prompt)}}, MaxTokens: 100}
}

// textOf is the text of a sampling answer.
func textOf(r *mcp.CreateMessageResult) string {
	b, _ := json.Marshal(r.Content)
	var c struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(b, &c) != nil || c.Text == "" {
		return "(no text)"
	}
	return c.Text
}

func tools(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("test_sampling", mcp.WithDescription("Asks the client's LLM to answer prompt (input_required)."),
		mcp.WithString("prompt", mcp.Required(), mcp.Description("What the LLM is asked."))),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r := server.SamplingResponse(req.Params.InputResponses, "llm"); r != nil {
				return mcp.NewToolResultText("LLM response: " + textOf(r)), nil
			}
			return server.NewInputRequestBuilder("sampling").Sample("llm", sample(req.GetString("prompt", ""))).ToolResult(), nil
		})
	s.AddTool(mcp.NewTool("test_elicitation", mcp.WithDescription("Asks the user for a username and an email (input_required)."),
		mcp.WithString("message", mcp.Required(), mcp.Description("What the user is shown."))),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r := server.ElicitationResponse(req.Params.InputResponses, "user"); r != nil {
				content, _ := json.Marshal(r.Content)
				return mcp.NewToolResultText(fmt.Sprintf("Elicitation completed: action=%s, content=%s", r.Action, content)), nil
			}
			return server.NewInputRequestBuilder("elicitation").Elicit("user", mcp.ElicitationParams{Message: req.GetString("message", ""),
				RequestedSchema: map[string]any{"type": "object", "required": []string{"username", "email"}, "properties": map[string]any{
					"username": map[string]any{"type": "string", "description": "User's response"},
					"email":    map[string]any{"type": "string", "description": "User's email address"},
				}}}).ToolResult(), nil
		})
	s.AddTool(mcp.NewTool("zest_two_rounds", mcp.WithDescription("Asks the user for a topic, then the client's LLM about it: two input_required rounds.")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			switch req.Params.RequestState {
			case "":
				return server.NewInputRequestBuilder("topic").Elicit("topic", mcp.ElicitationParams{Message: "Which topic?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"topic": map[string]any{"type": "string"}}}}).ToolResult(), nil
			case "topic":
				e := server.ElicitationResponse(req.Params.InputResponses, "topic")
				if e == nil {
					return mcp.NewToolResultError("the retry carries no answer to the topic question"), nil
				}
				content, _ := e.Content.(map[string]any)
				topic, _ := content["topic"].(string)
				return server.NewInputRequestBuilder("about:"+topic).Sample("llm", sample("tell me about "+topic)).ToolResult(), nil
			default:
				r := server.SamplingResponse(req.Params.InputResponses, "llm")
				if r == nil {
					return mcp.NewToolResultError("the retry carries no answer to the sampling request"), nil
				}
				return mcp.NewToolResultText(req.Params.RequestState + " → " + textOf(r)), nil
			}
		})
}
