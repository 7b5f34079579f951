package lemonade

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/transcription"
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
	if err := transcription.CheckFormat(args.ResponseFormat); err != nil {
		return mcp.NewToolResultError(err.Error()), nil
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
	model, miss, err := t.resolveModel(ctx, req, inferencev1.ModelType_MODEL_TYPE_TRANSCRIPTION, args.Model, args.AllowDownload)
	if err != nil {
		return toolError("resolve model", err), nil
	}
	if miss != nil {
		return miss, nil
	}
	progress(ctx, req, 0, 1, fmt.Sprintf("transcribing %d bytes of audio with %s", len(audio), model))
	resp, err := t.inference.Transcribe(ctx, &inferencev1.TranscribeRequest{Model: model, Audio: audio, Filename: name,
		Language: args.Language, Prompt: args.Prompt, Temperature: args.Temperature})
	if err != nil {
		return toolError("transcription", err), nil
	}
	progress(ctx, req, 1, 1, "transcribed")
	logf(ctx, mcp.LoggingLevelInfo, "transcribed %.1f s of audio with %s", resp.GetDurationSeconds(), model)
	// Lemonade's two text blocks: the transcript, then the whole response of the format asked
	// for (as the transcription route answers it; text: the JSON one).
	full, err := json.Marshal(transcription.Body(args.ResponseFormat, false, resp))
	if err != nil {
		return toolError("transcription", err), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(resp.GetText()), mcp.NewTextContent(string(full))}}, nil
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
	// Where the files go, checked before any work is done; with neither output_path nor
	// output_dir nothing is written and the images come back inline, as Lemonade's do.
	var out *outputs
	if args.OutputPath != "" || args.OutputDir != "" {
		o, err := t.openOutputs(args.OutputPath, args.OutputDir)
		if err != nil {
			return errResult(err), nil
		}
		defer o.root.Close()
		out = o
	}
	model, miss, err := t.resolveModel(ctx, req, inferencev1.ModelType_MODEL_TYPE_IMAGE, args.Model, args.AllowDownload)
	if err != nil {
		return toolError("resolve model", err), nil
	}
	if miss != nil {
		return miss, nil
	}
	steps := float64(n + 1)
	progress(ctx, req, 0, steps, fmt.Sprintf("drawing %d image(s) with %s", n, model))
	resp, err := t.inference.GenerateImage(ctx, &inferencev1.GenerateImageRequest{Model: model, Prompt: args.Prompt, N: int32(n),
		Width: w, Height: h, NegativePrompt: args.NegativePrompt, Seed: args.Seed, Steps: args.Steps, CfgScale: args.CfgScale})
	if err != nil {
		return toolError("image generation", err), nil
	}
	res := &mcp.CallToolResult{}
	if out == nil {
		for _, img := range resp.GetImages() {
			res.Content = append(res.Content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(img), "image/png"))
		}
		progress(ctx, req, steps, steps, fmt.Sprintf("drew %d image(s)", len(res.Content)))
		logf(ctx, mcp.LoggingLevelInfo, "drew %d image(s) with %s, returned inline", len(res.Content), model)
		return res, nil
	}
	// Lemonade's disk answer: a summary, one block per path when there are several, then
	// {"paths":[…]} as JSON text.
	written := []string{}
	for i, img := range resp.GetImages() {
		path, err := out.write(out.name("image", ".png", i+1, true), img)
		if err != nil {
			return errResult(err), nil
		}
		written = append(written, path)
		progress(ctx, req, float64(i+2), steps, "wrote "+path)
	}
	res.Content = append(res.Content, mcp.NewTextContent(fmt.Sprintf("Wrote %d image(s) with %s: %s", len(written), model, strings.Join(written, ", "))))
	if len(written) > 1 {
		for _, p := range written {
			res.Content = append(res.Content, mcp.NewTextContent(p))
		}
	}
	paths, err := json.Marshal(map[string]any{"paths": written})
	if err != nil {
		return toolError("image generation", err), nil
	}
	res.Content = append(res.Content, mcp.NewTextContent(string(paths)))
	logf(ctx, mcp.LoggingLevelInfo, "wrote %d image(s) with %s under %s", len(written), model, t.dirs.Images)
	return res, nil
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
