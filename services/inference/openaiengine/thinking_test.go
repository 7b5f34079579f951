package openaiengine

import (
	"encoding/json"
	"testing"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestEnableThinkingReachesOnlyALemonadeEngine: enable_thinking becomes
// chat_template_kwargs.enable_thinking for a Lemonade engine, never overriding the caller's
// own; no engine is sent an enable_thinking field, and a generic OpenAI-compatible engine (a
// hosted API refuses fields it does not know) gets no chat_template_kwargs it was not given.
func TestEnableThinkingReachesOnlyALemonadeEngine(t *testing.T) {
	body := func(req *inferencev1.ChatRequest, kind string) map[string]any {
		t.Helper()
		b, err := chatBody(req, "up", kind)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if _, leaked := m["enable_thinking"]; leaked {
			t.Fatalf("%s engine sent enable_thinking: %s", kind, b)
		}
		return m
	}
	off := &inferencev1.ChatRequest{Model: "m", EnableThinking: proto.Bool(false)}
	if kw, _ := body(off, KindLemonade)["chat_template_kwargs"].(map[string]any); kw["enable_thinking"] != false {
		t.Errorf("lemonade: chat_template_kwargs %v", kw)
	}
	for _, kind := range []string{"openai", KindOllama} {
		if kw, ok := body(off, kind)["chat_template_kwargs"]; ok {
			t.Errorf("%s: chat_template_kwargs %v sent", kind, kw)
		}
	}
	own, _ := structpb.NewStruct(map[string]any{"enable_thinking": true, "x": 1})
	mine := &inferencev1.ChatRequest{Model: "m", EnableThinking: proto.Bool(false), ChatTemplateKwargs: own}
	if kw, _ := body(mine, KindLemonade)["chat_template_kwargs"].(map[string]any); kw["enable_thinking"] != true || kw["x"] != 1.0 {
		t.Errorf("the caller's kwargs were overridden: %v", kw)
	}
	if kw, _ := body(&inferencev1.ChatRequest{Model: "m"}, KindLemonade)["chat_template_kwargs"]; kw != nil {
		t.Errorf("no enable_thinking, yet chat_template_kwargs %v", kw)
	}
}
