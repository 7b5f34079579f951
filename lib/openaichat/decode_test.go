package openaichat

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
)

func TestParseReadsOpenAISpellings(t *testing.T) {
	r, err := parseBody([]byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":3,"max_completion_tokens":9,
		"seed":-9223372036854775808,"temperature":null,"stop":["a","b"],"chat_template_kwargs":{"enable_thinking":false},
		"messages":[{"role":"developer","content":"sys"},{"role":"user","content":"hi","name":"ann"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Stream || !r.IncludeUsage {
		t.Fatalf("stream %v, include_usage %v", r.Stream, r.IncludeUsage)
	}
	got, _ := protojson.Marshal(r.Chat)
	want := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi","name":"ann"}],"maxTokens":3,"stop":["a","b"],"seed":"-9223372036854775808","chatTemplateKwargs":{"enable_thinking":false}}`
	if compact(t, got) != compact(t, []byte(want)) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// compact re-encodes JSON (protojson varies its spacing on purpose).
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func TestFromMapTakesDecodedArguments(t *testing.T) {
	// lemonade_chat's arguments come decoded by mcp-go: numbers are float64, model may be absent.
	req, err := FromMap(map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}}, "max_tokens": float64(5), "seed": float64(42), "allow_download": true})
	if err != nil || req.GetMaxTokens() != 5 || req.GetSeed() != 42 || req.GetModel() != "" {
		t.Fatalf("%v %v", req, err)
	}
	_, err = FromMap(map[string]any{"messages": []any{map[string]any{"role": "user"}}, "max_tokens": 2.5})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Param != "max_tokens" {
		t.Fatalf("%v", err)
	}
}

func TestCheckToolChoice(t *testing.T) {
	parse := func(extra string) error {
		t.Helper()
		r, err := parseBody([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]` + extra + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return CheckToolChoice(r.Chat)
	}
	tools := `,"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}]`
	for extra, ok := range map[string]bool{
		``:                                  true,
		`,"tool_choice":"auto"`:             true,
		`,"tool_choice":"none"`:             true,
		`,"tool_choice":"required"`:         false,
		`,"tool_choice":"required"` + tools: true,
		`,"tool_choice":{"type":"function","function":{"name":"b"}}` + tools: true,
		`,"tool_choice":{"type":"function","function":{"name":"c"}}` + tools: false,
		`,"tool_choice":{"type":"function","function":{"name":"c"}}`:         false,
	} {
		err := parse(extra)
		var fe *FieldError
		if ok != (err == nil) || (err != nil && (!errors.As(err, &fe) || fe.Param != "tool_choice")) {
			t.Errorf("%s: %v", extra, err)
		}
	}
}

func TestIDsAreFresh(t *testing.T) {
	c, k := regexp.MustCompile(`^chatcmpl-[0-9a-f]{24}$`), regexp.MustCompile(`^call_[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for range 1000 {
		id, call := NewCompletionID(), NewToolCallID()
		if !c.MatchString(id) || !k.MatchString(call) || seen[id] || seen[call] {
			t.Fatalf("%q %q", id, call)
		}
		seen[id], seen[call] = true, true
	}
}

// FuzzParse: whatever the body, the edge's path (DecodeObject, then ParseObject) answers a
// request or a *FieldError whose message is readable and quotes no decoder; it never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"tool","content":"x"}],"temperature":3}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{}}}]}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:"}}]}],"seed":1e400}`,
		`{"model":"m","messages":[],"max_tokens":-1,"n":2,"stop":[1]}`,
		`{"model":`, `[]`, `null`, `{"a":1} x`, "\xff",
	} {
		f.Add([]byte(s))
	}
	decoder := regexp.MustCompile(`json: |proto: |Go struct|Go value|cannot unmarshal`)
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseBody(body)
		if err == nil {
			if r.Chat.GetModel() == "" || len(r.Chat.GetMessages()) == 0 {
				t.Fatalf("accepted without model or messages: %v", r.Chat)
			}
			if _, err := protojson.Marshal(r.Chat); err != nil {
				t.Fatalf("accepted a request the contract cannot carry: %v", err)
			}
			return
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Message == "" || decoder.MatchString(fe.Message) {
			t.Fatalf("%T %q", err, err)
		}
		if !utf8.ValidString(fe.Message) {
			t.Fatalf("message not UTF-8: %q", fe.Message)
		}
	})
}

func TestToolCallsKeepTheClientsFields(t *testing.T) {
	r, err := parseBody([]byte(`{"model":"m","messages":[{"role":"assistant","tool_calls":[
		{"id":"a","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","index":4,"function":{"name":"g"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	calls := r.Chat.GetMessages()[0].GetToolCalls()
	if len(calls) != 2 || calls[0].GetIndex() != 0 || calls[1].GetIndex() != 4 || calls[0].GetType() != "function" ||
		calls[1].GetId() != "b" || calls[1].GetFunction().GetName() != "g" || calls[0].GetFunction().GetArguments() != "{}" {
		t.Fatalf("%v", calls)
	}
}

// parseBody is the edge's path for a plain chat: the body decoded once, then checked.
func parseBody(body []byte) (*Request, error) {
	raw, err := DecodeObject(body)
	if err != nil {
		return nil, err
	}
	return ParseObject(raw)
}
