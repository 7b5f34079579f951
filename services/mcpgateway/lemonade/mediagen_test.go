package lemonade

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/waitfor"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc"
)

// fakeMediaService answers like an engine with fixed bytes and records what it was given.
type fakeMediaService struct {
	inferencev1.MediaServiceClient // methods the tools do not call (StreamSpeech)
	mu                             sync.Mutex
	mesh                           *inferencev1.Generate3DRequest
	edit                           *inferencev1.EditImageRequest
	block                          chan struct{} // Generate3D waits on it (or on ctx) when set
}

func (f *fakeMediaService) Speech(_ context.Context, r *inferencev1.SpeechRequest, _ ...grpc.CallOption) (*inferencev1.SpeechResponse, error) {
	return &inferencev1.SpeechResponse{Audio: []byte("RIFF" + r.GetInput()), ContentType: "audio/wav"}, nil
}

func (f *fakeMediaService) GenerateAudio(_ context.Context, r *inferencev1.GenerateAudioRequest, _ ...grpc.CallOption) (*inferencev1.GenerateAudioResponse, error) {
	return &inferencev1.GenerateAudioResponse{Audio: []byte("RIFFclip"), ContentType: "audio/wav"}, nil
}

func (f *fakeMediaService) EditImage(_ context.Context, r *inferencev1.EditImageRequest, _ ...grpc.CallOption) (*inferencev1.EditImageResponse, error) {
	f.mu.Lock()
	f.edit = r
	f.mu.Unlock()
	out := &inferencev1.EditImageResponse{}
	for i := range max(r.GetN(), 1) {
		out.Images = append(out.Images, []byte{0x89, 'P', 'N', 'G', byte(i)})
	}
	return out, nil
}

func (f *fakeMediaService) Generate3D(ctx context.Context, r *inferencev1.Generate3DRequest, _ ...grpc.CallOption) (*inferencev1.Generate3DResponse, error) {
	f.mu.Lock()
	f.mesh = r
	block := f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &inferencev1.Generate3DResponse{Glb: []byte("glTF-mesh"), ContentType: "model/gltf-binary"}, nil
}

func newMediaTools(t *testing.T) (*MediaTools, *fakeMediaService, Dirs) {
	t.Helper()
	_, m, dirs := newMedia(t)
	m.list = append(m.list, model("tts", inferencev1.ModelType_MODEL_TYPE_TTS, loaded),
		model("sfx", inferencev1.ModelType_MODEL_TYPE_AUDIO_GENERATION, loaded), model("mesh", inferencev1.ModelType_MODEL_TYPE_MESH, loaded))
	f := &fakeMediaService{}
	return NewMedia(New(m, nil, dirs), f), f, dirs
}

func TestSpeechAndAudioWriteInsideTheImageDir(t *testing.T) {
	tools, _, dirs := newMediaTools(t)
	ctx := t.Context()
	res, _ := tools.speech(ctx, callArgs(map[string]any{"input": "hello", "output_path": "voice/hi.wav"}))
	if res.IsError {
		t.Fatal(text(res))
	}
	b, err := os.ReadFile(filepath.Join(dirs.Images, "voice", "hi.wav"))
	if err != nil || string(b) != "RIFFhello" {
		t.Fatalf("file %q %v", b, err)
	}
	if a, ok := res.Content[1].(mcp.AudioContent); !ok || a.MIMEType != "audio/wav" {
		t.Fatalf("content %#v", res.Content)
	}
	res, _ = tools.generateAudio(ctx, callArgs(map[string]any{"prompt": "rain", "output_dir": "clips"}))
	if res.IsError || !strings.Contains(text(res), filepath.Join(dirs.Images, "clips", "rain-")) {
		t.Fatalf("audio: %s", text(res))
	}
	for _, args := range []map[string]any{
		{"input": "x", "output_path": "../out.wav"},
		{"input": "x", "output_dir": "/etc"},
	} {
		if res, _ := tools.speech(ctx, callArgs(args)); !res.IsError || !strings.Contains(text(res), "LEMONADE_MCP_IMAGE_DIR") {
			t.Errorf("%v not refused: %s", args, text(res))
		}
	}
	if res, _ := tools.speech(ctx, callArgs(map[string]any{})); !res.IsError || !strings.Contains(text(res), "input is required") {
		t.Errorf("missing input: %s", text(res))
	}
}

func TestEditImageReadsOnlyInsideTheImageDir(t *testing.T) {
	tools, f, dirs := newMediaTools(t)
	ctx := t.Context()
	if err := os.WriteFile(filepath.Join(dirs.Images, "in.png"), []byte("source"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ := tools.editImage(ctx, callArgs(map[string]any{"prompt": "night", "image_path": "in.png",
		"mask_base64": base64.StdEncoding.EncodeToString([]byte("mask")), "n": 2, "output_dir": "edits"}))
	if res.IsError {
		t.Fatal(text(res))
	}
	if string(f.edit.GetImage()) != "source" || string(f.edit.GetMask()) != "mask" || f.edit.GetN() != 2 {
		t.Fatalf("edit request %v", f.edit)
	}
	if files := res.StructuredContent.(map[string]any)["files"].([]string); len(files) != 2 {
		t.Fatalf("files %v", files)
	}
	outside := filepath.Join(filepath.Dir(dirs.Images), "secret.png")
	_ = os.WriteFile(outside, []byte("secret"), 0o644)
	_ = os.Symlink(outside, filepath.Join(dirs.Images, "link.png"))
	for _, args := range []map[string]any{
		{"prompt": "x", "image_path": "../secret.png"},
		{"prompt": "x", "image_path": "link.png"},
		{"prompt": "x", "image_path": "in.png", "image_base64": "aGk="},
		{"prompt": "x"},
		{"prompt": "x", "image_base64": strings.Repeat("A", (MaxImageBytes/3+2)*4)},
	} {
		if res, _ := tools.editImage(ctx, callArgs(args)); !res.IsError {
			t.Errorf("%v accepted", args["image_path"])
		}
	}
}

// TestGenerate3DFromPromptReportsProgress calls the tool through an MCP client: from a prompt
// it draws a 1024x1024 reference image, then the mesh; the result holds both, the files are
// written, and progress notifications arrive for the call's token.
func TestGenerate3DFromPromptReportsProgress(t *testing.T) {
	tools, f, dirs := newMediaTools(t)
	srv := server.NewMCPServer("test", "1", server.WithToolCapabilities(false))
	tools.Register(srv)
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var progress []float64
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" && n.Params.AdditionalFields["progressToken"] == "p3d" {
			mu.Lock()
			progress = append(progress, n.Params.AdditionalFields["progress"].(float64))
			mu.Unlock()
		}
	})
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = Generate3D
	req.Params.Arguments = map[string]any{"prompt": "a lemon", "output_path": "m/lemon.glb"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "p3d"}
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("%v %v", err, res)
	}
	if string(f.mesh.GetImage()[:4]) != "\x89PNG" {
		t.Fatalf("mesh made from %q, not the reference image", f.mesh.GetImage())
	}
	var sawImage, sawGLB bool
	for _, ct := range res.Content {
		switch c := ct.(type) {
		case mcp.ImageContent:
			sawImage = c.MIMEType == "image/png"
		case mcp.EmbeddedResource:
			b, ok := c.Resource.(mcp.BlobResourceContents)
			sawGLB = ok && b.MIMEType == "model/gltf-binary" && strings.HasSuffix(b.URI, "/m/lemon.glb")
		}
	}
	if !sawImage || !sawGLB {
		t.Fatalf("content %#v", res.Content)
	}
	for _, p := range []string{"m/lemon.glb", "m/lemon.png"} {
		if _, err := os.Stat(filepath.Join(dirs.Images, p)); err != nil {
			t.Error(err)
		}
	}
	// The client's transport hands notifications to its handler on goroutines of its own, so
	// the last ones may be handled after the result: wait for them (they were all sent first).
	waitfor.NoError(t, 5*time.Second, func() error {
		mu.Lock()
		got := slices.Clone(progress)
		mu.Unlock()
		if !slices.Contains(got, 3) || len(got) < 3 {
			return fmt.Errorf("progress %v", got)
		}
		return nil
	})
}

func TestGenerate3DHonoursCancellation(t *testing.T) {
	tools, f, _ := newMediaTools(t)
	f.block = make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome)
	go func() {
		res, err := tools.generate3D(ctx, callArgs(map[string]any{"image_base64": base64.StdEncoding.EncodeToString([]byte("pic"))}))
		done <- outcome{res, err}
	}()
	// Cancelled while the engine works on the mesh.
	waitfor.True(t, 5*time.Second, "the engine working on the mesh", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.mesh != nil
	})
	cancel()
	// Cancelled before the engine call (an error) or during it (an isError result): either way it ends.
	o := <-done
	if o.err != nil || o.res == nil || !o.res.IsError || !strings.Contains(text(o.res), "cancel") {
		t.Fatalf("cancelled call: %v %v", o.err, o.res)
	}
}
