package e2e

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image/png"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// TestOpenAIGoSDK drives the edge's OpenAI routes with the official OpenAI Go SDK, unchanged.
func TestOpenAIGoSDK(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY=oai-key")
	for _, prefix := range []string{"/api/v1/", "/v1/"} {
		t.Run(prefix, func(t *testing.T) {
			client := openai.NewClient(option.WithBaseURL(s.URL+prefix), option.WithAPIKey("oai-key"), option.WithMaxRetries(0))
			ctx := t.Context()

			models, err := client.Models.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range models.Data {
				ids = append(ids, m.ID)
			}
			if strings.Join(ids, ",") != "builtin-3d,builtin-audio,builtin-embed,builtin-image,builtin-llm,builtin-transcribe,builtin-tts" {
				t.Fatalf("models %v", ids)
			}

			params := openai.ChatCompletionNewParams{Model: "builtin-llm", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello sdk")}}
			done, err := client.Chat.Completions.New(ctx, params)
			if err != nil || done.Choices[0].Message.Content != "builtin-llm heard: hello sdk" {
				t.Fatalf("chat: %v %+v", err, done)
			}

			stream := client.Chat.Completions.NewStreaming(ctx, params)
			acc := openai.ChatCompletionAccumulator{}
			chunks := 0
			for stream.Next() {
				acc.AddChunk(stream.Current())
				chunks++
			}
			if err := stream.Err(); err != nil || chunks < 4 || acc.Choices[0].Message.Content != "builtin-llm heard: hello sdk" {
				t.Fatalf("stream: %v, %d chunks, %q", err, chunks, acc.Choices[0].Message.Content)
			}

			// Tool call round trip: the model calls get_sum, the client answers, the model quotes it.
			tool := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_sum",
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}}})
			tp := openai.ChatCompletionNewParams{Model: "builtin-llm", Tools: []openai.ChatCompletionToolUnionParam{tool},
				ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_sum"}),
				Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`add {"a":40,"b":2}`)}}
			first, err := client.Chat.Completions.New(ctx, tp)
			if err != nil || len(first.Choices[0].Message.ToolCalls) != 1 || first.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("tool call: %v %+v", err, first)
			}
			call := first.Choices[0].Message.ToolCalls[0]
			if call.Function.Name != "get_sum" || call.Function.Arguments != `{"a":40,"b":2}` {
				t.Fatalf("call %+v", call)
			}
			tp.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{}
			tp.Messages = append(tp.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage("42", call.ID))
			second, err := client.Chat.Completions.New(ctx, tp)
			if err != nil || second.Choices[0].Message.Content != "The tool returned: 42" {
				t.Fatalf("after the tool result: %v %+v", err, second)
			}

			tr, err := client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
				Model: "builtin-transcribe", File: openai.File(bytes.NewReader(toneWAV()), "tone.wav", "audio/wav")})
			if err != nil || !strings.Contains(tr.Text, "1.00 s of 16000 Hz mono 16-bit PCM") {
				t.Fatalf("transcription: %v %+v", err, tr)
			}

			img, err := client.Images.Generate(ctx, openai.ImageGenerateParams{Model: "builtin-image", Prompt: "a lemon", N: openai.Int(1), Size: "256x256"})
			if err != nil || len(img.Data) != 1 {
				t.Fatalf("image: %v %+v", err, img)
			}
			raw, err := base64.StdEncoding.DecodeString(img.Data[0].B64JSON)
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := png.Decode(bytes.NewReader(raw))
			if err != nil || decoded.Bounds().Dx() != 256 {
				t.Fatalf("PNG: %v", err)
			}

			_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "no-such-model", Messages: params.Messages})
			var apiErr *openai.Error
			if !asAPIError(err, &apiErr) || apiErr.StatusCode != 404 {
				t.Fatalf("unknown model: %v", err)
			}
		})
	}
}

func asAPIError(err error, target **openai.Error) bool {
	var e *openai.Error
	ok := errors.As(err, &e)
	if ok {
		*target = e
	}
	return ok
}

// TestOpenAIRoutesRefuseAKeyInOpenAIShape: a missing or wrong key on the OpenAI routes is a
// 401 in OpenAI's error shape (authentication_error, code invalid_api_key), which the OpenAI
// SDKs read as such; it was {"error":"…"}.
func TestOpenAIRoutesRefuseAKeyInOpenAIShape(t *testing.T) {
	const key = "openai-shape-key"
	s := startSuite(t, "LEMONADE_API_KEY="+key)
	for _, auth := range []string{"", "Authorization: Bearer wrong"} {
		r := do(t, "POST", s.URL+"/api/v1/chat/completions", `{"model":"builtin-llm","messages":[{"role":"user","content":"x"}]}`, "Content-Type: application/json", auth)
		e, _ := r.JSON(t)["error"].(map[string]any)
		if r.Status != 401 || e == nil || e["type"] != "authentication_error" || e["code"] != "invalid_api_key" || e["message"] == "" {
			t.Fatalf("key %q: %d %s", auth, r.Status, r.Body)
		}
	}
	client := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	_, err := client.Models.List(t.Context())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type != "authentication_error" || apiErr.Code != "invalid_api_key" {
		t.Fatalf("the Go SDK read %v", err)
	}
	right := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	if _, err := right.Models.List(t.Context()); err != nil {
		t.Fatalf("the right key: %v", err)
	}
}
