package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/zestmcp/zest/lib/mediatest"
	"github.com/zestmcp/zest/lib/waitfor"
)

// testPNG is a w×h PNG with a colour gradient (opaque).
func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), 60, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// leftMask is a w×h mask whose left half is transparent (edit) and right half opaque (keep).
func leftMask(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := w / 2; x < w; x++ {
			img.SetNRGBA(x, y, color.NRGBA{255, 255, 255, 255})
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
}

func multipartBody(t *testing.T, files map[string][]byte, fields map[string]string) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	for k, v := range files {
		fw, _ := mw.CreateFormFile(k, k+".png")
		_, _ = fw.Write(v)
	}
	_ = mw.Close()
	return buf.String(), "Content-Type: " + mw.FormDataContentType()
}

// wantParamError checks an OpenAI error answer naming param.
func wantParamError(t *testing.T, what string, r Response, status int, param string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Param   any    `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != status || e.Error.Param != param || e.Error.Message == "" {
		t.Errorf("%s: %d %s, want %d naming %s", what, r.Status, r.Body, status, param)
	}
}

// checkEdited decodes an edited PNG and checks it against the source: same size, the right
// half (opaque mask) unchanged, the left half changed.
func checkEdited(t *testing.T, src, out []byte) {
	t.Helper()
	a, err := png.Decode(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	b, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("edited image is not a PNG: %v", err)
	}
	if a.Bounds() != b.Bounds() {
		t.Fatalf("edited size %v, source %v", b.Bounds(), a.Bounds())
	}
	w, h := a.Bounds().Dx(), a.Bounds().Dy()
	changed := 0
	for y := range h {
		for x := range w {
			same := color.NRGBAModel.Convert(a.At(x, y)) == color.NRGBAModel.Convert(b.At(x, y))
			if x >= w/2 && !same {
				t.Fatalf("pixel %d,%d under the opaque mask changed", x, y)
			}
			if x < w/2 && !same {
				changed++
			}
		}
	}
	if changed < w/2*h*9/10 {
		t.Fatalf("only %d of %d editable pixels changed", changed, w/2*h)
	}
}

func checkGLB(t *testing.T, b []byte) *mediatest.GLB {
	t.Helper()
	g, err := mediatest.ParseGLB(b)
	if err != nil {
		t.Fatalf("not a valid GLB: %v", err)
	}
	if len(g.JSON.Meshes) != 1 || g.JSON.Accessors[0].Count < 4 {
		t.Fatalf("GLB mesh: %+v", g.JSON)
	}
	return g
}

func TestMediaRoutesUnderEveryPrefix(t *testing.T) {
	s := startSuite(t)
	src := testPNG(t, 40, 30)
	for _, p := range []string{"/api/v1/", "/api/v0/", "/v1/", "/v0/"} {
		t.Run(p, func(t *testing.T) {
			r := do(t, "POST", s.URL+p+"audio/speech", `{"model":"builtin-tts","input":"Hello Zest","voice":"alloy","response_format":"wav"}`, "Content-Type: application/json")
			if r.Status != 200 || r.Header.Get("Content-Type") != "audio/wav" {
				t.Fatalf("speech: %d %s %.200s", r.Status, r.Header.Get("Content-Type"), r.Body)
			}
			w, err := mediatest.ParseWAV(r.Body)
			if err != nil || w.SampleRate != 16000 || w.Seconds() < 0.79 || w.Seconds() > 0.81 {
				t.Fatalf("speech WAV: %v %+v", err, w)
			}

			// Streamed (stream_format audio): chunked, the same file.
			whole := r.Body
			r = do(t, "POST", s.URL+p+"audio/speech", `{"model":"builtin-tts","input":"Hello Zest","stream_format":"audio"}`, "Content-Type: application/json")
			if r.Status != 200 || r.Header.Get("Content-Type") != "audio/wav" || r.Header.Get("Content-Length") != "" || !bytes.Equal(r.Body, whole) {
				t.Fatalf("streamed speech: %d %v %d bytes", r.Status, r.Header, len(r.Body))
			}

			r = do(t, "POST", s.URL+p+"audio/generations", `{"model":"builtin-audio","prompt":"glass shattering","duration":1.5,"seed":42}`, "Content-Type: application/json")
			if r.Status != 200 || r.Header.Get("Content-Type") != "audio/wav" {
				t.Fatalf("audio: %d %.200s", r.Status, r.Body)
			}
			if w, err := mediatest.ParseWAV(r.Body); err != nil || w.Seconds() != 1.5 {
				t.Fatalf("audio WAV: %v %+v", err, w)
			}

			body, ct := multipartBody(t, map[string][]byte{"image": src, "mask": leftMask(t, 40, 30)},
				map[string]string{"model": "builtin-image", "prompt": "at night", "response_format": "b64_json"})
			r = do(t, "POST", s.URL+p+"images/edits", body, ct)
			if r.Status != 200 {
				t.Fatalf("edits: %d %s", r.Status, r.Body)
			}
			var edits struct {
				Created int64 `json:"created"`
				Data    []struct {
					B64JSON string `json:"b64_json"`
				} `json:"data"`
			}
			if err := json.Unmarshal(r.Body, &edits); err != nil || len(edits.Data) != 1 || edits.Created == 0 {
				t.Fatalf("edits answer: %v %s", err, r.Body)
			}
			out, _ := base64.StdEncoding.DecodeString(edits.Data[0].B64JSON)
			checkEdited(t, src, out)

			r = do(t, "POST", s.URL+p+"3d/generations", `{"model":"builtin-3d","image":"`+base64.StdEncoding.EncodeToString(src)+`","resolution":512,"seed":42}`, "Content-Type: application/json")
			if r.Status != 200 || r.Header.Get("Content-Type") != "model/gltf-binary" {
				t.Fatalf("3d: %d %s %.200s", r.Status, r.Header.Get("Content-Type"), r.Body)
			}
			checkGLB(t, r.Body)
			body, ct = multipartBody(t, map[string][]byte{"image": src}, map[string]string{"model": "builtin-3d"})
			if r = do(t, "POST", s.URL+p+"3d/generations", body, ct); r.Status != 200 {
				t.Fatalf("3d multipart: %d %s", r.Status, r.Body)
			}
			checkGLB(t, r.Body)
		})
	}

	t.Run("bad input names the field", func(t *testing.T) {
		u := s.URL + "/api/v1/"
		j := "Content-Type: application/json"
		wantParamError(t, "speech without input", do(t, "POST", u+"audio/speech", `{"model":"builtin-tts"}`, j), 400, "input")
		wantParamError(t, "speech without model", do(t, "POST", u+"audio/speech", `{"input":"x"}`, j), 400, "model")
		wantParamError(t, "speech input of a wrong type", do(t, "POST", u+"audio/speech", `{"model":"builtin-tts","input":["x"]}`, j), 400, "input")
		wantParamError(t, "speech as mp3", do(t, "POST", u+"audio/speech", `{"model":"builtin-tts","input":"x","response_format":"mp3"}`, j), 400, "response_format")
		wantParamError(t, "speech too fast", do(t, "POST", u+"audio/speech", `{"model":"builtin-tts","input":"x","speed":9}`, j), 400, "speed")
		wantParamError(t, "audio without prompt", do(t, "POST", u+"audio/generations", `{"model":"builtin-audio"}`, j), 400, "prompt")
		wantParamError(t, "audio too long", do(t, "POST", u+"audio/generations", `{"model":"builtin-audio","prompt":"x","duration":1000}`, j), 400, "duration")
		wantParamError(t, "3d without image", do(t, "POST", u+"3d/generations", `{"model":"builtin-3d"}`, j), 400, "image")
		wantParamError(t, "3d undecodable image", do(t, "POST", u+"3d/generations", `{"model":"builtin-3d","image":"`+base64.StdEncoding.EncodeToString([]byte("not a picture"))+`"}`, j), 400, "image")
		wantParamError(t, "3d bad resolution", do(t, "POST", u+"3d/generations", `{"model":"builtin-3d","image":"`+base64.StdEncoding.EncodeToString(src)+`","resolution":7}`, j), 400, "resolution")
		body, ct := multipartBody(t, map[string][]byte{"image": []byte("\x89PNG broken")}, map[string]string{"model": "builtin-image", "prompt": "x"})
		wantParamError(t, "edit of an undecodable PNG", do(t, "POST", u+"images/edits", body, ct), 400, "image")
		body, ct = multipartBody(t, map[string][]byte{"image": src, "mask": testPNG(t, 10, 10)}, map[string]string{"model": "builtin-image", "prompt": "x"})
		wantParamError(t, "edit with a mask of another size", do(t, "POST", u+"images/edits", body, ct), 400, "mask")
		body, ct = multipartBody(t, nil, map[string]string{"model": "builtin-image", "prompt": "x"})
		wantParamError(t, "edit without image", do(t, "POST", u+"images/edits", body, ct), 400, "image")
		body, ct = multipartBody(t, map[string][]byte{"image": src}, map[string]string{"model": "builtin-image"})
		wantParamError(t, "edit without prompt", do(t, "POST", u+"images/edits", body, ct), 400, "prompt")
		// 16 MiB is the image upload limit, under the 32 MiB body limit.
		body, ct = multipartBody(t, map[string][]byte{"image": make([]byte, 16<<20+1)}, map[string]string{"model": "builtin-image", "prompt": "x"})
		wantParamError(t, "oversized image", do(t, "POST", u+"images/edits", body, ct), 413, "image")
		body, ct = multipartBody(t, map[string][]byte{"image": src, "mask": make([]byte, 8<<20+1)}, map[string]string{"model": "builtin-image", "prompt": "x"})
		wantParamError(t, "oversized mask", do(t, "POST", u+"images/edits", body, ct), 413, "mask")
	})
}

// TestMediaOpenAIGoSDK: the official SDK's speech and image edit calls.
func TestMediaOpenAIGoSDK(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY=oai-key")
	for _, prefix := range []string{"/api/v1/", "/v1/"} {
		t.Run(prefix, func(t *testing.T) {
			client := openai.NewClient(option.WithBaseURL(s.URL+prefix), option.WithAPIKey("oai-key"), option.WithMaxRetries(0))
			ctx := t.Context()
			resp, err := client.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "builtin-tts", Input: "spoken by the SDK",
				Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}, ResponseFormat: openai.AudioSpeechNewParamsResponseFormatWAV})
			if err != nil {
				t.Fatal(err)
			}
			audio, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if w, err := mediatest.ParseWAV(audio); err != nil || resp.Header.Get("Content-Type") != "audio/wav" || len(w.Samples) == 0 {
				t.Fatalf("speech: %v %q", err, resp.Header.Get("Content-Type"))
			}
			_, err = client.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "builtin-tts", Input: "x",
				Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}, ResponseFormat: openai.AudioSpeechNewParamsResponseFormatMP3})
			var apiErr *openai.Error
			if !asAPIError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "response_format" {
				t.Fatalf("mp3: %v", err)
			}

			src := testPNG(t, 32, 32)
			edited, err := client.Images.Edit(ctx, openai.ImageEditParams{
				Image:  openai.ImageEditParamsImageUnion{OfFile: openai.File(bytes.NewReader(src), "in.png", "image/png")},
				Mask:   openai.File(bytes.NewReader(leftMask(t, 32, 32)), "mask.png", "image/png"),
				Prompt: "paint it", Model: "builtin-image", ResponseFormat: openai.ImageEditParamsResponseFormatB64JSON,
			})
			if err != nil || len(edited.Data) != 1 {
				t.Fatalf("edit: %v %+v", err, edited)
			}
			out, _ := base64.StdEncoding.DecodeString(edited.Data[0].B64JSON)
			checkEdited(t, src, out)
		})
	}
}

// TestMediaRelayedToAnOpenAICompatibleEngine: a Zest node is the OpenAI-compatible engine of
// another; each media route of the second relays to the first and the outputs decode.
func TestMediaRelayedToAnOpenAICompatibleEngine(t *testing.T) {
	base := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=")
	upInf, addr := freeAddr(t), freeAddr(t)
	runService(t, "zest-inference", append(append([]string{}, base...), "ZEST_INFERENCE_ADDR="+upInf))
	runService(t, "zest-gateway", append(append([]string{}, base...),
		"ZEST_INFERENCE_ADDR="+upInf, "ZEST_EDGE_ADDR="+addr, "ZEST_MCPGATEWAY_ADDR="+unusedAddr(t), "ZEST_TOOLHOST_ADDR="+unusedAddr(t)))
	var yaml strings.Builder
	yaml.WriteString("health_interval: 200ms\nmodels:\n")
	for _, m := range [][3]string{{"remote-tts", "tts", "builtin-tts"}, {"remote-audio", "audio-generation", "builtin-audio"},
		{"remote-image", "image", "builtin-image"}, {"remote-3d", "3d", "builtin-3d"}} {
		fmt.Fprintf(&yaml, "  - id: %s\n    type: %s\n    upstream_model: %s\n    base_urls: [http://%s/v1]\n    timeout: 20s\n", m[0], m[1], m[2], addr)
	}
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte(yaml.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startSuite(t, "ZEST_MODELS_FILE="+models)
	waitfor.NoError(t, 10*time.Second, func() error {
		r, err := getOK(s.URL + "/api/v1/models")
		if err != nil || strings.Count(string(r), `"loaded":true,"object":"model","owned_by":"zest","recipe":"openai"`) != 4 {
			return fmt.Errorf("remote models not loaded: %s %v", r, err)
		}
		return nil
	})
	u := s.URL + "/v1/"
	r := do(t, "POST", u+"audio/speech", `{"model":"remote-tts","input":"relayed"}`, "Content-Type: application/json")
	if w, err := mediatest.ParseWAV(r.Body); r.Status != 200 || err != nil || r.Header.Get("Content-Type") != "audio/wav" || len(w.Samples) != 7*1280 {
		t.Fatalf("speech relay: %d %v %.200s", r.Status, err, r.Body)
	}
	r = do(t, "POST", u+"audio/speech", `{"model":"remote-tts","input":"relayed","stream_format":"audio"}`, "Content-Type: application/json")
	if w, err := mediatest.ParseWAV(r.Body); r.Status != 200 || err != nil || len(w.Samples) != 7*1280 || r.Header.Get("Content-Length") != "" {
		t.Fatalf("streamed speech relay: %d %v %v", r.Status, err, r.Header)
	}
	wantParamError(t, "relayed refusal", do(t, "POST", u+"audio/speech", `{"model":"remote-tts","input":"x","response_format":"mp3"}`, "Content-Type: application/json"), 400, "response_format")
	r = do(t, "POST", u+"audio/generations", `{"model":"remote-audio","prompt":"rain","duration":1}`, "Content-Type: application/json")
	if w, err := mediatest.ParseWAV(r.Body); r.Status != 200 || err != nil || w.Seconds() != 1 {
		t.Fatalf("audio relay: %d %v %.200s", r.Status, err, r.Body)
	}
	src := testPNG(t, 24, 24)
	body, ct := multipartBody(t, map[string][]byte{"image": src, "mask": leftMask(t, 24, 24)}, map[string]string{"model": "remote-image", "prompt": "x"})
	r = do(t, "POST", u+"images/edits", body, ct)
	var edits struct {
		Data []struct {
			B64JSON string `json:"b64_json"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &edits); r.Status != 200 || err != nil || len(edits.Data) != 1 {
		t.Fatalf("edit relay: %d %s", r.Status, r.Body)
	}
	out, _ := base64.StdEncoding.DecodeString(edits.Data[0].B64JSON)
	checkEdited(t, src, out)
	r = do(t, "POST", u+"3d/generations", `{"model":"remote-3d","image":"`+base64.StdEncoding.EncodeToString(src)+`"}`, "Content-Type: application/json")
	if r.Status != 200 || r.Header.Get("Content-Type") != "model/gltf-binary" {
		t.Fatalf("3d relay: %d %.200s", r.Status, r.Body)
	}
	checkGLB(t, r.Body)
}

// TestMediaToolsThroughMCPClient calls each media tool of /mcp with mcp-go's client and decodes
// what it returns and writes; lemonade_generate_3d from a prompt reports progress and returns
// a 1024x1024 reference PNG and a GLB.
func TestMediaToolsThroughMCPClient(t *testing.T) {
	s := startSuite(t)
	images := filepath.Join(s.DataDir, "mcp-images")
	c, err := mcpclient.NewStreamableHttpClient(s.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	progress := map[string][]float64{}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/progress" {
			return
		}
		tok, _ := n.Params.AdditionalFields["progressToken"].(string)
		p, _ := n.Params.AdditionalFields["progress"].(float64)
		mu.Lock()
		progress[tok] = append(progress[tok], p)
		mu.Unlock()
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-media", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	call := func(name, token string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		if token != "" {
			req.Params.Meta = &mcp.Meta{ProgressToken: token}
		}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError {
			t.Fatalf("%s: %+v", name, res.Content)
		}
		return res
	}
	readFile := func(rel string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(images, rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	res := call("lemonade_text_to_speech", "tts", map[string]any{"input": "hello from mcp", "output_path": "e2e/hello.wav"})
	if _, err := mediatest.ParseWAV(readFile("e2e/hello.wav")); err != nil {
		t.Fatalf("tts file: %v", err)
	}
	if a, ok := res.Content[1].(mcp.AudioContent); !ok || a.MIMEType != "audio/wav" {
		t.Fatalf("tts content: %#v", res.Content)
	} else if b, _ := base64.StdEncoding.DecodeString(a.Data); !bytes.Equal(b, readFile("e2e/hello.wav")) {
		t.Fatal("tts: the returned audio is not the file written")
	}

	call("lemonade_generate_audio", "", map[string]any{"prompt": "waves", "duration": 2, "output_path": "e2e/waves.wav"})
	if w, err := mediatest.ParseWAV(readFile("e2e/waves.wav")); err != nil || w.Seconds() != 2 {
		t.Fatalf("audio file: %v", err)
	}

	if err := os.WriteFile(filepath.Join(images, "e2e", "src.png"), testPNG(t, 20, 20), 0o644); err != nil {
		t.Fatal(err)
	}
	call("lemonade_edit_image", "", map[string]any{"prompt": "night", "image_path": "e2e/src.png",
		"mask_base64": base64.StdEncoding.EncodeToString(leftMask(t, 20, 20)), "output_path": "e2e/edited.png"})
	checkEdited(t, testPNG(t, 20, 20), readFile("e2e/edited.png"))

	res = call("lemonade_generate_3d", "3d", map[string]any{"prompt": "a lemon on a table", "output_path": "e2e/lemon.glb"})
	var refPNG, glb []byte
	for _, ct := range res.Content {
		switch c := ct.(type) {
		case mcp.ImageContent:
			refPNG, _ = base64.StdEncoding.DecodeString(c.Data)
		case mcp.EmbeddedResource:
			if b, ok := c.Resource.(mcp.BlobResourceContents); ok && b.MIMEType == "model/gltf-binary" {
				glb, _ = base64.StdEncoding.DecodeString(b.Blob)
			}
		}
	}
	ref, err := png.Decode(bytes.NewReader(refPNG))
	if err != nil || ref.Bounds().Dx() != 1024 || ref.Bounds().Dy() != 1024 {
		t.Fatalf("reference image: %v", err)
	}
	if !bytes.Equal(refPNG, readFile("e2e/lemon.png")) || !bytes.Equal(glb, readFile("e2e/lemon.glb")) {
		t.Fatal("the returned media are not the files written")
	}
	checkGLB(t, glb)
	// Progress is sent before the result, on the same stream.
	mu.Lock()
	defer mu.Unlock()
	if p := progress["3d"]; len(p) < 3 || p[len(p)-1] != 3 {
		t.Fatalf("3d progress %v", p)
	}
	if len(progress["tts"]) == 0 {
		t.Fatalf("tts progress %v", progress)
	}
}

// TestChatToolChoiceTextToSpeech: a chat with the lemonade provider whose tool_choice names
// lemonade_text_to_speech writes a WAV in the sandbox.
func TestChatToolChoiceTextToSpeech(t *testing.T) {
	s := startSuite(t)
	body := `{"model":"builtin-llm","mcp_server_ids":["lemonade"],
		"tool_choice":{"type":"function","function":{"name":"lemonade_text_to_speech"}},
		"messages":[{"role":"user","content":"Say it: {\"input\":\"hello from the chat\",\"output_path\":\"chat/hello.wav\"}"}]}`
	r := do(t, "POST", s.URL+"/api/v1/chat/completions", body, "Content-Type: application/json")
	if r.Status != 200 {
		t.Fatalf("chat: %d %s", r.Status, r.Body)
	}
	b, err := os.ReadFile(filepath.Join(s.DataDir, "mcp-images", "chat", "hello.wav"))
	if err != nil {
		t.Fatalf("no WAV in the sandbox: %v (chat answered %s)", err, r.Body)
	}
	w, err := mediatest.ParseWAV(b)
	if err != nil || len(w.Samples) != len("hello from the chat")*1280 {
		t.Fatalf("WAV: %v", err)
	}
	if !strings.Contains(string(r.Body), "hello.wav") {
		t.Errorf("the answer does not mention the file: %s", r.Body)
	}
}

// TestMediaToolsFromTheTypeScriptSDK: the official TypeScript SDK calls the four media tools
// with a progress callback; every returned medium is decoded here.
func TestMediaToolsFromTheTypeScriptSDK(t *testing.T) {
	s := startSuite(t)
	src := testPNG(t, 16, 16)
	cmd := exec.Command("node", filepath.Join(peersDir(t), "media-client.mjs"), s.URL+"/mcp",
		base64.StdEncoding.EncodeToString(src), base64.StdEncoding.EncodeToString(leftMask(t, 16, 16)))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("media client: %v\n%s", err, out)
	}
	type block struct{ Type, MimeType, Data, Text string }
	var got map[string]struct {
		IsError  bool
		Progress []float64
		Content  []block
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %.300s: %v", out, err)
	}
	find := func(tool, typ, mime string) []byte {
		t.Helper()
		r := got[tool]
		if r.IsError || len(r.Progress) == 0 {
			t.Fatalf("%s: error %v, progress %v", tool, r.IsError, r.Progress)
		}
		for _, c := range r.Content {
			if c.Type == typ && c.MimeType == mime {
				b, err := base64.StdEncoding.DecodeString(c.Data)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
		t.Fatalf("%s: no %s %s in %+v", tool, typ, mime, r.Content)
		return nil
	}
	if w, err := mediatest.ParseWAV(find("lemonade_text_to_speech", "audio", "audio/wav")); err != nil || len(w.Samples) != len("typescript speaks")*1280 {
		t.Fatalf("speech: %v", err)
	}
	if w, err := mediatest.ParseWAV(find("lemonade_generate_audio", "audio", "audio/wav")); err != nil || w.Seconds() != 1 {
		t.Fatalf("audio: %v", err)
	}
	checkEdited(t, src, find("lemonade_edit_image", "image", "image/png"))
	ref, err := png.Decode(bytes.NewReader(find("lemonade_generate_3d", "image", "image/png")))
	if err != nil || ref.Bounds().Dx() != 1024 || ref.Bounds().Dy() != 1024 {
		t.Fatalf("reference image: %v", err)
	}
	checkGLB(t, find("lemonade_generate_3d", "resource", "model/gltf-binary"))
	if p := got["lemonade_generate_3d"].Progress; len(p) < 3 || p[len(p)-1] != 3 {
		t.Fatalf("3d progress %v", p)
	}
}
