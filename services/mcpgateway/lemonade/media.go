package lemonade

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// Limits of the media tools.
const (
	MaxAudioBytes = 25 << 20 // as OpenAI's transcription API
	maxImages     = 10
)

// Dirs confine the files the tools touch.
type Dirs struct {
	// Images is where lemonade_generate_image writes (LEMONADE_MCP_IMAGE_DIR).
	Images string
	// Audio is the only tree lemonade_transcribe_audio reads audio_path from.
	Audio string
}

// errSandbox means a path leaves its allowed directory.
var errSandbox = errors.New("path escapes its allowed directory")

// inside turns p (relative to dir, or absolute) into a path relative to dir, refusing ".."
// escapes; os.Root then refuses symlink escapes when the file is opened.
func inside(dir, p, envName string) (string, error) {
	if p == "" {
		return ".", nil
	}
	abs := p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(dir, p)
	}
	rel, err := filepath.Rel(dir, filepath.Clean(abs))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: %q is outside %s (%s); give a path inside it", errSandbox, p, envName, dir)
	}
	return rel, nil
}

func (t *Tools) transcribe(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Model          string   `json:"model"`
		AllowDownload  bool     `json:"allow_download"`
		AudioPath      string   `json:"audio_path"`
		Filename       string   `json:"filename"`
		Language       string   `json:"language"`
		Prompt         string   `json:"prompt"`
		ResponseFormat string   `json:"response_format"`
		Temperature    *float64 `json:"temperature"`
	}
	// audio_base64 (up to ~33 MiB of text) is taken from the arguments as it is, not
	// re-encoded and decoded again with the small fields.
	base64Arg, rest, err := takeString(req.GetArguments(), "audio_base64")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if err := bindMap(rest, &args); err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if (args.AudioPath == "") == (base64Arg == "") {
		return mcp.NewToolResultError("give exactly one of audio_path or audio_base64"), nil
	}
	var audio []byte
	name := args.Filename
	if args.AudioPath != "" {
		if audio, err = readAudio(ctx, t.dirs.Audio, args.AudioPath, t.maxAudio()); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		if name == "" {
			name = filepath.Base(args.AudioPath)
		}
	} else {
		if audio, err = decodeAudio(base64Arg, t.maxAudio()); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
	}
	model, miss, err := t.resolveModel(ctx, inferencev1.ModelType_MODEL_TYPE_TRANSCRIPTION, args.Model, args.AllowDownload)
	if err != nil {
		return toolError("resolve model", err), nil
	}
	if miss != nil {
		return miss, nil
	}
	resp, err := t.inference.Transcribe(ctx, &inferencev1.TranscribeRequest{Model: model, Audio: audio, Filename: name,
		Language: args.Language, Prompt: args.Prompt, Temperature: args.Temperature})
	if err != nil {
		return toolError("transcription", err), nil
	}
	logf(ctx, mcp.LoggingLevelInfo, "transcribed %.1f s of audio with %s", resp.GetDurationSeconds(), model)
	res := mcp.NewToolResultText(resp.GetText())
	res.StructuredContent = map[string]any{"text": resp.GetText(), "language": resp.GetLanguage(), "duration": resp.GetDurationSeconds(), "model": model}
	return res, nil
}

var (
	sizeArg = regexp.MustCompile(`^([0-9]{1,5})x([0-9]{1,5})$`)
	slugRun = regexp.MustCompile(`[^a-z0-9]+`)
)

func (t *Tools) generateImage(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Prompt         string  `json:"prompt"`
		Model          string  `json:"model"`
		AllowDownload  bool    `json:"allow_download"`
		OutputPath     string  `json:"output_path"`
		OutputDir      string  `json:"output_dir"`
		Size           string  `json:"size"`
		N              *int    `json:"n"`
		NegativePrompt string  `json:"negative_prompt"`
		Seed           *int64  `json:"seed"`
		Steps          int32   `json:"steps"`
		CfgScale       float64 `json:"cfg_scale"`
	}
	if err := bindArgs(req, &args); err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if strings.TrimSpace(args.Prompt) == "" {
		return mcp.NewToolResultError("prompt is required: what to draw"), nil
	}
	if args.OutputPath != "" && args.OutputDir != "" {
		return mcp.NewToolResultError("give output_path or output_dir, not both"), nil
	}
	n, w, h, bad := imageCountAndSize(args.N, args.Size, args.OutputPath)
	if bad != nil {
		return bad, nil
	}
	// Where the files go, checked before any work is done.
	const env = "LEMONADE_MCP_IMAGE_DIR"
	target := args.OutputPath
	if target == "" {
		target = args.OutputDir
	}
	rel, err := inside(t.dirs.Images, target, env)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if err := os.MkdirAll(t.dirs.Images, 0o750); err != nil {
		return mcp.NewToolResultError("image directory: " + err.Error()), nil
	}
	root, err := os.OpenRoot(t.dirs.Images)
	if err != nil {
		return mcp.NewToolResultError("image directory: " + err.Error()), nil
	}
	defer root.Close()

	model, miss, err := t.resolveModel(ctx, inferencev1.ModelType_MODEL_TYPE_IMAGE, args.Model, args.AllowDownload)
	if err != nil {
		return toolError("resolve model", err), nil
	}
	if miss != nil {
		return miss, nil
	}
	resp, err := t.inference.GenerateImage(ctx, &inferencev1.GenerateImageRequest{Model: model, Prompt: args.Prompt, N: int32(n),
		Width: w, Height: h, NegativePrompt: args.NegativePrompt, Seed: args.Seed, Steps: args.Steps, CfgScale: args.CfgScale})
	if err != nil {
		return toolError("image generation", err), nil
	}
	var files []string
	if args.OutputPath != "" {
		files = []string{rel}
	} else {
		slug := strings.Trim(slugRun.ReplaceAllString(strings.ToLower(args.Prompt), "-"), "-")
		if len(slug) > 40 {
			slug = strings.Trim(slug[:40], "-")
		}
		stamp := time.Now().UTC().Format("20060102-150405.000")
		for i := range resp.GetImages() {
			files = append(files, filepath.Join(rel, fmt.Sprintf("%s-%s-%d.png", slug, stamp, i+1)))
		}
	}
	res := &mcp.CallToolResult{}
	var written []string
	for i, img := range resp.GetImages() {
		if d := filepath.Dir(files[i]); d != "." {
			if err := root.MkdirAll(d, 0o750); err != nil {
				return sandboxError(args.OutputPath+args.OutputDir, env, err), nil
			}
		}
		if err := root.WriteFile(files[i], img, 0o640); err != nil {
			return sandboxError(args.OutputPath+args.OutputDir, env, err), nil
		}
		written = append(written, filepath.Join(t.dirs.Images, files[i]))
		res.Content = append(res.Content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(img), "image/png"))
	}
	res.Content = append([]mcp.Content{mcp.NewTextContent(fmt.Sprintf("Wrote %d image(s) with %s: %s", len(written), model, strings.Join(written, ", ")))}, res.Content...)
	res.StructuredContent = map[string]any{"files": written, "model": model}
	logf(ctx, mcp.LoggingLevelInfo, "wrote %d image(s) with %s under %s", len(written), model, t.dirs.Images)
	return res, nil
}

// sandboxError explains a write os.Root refused (a symlink out of the directory, mostly).
func sandboxError(p, env string, err error) *mcp.CallToolResult {
	return mcp.NewToolResultError(fmt.Sprintf("cannot write %q inside %s: %v (symlinks may not lead out of it)", p, env, err))
}

// imageCountAndSize checks the n, size and output_path arguments shared by the image tools:
// n from 1 to maxImages (1 when absent), output_path only for one image, size as WIDTHxHEIGHT
// (0×0 when absent: the engine's default). A refusal comes back as the tool's error result.
func imageCountAndSize(nArg *int, size, outputPath string) (n int, w, h int32, bad *mcp.CallToolResult) {
	n = 1
	if nArg != nil {
		n = *nArg
	}
	if n < 1 || n > maxImages {
		return 0, 0, 0, mcp.NewToolResultError(fmt.Sprintf("n %d: ask for 1 to %d images", n, maxImages))
	}
	if outputPath != "" && n != 1 {
		return 0, 0, 0, mcp.NewToolResultError("output_path names one file: use output_dir for n > 1")
	}
	if size != "" {
		m := sizeArg.FindStringSubmatch(size)
		if m == nil {
			return 0, 0, 0, mcp.NewToolResultError("size must be WIDTHxHEIGHT, e.g. 512x512")
		}
		wi, _ := strconv.Atoi(m[1])
		hi, _ := strconv.Atoi(m[2])
		w, h = int32(wi), int32(hi)
	}
	return n, w, h, nil
}
