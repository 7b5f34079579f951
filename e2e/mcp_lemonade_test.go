package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/waitfor"
)

// lemonadeFixture is Lemonade's documented tool set (services/mcpgateway/lemonade/testdata:
// its docs/api/mcp.md, the source, commit and date named in the file).
const lemonadeFixture = "../services/mcpgateway/lemonade/testdata/lemonade-mcp-tools.json"

// lemonadeClient is mcp-go's client on /mcp, with the progress notifications it received.
type lemonadeClient struct {
	c  *mcpclient.Client
	mu sync.Mutex
	// progress holds each notifications/progress's params, by progress token.
	progress map[string][]map[string]any
}

func newLemonadeClient(t *testing.T, ctx context.Context, url string) *lemonadeClient {
	t.Helper()
	c, err := mcpclient.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + fedAPIKey}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	lc := &lemonadeClient{c: c, progress: map[string][]map[string]any{}}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/progress" {
			return
		}
		token, _ := n.Params.AdditionalFields["progressToken"].(string)
		lc.mu.Lock()
		lc.progress[token] = append(lc.progress[token], n.Params.AdditionalFields)
		lc.mu.Unlock()
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-lemonade", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return lc
}

// call runs a tool; token, when not empty, asks for progress.
func (lc *lemonadeClient) call(t *testing.T, ctx context.Context, name string, args map[string]any, token string) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	if token != "" {
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
	}
	res, err := lc.c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// progressOf waits until token has a notification whose message contains msg.
func (lc *lemonadeClient) progressOf(t *testing.T, token, msg string) {
	t.Helper()
	waitfor.True(t, 10*time.Second, "progress "+msg, func() bool {
		lc.mu.Lock()
		defer lc.mu.Unlock()
		for _, p := range lc.progress[token] {
			if m, _ := p["message"].(string); strings.Contains(m, msg) {
				return true
			}
		}
		return false
	})
}

func blocks(r *mcp.CallToolResult) []string {
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

// TestLemonadeToolsAsLemonadeHasThem drives /mcp's built-in tools with mcp-go's client against
// the built-in engine: tools/list against Lemonade's documented tool set, then each argument
// of Lemonade's six tools with a real call, and GET {prefix}docs beside lemonade_docs.
func TestLemonadeToolsAsLemonadeHasThem(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	lc := newLemonadeClient(t, ctx, s.URL+"/mcp")

	t.Run("tools/list", func(t *testing.T) {
		raw, err := os.ReadFile(lemonadeFixture)
		if err != nil {
			t.Fatal(err)
		}
		var want struct {
			Commit string `json:"commit"`
			Tools  map[string]struct {
				Required  []string          `json:"required"`
				Arguments map[string]string `json:"arguments"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		list, err := lc.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]mcp.Tool{}
		for _, tl := range list.Tools {
			got[tl.Name] = tl
		}
		for name, w := range want.Tools {
			tl, ok := got[name]
			if !ok {
				t.Errorf("/mcp has no %s", name)
				continue
			}
			if g, w := slices.Sorted(maps.Keys(tl.InputSchema.Properties)), slices.Sorted(maps.Keys(w.Arguments)); !slices.Equal(g, w) {
				t.Errorf("%s arguments %v; Lemonade %s documents %v", name, g, want.Commit[:9], w)
			}
			if g, w := slices.Sorted(slices.Values(tl.InputSchema.Required)), slices.Sorted(slices.Values(w.Required)); !slices.Equal(g, w) {
				t.Errorf("%s required %v, want %v", name, g, w)
			}
		}
	})

	t.Run("lemonade_docs", func(t *testing.T) {
		r := lc.call(t, ctx, "lemonade_docs", nil, "")
		var list struct {
			Pages []struct {
				ID    string `json:"id"`
				Bytes int    `json:"bytes"`
			} `json:"pages"`
		}
		if b := blocks(r); r.IsError || len(b) != 2 || json.Unmarshal([]byte(b[1]), &list) != nil || len(list.Pages) == 0 {
			t.Fatalf("list: %+v", r)
		}
		page := lc.call(t, ctx, "lemonade_docs", map[string]any{"page": "user/builtin-tools"}, "")
		if md := blocks(page)[0]; page.IsError || !strings.HasPrefix(md, "# ") || !strings.Contains(md, "lemonade_docs") {
			t.Fatalf("page: %+v", page)
		}
		if r := lc.call(t, ctx, "lemonade_docs", map[string]any{"page": "nope"}, ""); !r.IsError {
			t.Fatalf("unknown page: %+v", r)
		}
		// The same pages at GET {prefix}docs, each url serving what the tool returns.
		idx := do(t, "GET", s.URL+"/v1/docs", "", fedAPIAuth)
		docs := asSlice(idx.JSON(t)["docs"])
		if idx.Status != 200 || len(docs) != len(list.Pages) {
			t.Fatalf("GET /v1/docs: %d %s", idx.Status, idx.Body)
		}
		for _, d := range docs {
			d := d.(map[string]any)
			md := do(t, "GET", s.URL+d["url"].(string), "", fedAPIAuth)
			tool := lc.call(t, ctx, "lemonade_docs", map[string]any{"page": d["id"]}, "")
			if md.Status != 200 || string(md.Body) != blocks(tool)[0] || !strings.HasPrefix(d["url"].(string), "/v1/docs/") {
				t.Errorf("%v: %d, %d bytes; the tool gave %d", d["url"], md.Status, len(md.Body), len(blocks(tool)[0]))
			}
		}
	})

	t.Run("lemonade_list_models", func(t *testing.T) {
		lists := func(args map[string]any) map[string]any {
			r := lc.call(t, ctx, "lemonade_list_models", args, "")
			b := blocks(r)
			var out map[string]any
			if r.IsError || len(b) != 2 || json.Unmarshal([]byte(b[1]), &out) != nil {
				t.Fatalf("%v: %+v", args, r)
			}
			return out
		}
		all := lists(nil)
		if all["recommended_chat_model"] != "builtin-llm" || len(asSlice(all["loaded"])) == 0 {
			t.Fatalf("default: %v", all)
		}
		for _, key := range []string{"available", "suggested_to_pull"} {
			if _, ok := all[key].([]any); !ok {
				t.Fatalf("%s is not a list: %v", key, all)
			}
		}
		if none := lists(map[string]any{"include_available": false, "include_suggested": false}); len(asSlice(none["available"])) != 0 || len(asSlice(none["suggested_to_pull"])) != 0 {
			t.Fatalf("both false: %v", none)
		}
	})

	t.Run("lemonade_chat", func(t *testing.T) {
		msgs := []any{map[string]any{"role": "user", "content": "one two three four"}}
		r := lc.call(t, ctx, "lemonade_chat", map[string]any{"messages": msgs, "seed": 7, "temperature": 0.2, "top_p": 0.9,
			"response_format": map[string]any{"type": "text"}, "chat_template_kwargs": map[string]any{"enable_thinking": true}}, "chat-1")
		if b := blocks(r); r.IsError || len(b) != 1 || b[0] != "builtin-llm heard: one two three four" {
			t.Fatalf("chat: %+v", r)
		}
		lc.progressOf(t, "chat-1", "chatting with builtin-llm")
		if r := lc.call(t, ctx, "lemonade_chat", map[string]any{"messages": msgs, "max_tokens": 2, "model": "builtin-llm"}, ""); blocks(r)[0] != "builtin-llm heard: " {
			t.Fatalf("max_tokens: %+v", r)
		}
		tool := map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}
		r = lc.call(t, ctx, "lemonade_chat", map[string]any{"messages": []any{map[string]any{"role": "user", "content": `weather {"city":"Oslo"}`}},
			"tools": []any{tool}, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}}, "")
		b := blocks(r)
		if r.IsError || len(b) != 2 || !strings.HasPrefix(b[1], "tool_calls: ") || !strings.Contains(b[1], `"name":"get_weather"`) || !strings.Contains(b[1], `Oslo`) {
			t.Fatalf("tools: %+v", r)
		}
		if r := lc.call(t, ctx, "lemonade_chat", map[string]any{"messages": msgs, "tool_choice": "required"}, ""); !r.IsError || !strings.Contains(blocks(r)[0], "tool") {
			t.Fatalf("tool_choice without tools: %+v", r)
		}
		if r := lc.call(t, ctx, "lemonade_chat", map[string]any{"messages": msgs, "stop": []any{"three"}}, ""); r.IsError {
			t.Fatalf("stop: %+v", r)
		}
	})

	t.Run("lemonade_transcribe_audio", func(t *testing.T) {
		audio := base64.StdEncoding.EncodeToString(toneWAV())
		r := lc.call(t, ctx, "lemonade_transcribe_audio", map[string]any{"audio_base64": audio, "filename": "tone.wav", "response_format": "verbose_json",
			"language": "en", "prompt": "a tone", "temperature": 0}, "asr-1")
		b := blocks(r)
		var full map[string]any
		if r.IsError || len(b) != 2 || !strings.Contains(b[0], "1.00 s of 16000 Hz mono") || json.Unmarshal([]byte(b[1]), &full) != nil || full["task"] != "transcribe" {
			t.Fatalf("verbose_json: %+v", r)
		}
		lc.progressOf(t, "asr-1", "transcribing")
		dir := filepath.Join(s.DataDir, "mcp-audio")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tone.wav"), toneWAV(), 0o644); err != nil {
			t.Fatal(err)
		}
		r = lc.call(t, ctx, "lemonade_transcribe_audio", map[string]any{"audio_path": "tone.wav", "model": "builtin-transcribe", "response_format": "json"}, "")
		if b := blocks(r); r.IsError || len(b) != 2 || !strings.Contains(b[1], `"text"`) {
			t.Fatalf("audio_path: %+v", r)
		}
		for _, f := range []string{"srt", "vtt"} {
			r := lc.call(t, ctx, "lemonade_transcribe_audio", map[string]any{"audio_base64": audio, "response_format": f}, "")
			if !r.IsError || !strings.Contains(blocks(r)[0], "segment times") {
				t.Errorf("%s: %+v", f, r)
			}
			body, ct := multipartAudio(t, toneWAV(), map[string]string{"model": "builtin-transcribe", "response_format": f})
			if rest := do(t, "POST", s.URL+"/v1/audio/transcriptions", body, "Content-Type: "+ct, fedAPIAuth); rest.Status != 400 || !strings.Contains(string(rest.Body), "segment times") {
				t.Errorf("REST %s: %d %s", f, rest.Status, rest.Body)
			}
		}
	})

	t.Run("lemonade_generate_image", func(t *testing.T) {
		r := lc.call(t, ctx, "lemonade_generate_image", map[string]any{"prompt": "a lemon", "size": "32x32", "negative_prompt": "pears", "seed": 3,
			"steps": 2, "cfg_scale": 1.5}, "img-1")
		if r.IsError || len(r.Content) != 1 {
			t.Fatalf("inline: %+v", r)
		}
		if img, ok := r.Content[0].(mcp.ImageContent); !ok || img.MIMEType != "image/png" {
			t.Fatalf("inline block %+v", r.Content[0])
		}
		lc.progressOf(t, "img-1", "drawing 1 image(s) with builtin-image")
		r = lc.call(t, ctx, "lemonade_generate_image", map[string]any{"prompt": "two", "size": "32x32", "n": 2, "output_dir": "e2e-batch"}, "")
		b := blocks(r)
		var paths struct {
			Paths []string `json:"paths"`
		}
		if r.IsError || len(b) != 4 || json.Unmarshal([]byte(b[3]), &paths) != nil || len(paths.Paths) != 2 || b[1] != paths.Paths[0] {
			t.Fatalf("output_dir: %+v", r)
		}
		for _, p := range paths.Paths {
			if !strings.HasPrefix(p, filepath.Join(s.DataDir, "mcp-images", "e2e-batch")+"/") {
				t.Errorf("%s is not in the output_dir", p)
			}
			if _, err := os.Stat(p); err != nil {
				t.Error(err)
			}
		}
		r = lc.call(t, ctx, "lemonade_generate_image", map[string]any{"prompt": "one", "size": "32x32", "output_path": "e2e/one.png"}, "")
		if b := blocks(r); r.IsError || len(b) != 2 || !strings.Contains(b[1], filepath.Join(s.DataDir, "mcp-images", "e2e", "one.png")) {
			t.Fatalf("output_path: %+v", r)
		}
	})

	t.Run("lemonade_omni", func(t *testing.T) {
		r := lc.call(t, ctx, "lemonade_omni", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "output_dir": "omni"}, "")
		if b := blocks(r); !r.IsError || len(b) != 2 || !strings.Contains(b[1], `"tool_type":"omni"`) {
			t.Fatalf("no omni model: %+v", r)
		}
	})

	// A preset's lemonade provider runs the same tools through the pipeline: their progress
	// reaches the preset session's client too.
	t.Run("progress through a preset", func(t *testing.T) {
		putPreset(t, s, "lem", "lemonade")
		pc := newLemonadeClient(t, ctx, presetURL(s, "lem"))
		r := pc.call(t, ctx, "lemonade_chat", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "preset-1")
		if r.IsError || blocks(r)[0] != "builtin-llm heard: hi" {
			t.Fatalf("chat through the preset: %+v", r)
		}
		pc.progressOf(t, "preset-1", "chatting with builtin-llm")
	})

	// Last: it deletes builtin-llm, then pulls it back through allow_download.
	t.Run("allow_download", func(t *testing.T) {
		if r := lc.call(t, ctx, "lemonade_delete_model", map[string]any{"model_name": "builtin-llm"}, ""); r.IsError {
			t.Fatalf("delete: %+v", r)
		}
		msgs := []any{map[string]any{"role": "user", "content": "hello"}}
		r := lc.call(t, ctx, "lemonade_chat", map[string]any{"messages": msgs}, "")
		if b := blocks(r); !r.IsError || len(b) != 2 || !strings.Contains(b[1], `"default_model":"builtin-llm"`) {
			t.Fatalf("no model, no download: %+v", r)
		}
		r = lc.call(t, ctx, "lemonade_chat", map[string]any{"messages": msgs, "allow_download": true}, "dl-1")
		if b := blocks(r); r.IsError || b[0] != "builtin-llm heard: hello" {
			t.Fatalf("allow_download: %+v", r)
		}
		lc.progressOf(t, "dl-1", "pulling builtin-llm")
		r = lc.call(t, ctx, "lemonade_list_models", map[string]any{"include_suggested": false}, "")
		if b := blocks(r); r.IsError || strings.Contains(b[1], `"suggested_to_pull":[{"model_name":"builtin-llm"`) || !strings.Contains(b[1], `"model_name":"builtin-llm"`) {
			t.Fatalf("builtin-llm after the pull: %+v", r)
		}
	})
}
