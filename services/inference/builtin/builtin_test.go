package builtin

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zestmcp/zest/lib/tooloutput"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

func collect(t *testing.T, req *inferencev1.ChatRequest) (string, []*inferencev1.ChatResponse) {
	t.Helper()
	var chunks []*inferencev1.ChatResponse
	err := New(time.Unix(0, 0)).Chat(t.Context(), req, func(c *inferencev1.ChatResponse) error {
		chunks = append(chunks, c)
		return nil
	})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.GetDelta().GetContent())
	}
	return b.String(), chunks
}

func user(text string) *inferencev1.ChatMessage {
	return &inferencev1.ChatMessage{Role: "user", Content: text}
}

func TestChatStreamsWordByWord(t *testing.T) {
	text, chunks := collect(t, &inferencev1.ChatRequest{Model: LLM, Messages: []*inferencev1.ChatMessage{user("hello there zest")}})
	if text != "builtin-llm heard: hello there zest" {
		t.Fatalf("text = %q", text)
	}
	if len(chunks) != 1+5+1 { // role, five words, final
		t.Fatalf("got %d chunks, want one per word plus role and final", len(chunks))
	}
	last := chunks[len(chunks)-1]
	if last.GetFinishReason() != "stop" || last.GetUsage().GetCompletionTokens() != 5 {
		t.Fatalf("last chunk = %v", last)
	}
}

// TestChatHonoursStop: the answer ends before the first stop sequence it holds, as the
// completions route's does (the chat ignored stop), and finishes with "stop".
func TestChatHonoursStop(t *testing.T) {
	text, chunks := collect(t, &inferencev1.ChatRequest{Model: LLM, Stop: []string{"zzz", " there"}, Messages: []*inferencev1.ChatMessage{user("hello there zest")}})
	last := chunks[len(chunks)-1]
	if text != "builtin-llm heard: hello" || last.GetFinishReason() != "stop" || last.GetUsage().GetCompletionTokens() != 3 {
		t.Fatalf("text %q, last chunk %v", text, last)
	}
}

func TestChatMaxTokensStopsWithLength(t *testing.T) {
	mt := int32(2)
	text, chunks := collect(t, &inferencev1.ChatRequest{Model: LLM, MaxTokens: &mt, Messages: []*inferencev1.ChatMessage{user("a b c d")}})
	if text != "builtin-llm heard: " || chunks[len(chunks)-1].GetFinishReason() != "length" {
		t.Fatalf("text %q finish %q", text, chunks[len(chunks)-1].GetFinishReason())
	}
}

func TestChatQuotesToolResult(t *testing.T) {
	text, _ := collect(t, &inferencev1.ChatRequest{Model: LLM, Messages: []*inferencev1.ChatMessage{
		user("go"), {Role: "tool", ToolCallId: "c1", Content: "42"},
	}})
	if text != "The tool returned: 42" {
		t.Fatalf("text = %q", text)
	}
}

// TestChatQuotesWrappedToolResult: the chat loop's marker around a tool result
// (lib/tooloutput) is for real models; builtin-llm echoes what is inside it.
func TestChatQuotesWrappedToolResult(t *testing.T) {
	text, _ := collect(t, &inferencev1.ChatRequest{Model: LLM, Messages: []*inferencev1.ChatMessage{
		user("go"), {Role: "tool", ToolCallId: "c1", Content: tooloutput.Wrap("echo", "say", "42")},
	}})
	if text != "The tool returned: 42" {
		t.Fatalf("text = %q", text)
	}
}

func TestChatCallsNamedFunctionWithJSONFromUser(t *testing.T) {
	choice, err := structpb.NewValue(map[string]any{"type": "function", "function": map[string]any{"name": "mcp_e__echo"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ in, args string }{
		{`please echo {"message":"hi"} now`, `{"message":"hi"}`},
		{`no json here`, `{}`},
		{`{"a":1} then {"b":2}`, `{"b":2}`},
		{`broken {"a": here`, `{}`},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			_, chunks := collect(t, &inferencev1.ChatRequest{Model: LLM, ToolChoice: choice, Messages: []*inferencev1.ChatMessage{user(c.in)}})
			last := chunks[len(chunks)-1]
			if last.GetFinishReason() != "tool_calls" {
				t.Fatalf("finish = %q", last.GetFinishReason())
			}
			call := last.GetDelta().GetToolCalls()[0]
			if call.GetFunction().GetName() != "mcp_e__echo" || call.GetFunction().GetArguments() != c.args {
				t.Fatalf("call = %v, want args %s", call, c.args)
			}
		})
	}
}

func TestChatRefusesOtherModels(t *testing.T) {
	err := New(time.Now()).Chat(t.Context(), &inferencev1.ChatRequest{Model: Image, Messages: []*inferencev1.ChatMessage{user("x")}},
		func(*inferencev1.ChatResponse) error { return nil })
	if !errors.Is(err, ErrWrongModel) {
		t.Fatalf("err = %v", err)
	}
}

// TestChatIDsAreFresh: equal requests get different completion and tool call ids
// ("chatcmpl-"/"call_" and 24 random hex digits), the same in every chunk of one answer.
func TestChatIDsAreFresh(t *testing.T) {
	completion, call := regexp.MustCompile(`^chatcmpl-[0-9a-f]{24}$`), regexp.MustCompile(`^call_[0-9a-f]{24}$`)
	req := &inferencev1.ChatRequest{Model: LLM, Messages: []*inferencev1.ChatMessage{user("same words")}}
	seen := map[string]bool{}
	for range 3 {
		_, chunks := collect(t, req)
		id := chunks[0].GetId()
		if !completion.MatchString(id) || seen[id] {
			t.Fatalf("id %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
		for _, c := range chunks {
			if c.GetId() != id {
				t.Fatalf("chunk id %q in answer %q", c.GetId(), id)
			}
		}
	}
	choice := structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"type": structpb.NewStringValue("function"), "function": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"name": structpb.NewStringValue("f")}})}})
	calls := map[string]bool{}
	for range 2 {
		_, chunks := collect(t, &inferencev1.ChatRequest{Model: LLM, ToolChoice: choice, Messages: []*inferencev1.ChatMessage{user("same words")}})
		id := chunks[0].GetDelta().GetToolCalls()[0].GetId()
		if !call.MatchString(id) || calls[id] || strings.Contains(id, chunks[0].GetId()[len("chatcmpl-"):]) {
			t.Fatalf("tool call id %q", id)
		}
		calls[id] = true
	}
}

// TestChatCallsAMentionedFunction: with tool_choice auto (or none given) and tools offered, a
// user message that names an offered function calls it (the longest name named), with the
// last JSON object of the message; a message naming none, tool_choice "none", or a tool result
// last, is answered in text.
func TestChatCallsAMentionedFunction(t *testing.T) {
	tools, err := structpb.NewList([]any{
		map[string]any{"type": "function", "function": map[string]any{"name": "mcp_e__echo"}},
		map[string]any{"type": "function", "function": map[string]any{"name": "mcp_e__echo_twice"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	none := structpb.NewStringValue("none")
	for _, c := range []struct {
		name   string
		choice *structpb.Value
		msgs   []*inferencev1.ChatMessage
		call   string
	}{
		{"named", nil, []*inferencev1.ChatMessage{user(`use mcp_e__echo {"message":"hi"}`)}, "mcp_e__echo"},
		{"the longest name", structpb.NewStringValue("auto"), []*inferencev1.ChatMessage{user(`mcp_e__echo_twice {"message":"hi"}`)}, "mcp_e__echo_twice"},
		{"none named", nil, []*inferencev1.ChatMessage{user(`echo {"message":"hi"}`)}, ""},
		{"tool_choice none", none, []*inferencev1.ChatMessage{user(`mcp_e__echo {}`)}, ""},
		{"after a tool result", nil, []*inferencev1.ChatMessage{user(`mcp_e__echo {}`), {Role: "tool", Content: "Echo: hi", ToolCallId: "c1"}}, ""},
		{"after a tool result and a prompt of the client's", nil, []*inferencev1.ChatMessage{user(`mcp_e__echo {}`),
			{Role: "assistant"}, {Role: "tool", Content: "Echo: hi", ToolCallId: "c1"}, user("Use the tool result to answer")}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, chunks := collect(t, &inferencev1.ChatRequest{Model: LLM, ToolChoice: c.choice, Tools: tools, Messages: c.msgs})
			last := chunks[len(chunks)-1]
			calls := last.GetDelta().GetToolCalls()
			switch {
			case c.call == "" && (len(calls) != 0 || last.GetFinishReason() != "stop"):
				t.Fatalf("want a text answer: %v", last)
			case c.call == "" && c.msgs[len(c.msgs)-1].GetRole() != "user" || strings.Contains(c.name, "prompt of the client"):
				if text, _ := collect(t, &inferencev1.ChatRequest{Model: LLM, Tools: tools, Messages: c.msgs}); text != "The tool returned: Echo: hi" {
					t.Fatalf("answer %q", text)
				}
			case c.call != "" && (len(calls) != 1 || calls[0].GetFunction().GetName() != c.call || last.GetFinishReason() != "tool_calls"):
				t.Fatalf("want a call of %s: %v", c.call, last)
			}
		})
	}
}

// TestTokenInterval: WithTokenInterval paces builtin-llm's stream, the interval between each
// word and the next; without it the words come at once.
func TestTokenInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		req := &inferencev1.ChatRequest{Model: LLM, Messages: []*inferencev1.ChatMessage{user("one two")}} // 4 words answered
		for _, c := range []struct {
			opts []Option
			want time.Duration
		}{{nil, 0}, {[]Option{WithTokenInterval(time.Second)}, 3 * time.Second}} {
			began := time.Now()
			if err := New(began, c.opts...).Chat(t.Context(), req, func(*inferencev1.ChatResponse) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(began); took != c.want {
				t.Errorf("%d option(s): the stream took %v, want %v", len(c.opts), took, c.want)
			}
		}
	})
}
