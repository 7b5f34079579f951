package lemonade

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc"
)

// media is an InferenceServiceClient with one image model and one transcription model.
type media struct {
	models
	audio []byte
}

func (m *media) GenerateImage(_ context.Context, r *inferencev1.GenerateImageRequest, _ ...grpc.CallOption) (*inferencev1.GenerateImageResponse, error) {
	out := &inferencev1.GenerateImageResponse{}
	for i := range max(r.GetN(), 1) {
		out.Images = append(out.Images, []byte{0x89, 'P', 'N', 'G', byte(i)})
	}
	return out, nil
}

func (m *media) Transcribe(_ context.Context, r *inferencev1.TranscribeRequest, _ ...grpc.CallOption) (*inferencev1.TranscribeResponse, error) {
	m.audio = r.GetAudio()
	return &inferencev1.TranscribeResponse{Text: "heard " + r.GetFilename()}, nil
}

func newMedia(t *testing.T) (*Tools, *media, Dirs) {
	t.Helper()
	base := t.TempDir()
	dirs := Dirs{Images: filepath.Join(base, "images"), Audio: filepath.Join(base, "audio")}
	for _, d := range []string{dirs.Images, dirs.Audio} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m := &media{models: models{list: []*inferencev1.Model{
		model("img", inferencev1.ModelType_MODEL_TYPE_IMAGE, loaded), model("asr", inferencev1.ModelType_MODEL_TYPE_TRANSCRIPTION, loaded)}}}
	return New(m, nil, dirs), m, dirs
}

func callArgs(args map[string]any) mcp.CallToolRequest {
	r := mcp.CallToolRequest{}
	r.Params.Arguments = args
	return r
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// pathsOf is the {"paths":[…]} of an image tool's disk answer (its last text block).
func pathsOf(t testing.TB, res *mcp.CallToolResult) []string {
	t.Helper()
	var out struct {
		Paths []string `json:"paths"`
	}
	last, ok := res.Content[len(res.Content)-1].(mcp.TextContent)
	if !ok || json.Unmarshal([]byte(last.Text), &out) != nil {
		t.Fatalf("the last block is not {\"paths\"}: %+v", res.Content)
	}
	return out.Paths
}

func TestGenerateImageSandbox(t *testing.T) {
	tools, _, dirs := newMedia(t)
	ctx := t.Context()

	res, _ := tools.generateImage(ctx, callArgs(map[string]any{"prompt": "a lemon", "output_path": "fruit/lemon.png"}))
	if res.IsError {
		t.Fatalf("write inside: %s", text(res))
	}
	if b, err := os.ReadFile(filepath.Join(dirs.Images, "fruit", "lemon.png")); err != nil || b[0] != 0x89 {
		t.Fatalf("file not written: %v", err)
	}
	res, _ = tools.generateImage(ctx, callArgs(map[string]any{"prompt": "two", "n": 2, "output_dir": "batch"}))
	// A summary, one block per path, then {"paths"}.
	if res.IsError || len(res.Content) != 4 || len(pathsOf(t, res)) != 2 {
		t.Fatalf("output_dir: %s", text(res))
	}
	entries, _ := os.ReadDir(filepath.Join(dirs.Images, "batch"))
	if len(entries) != 2 {
		t.Fatalf("batch holds %d files", len(entries))
	}

	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dirs.Images, "escape")); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string]map[string]any{
		"dot-dot":       {"prompt": "x", "output_path": "../../etc/x.png"},
		"absolute":      {"prompt": "x", "output_path": filepath.Join(outside, "x.png")},
		"symlink out":   {"prompt": "x", "output_path": "escape/x.png"},
		"symlinked dir": {"prompt": "x", "output_dir": "escape"},
		"dot-dot dir":   {"prompt": "x", "output_dir": "a/../../b"},
	} {
		t.Run(name, func(t *testing.T) {
			res, _ := tools.generateImage(ctx, callArgs(args))
			if !res.IsError || !strings.Contains(text(res), "LEMONADE_MCP_IMAGE_DIR") {
				t.Fatalf("not refused: %s", text(res))
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("something was written outside: %v", entries)
	}
}

func TestTranscribeAudioRoot(t *testing.T) {
	tools, m, dirs := newMedia(t)
	ctx := t.Context()
	if err := os.WriteFile(filepath.Join(dirs.Audio, "a.wav"), []byte("RIFFdata"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ := tools.transcribe(ctx, callArgs(map[string]any{"audio_path": "a.wav"}))
	if res.IsError || res.Content[0].(mcp.TextContent).Text != "heard a.wav" || string(m.audio) != "RIFFdata" {
		t.Fatalf("inside: %s", text(res))
	}
	res, _ = tools.transcribe(ctx, callArgs(map[string]any{"audio_base64": base64.StdEncoding.EncodeToString([]byte("xyz")), "filename": "b.wav"}))
	if res.IsError || string(m.audio) != "xyz" {
		t.Fatalf("base64: %s", text(res))
	}
	secret := filepath.Join(t.TempDir(), "secret.wav")
	os.WriteFile(secret, []byte("secret"), 0o644)
	os.Symlink(secret, filepath.Join(dirs.Audio, "link.wav"))
	for name, args := range map[string]map[string]any{
		"dot-dot":  {"audio_path": "../secret.wav"},
		"absolute": {"audio_path": secret},
		"symlink":  {"audio_path": "link.wav"},
		"neither":  {},
		"both":     {"audio_path": "a.wav", "audio_base64": "eHl6"},
	} {
		t.Run(name, func(t *testing.T) {
			res, _ := tools.transcribe(ctx, callArgs(args))
			if !res.IsError {
				t.Fatalf("not refused: %s", text(res))
			}
			if string(m.audio) == "secret" {
				t.Fatal("read a file outside the audio root")
			}
		})
	}
}
