package lemonade

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// Tool names of the media tools that call MediaService.
const (
	TextToSpeech  = "lemonade_text_to_speech"
	GenerateAudio = "lemonade_generate_audio"
	EditImage     = "lemonade_edit_image"
	Generate3D    = "lemonade_generate_3d"
)

// Limits of the media tools.
const (
	// MaxImageBytes caps an image or mask they read (a path or base64), as the HTTP routes do.
	MaxImageBytes = 16 << 20
	// ReferenceSide is the side of the reference image lemonade_generate_3d draws from a prompt.
	ReferenceSide = 1024
	imageDirEnv   = "LEMONADE_MCP_IMAGE_DIR"
)

// MediaTools are lemonade_text_to_speech, lemonade_generate_audio, lemonade_edit_image and
// lemonade_generate_3d. Like lemonade_generate_image they write their files inside the image
// directory (LEMONADE_MCP_IMAGE_DIR: output_path or output_dir, no ".." or symlink out of it)
// and read input images only from inside it, and return the media in the result as well.
type MediaTools struct {
	t     *Tools
	media inferencev1.MediaServiceClient
}

// NewMedia returns the media tools backed by the tool set t (its model choice and directories)
// and the inference node's MediaService.
func NewMedia(t *Tools, media inferencev1.MediaServiceClient) *MediaTools {
	return &MediaTools{t: t, media: media}
}

// Register adds the four tools to s.
func (m *MediaTools) Register(s *server.MCPServer) {
	s.AddTool(tool(TextToSpeech, "Text to speech",
		"Speak a text with a text-to-speech model and write the audio (WAV) inside the image directory.",
		speechSchema, false, false), m.speech)
	s.AddTool(tool(GenerateAudio, "Generate audio",
		"Generate music or a sound effect from a prompt and write it as a WAV file inside the image directory.",
		audioGenSchema, false, false), m.generateAudio)
	s.AddTool(tool(EditImage, "Edit an image",
		"Edit a PNG (a path inside the image directory, or base64) as a prompt says, optionally only where a mask is transparent, and write the results as PNG files.",
		editSchema, false, false), m.editImage)
	s.AddTool(tool(Generate3D, "Generate a 3D model",
		"Reconstruct a 3D mesh (GLB) from an image; given only a prompt, first draw a 1024x1024 reference image. Writes the GLB (and the reference PNG) inside the image directory.",
		mesh3DSchema, false, false), m.generate3D)
}

// outputs is where one call's files go: one file (output_path) or names in a directory.
type outputs struct {
	root  *os.Root
	dir   string // the image directory
	rel   string // output_path or output_dir, relative to dir
	file  bool
	arg   string
	stamp string
}

// openOutputs checks output_path and output_dir before any work is done.
func (t *Tools) openOutputs(outputPath, outputDir string) (*outputs, error) {
	if outputPath != "" && outputDir != "" {
		return nil, errors.New("give output_path or output_dir, not both")
	}
	target := outputPath + outputDir
	rel, err := inside(t.dirs.Images, target, imageDirEnv)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(t.dirs.Images, 0o750); err != nil {
		return nil, fmt.Errorf("image directory: %w", err)
	}
	root, err := os.OpenRoot(t.dirs.Images)
	if err != nil {
		return nil, fmt.Errorf("image directory: %w", err)
	}
	// A time stamp and a random token: concurrent calls never pick the same name.
	token := make([]byte, 4)
	_, _ = rand.Read(token)
	return &outputs{root: root, dir: t.dirs.Images, rel: rel, file: outputPath != "", arg: target,
		stamp: time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(token)}, nil
}

// name is the path of the i-th file of this call (from 1) with extension ext: output_path
// itself for the main file (its extension replaced by ext for a companion), else a name made
// of the slug, a time stamp, a random token and i inside output_dir.
func (o *outputs) name(slug, ext string, i int, main bool) string {
	if o.file {
		if main {
			return o.rel
		}
		return strings.TrimSuffix(o.rel, filepath.Ext(o.rel)) + ext
	}
	return filepath.Join(o.rel, fmt.Sprintf("%s-%s-%d%s", slug, o.stamp, i, ext))
}

// write writes b at rel inside the image directory, returning its absolute path.
func (o *outputs) write(rel string, b []byte) (string, error) {
	if d := filepath.Dir(rel); d != "." {
		if err := o.root.MkdirAll(d, 0o750); err != nil {
			return "", fmt.Errorf("cannot write %q inside %s: %v (symlinks may not lead out of it)", o.arg, imageDirEnv, err)
		}
	}
	if err := o.root.WriteFile(rel, b, 0o640); err != nil {
		return "", fmt.Errorf("cannot write %q inside %s: %v (symlinks may not lead out of it)", o.arg, imageDirEnv, err)
	}
	return filepath.Join(o.dir, rel), nil
}

func slugOf(s string) string {
	slug := strings.Trim(slugRun.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(slug) > 40 {
		slug = strings.Trim(slug[:40], "-")
	}
	if slug == "" {
		slug = "media"
	}
	return slug
}

// inputImage reads an image argument: a path inside the image directory or base64 (either,
// not both; required says whether neither is an error).
func (t *Tools) inputImage(ctx context.Context, field, path, b64 string, required bool) ([]byte, error) {
	switch {
	case path != "" && b64 != "":
		return nil, fmt.Errorf("give %s_path or %s_base64, not both", field, field)
	case path != "":
		return readSandboxed(ctx, t.dirs.Images, field+"_path", path, MaxImageBytes)
	case b64 != "":
		if n := base64.StdEncoding.DecodedLen(len(b64)); n > MaxImageBytes+2 {
			return nil, fmt.Errorf("%s_base64 holds about %d bytes; the limit is %d (%d MiB)", field, n, MaxImageBytes, MaxImageBytes>>20)
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("%s_base64 is not valid base64", field)
		}
		if len(b) > MaxImageBytes {
			return nil, fmt.Errorf("%s_base64 holds %d bytes; the limit is %d", field, len(b), MaxImageBytes)
		}
		return b, nil
	case required:
		return nil, fmt.Errorf("give %s_path (inside %s) or %s_base64", field, imageDirEnv, field)
	}
	return nil, nil
}

// readSandboxed reads p, a regular file inside dir, of at most limit bytes, through os.Root
// (no ".." or symlink out of dir) without blocking on a FIFO, as readAudio does.
func readSandboxed(ctx context.Context, dir, arg, p string, limit int) ([]byte, error) {
	rel, err := inside(dir, p, imageDirEnv)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("image directory (%s): %w", imageDirEnv, err)
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_RDONLY|openNoBlock, 0)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", arg, p, unwrapPath(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", arg, p, unwrapPath(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %q is not a regular file; give a file inside %s", arg, p, imageDirEnv)
	}
	if st.Size() > int64(limit) {
		return nil, fmt.Errorf("%s %q has %d bytes; the limit is %d", arg, p, st.Size(), limit)
	}
	b, err := readAtMost(f, st.Size(), limit)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("%s %q grew past the %d-byte limit while it was read", arg, p, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", arg, p, unwrapPath(err))
	}
	return b, nil
}

func errResult(err error) *mcp.CallToolResult { return mcp.NewToolResultError(err.Error()) }

func (m *MediaTools) speech(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Input          string  `json:"input"`
		Model          string  `json:"model"`
		AllowDownload  bool    `json:"allow_download"`
		Voice          string  `json:"voice"`
		Speed          float64 `json:"speed"`
		ResponseFormat string  `json:"response_format"`
		OutputPath     string  `json:"output_path"`
		OutputDir      string  `json:"output_dir"`
	}
	if err := bindArgs(req, &args); err != nil {
		return errResult(err), nil
	}
	if strings.TrimSpace(args.Input) == "" {
		return mcp.NewToolResultError("input is required: the text to speak"), nil
	}
	out, err := m.t.openOutputs(args.OutputPath, args.OutputDir)
	if err != nil {
		return errResult(err), nil
	}
	defer out.root.Close()
	model, miss, err := m.t.resolveModel(ctx, req, inferencev1.ModelType_MODEL_TYPE_TTS, args.Model, args.AllowDownload)
	if err != nil {
		return toolError("resolve model", err), nil
	}
	if miss != nil {
		return miss, nil
	}
	progress(ctx, req, 0, 1, "speaking with "+model)
	resp, err := m.media.Speech(ctx, &inferencev1.SpeechRequest{Model: model, Input: args.Input, Voice: args.Voice,
		Speed: args.Speed, ResponseFormat: args.ResponseFormat})
	if err != nil {
		return toolError("text to speech", err), nil
	}
	return m.audioResult(ctx, req, out, slugOf(args.Input), model, resp.GetAudio(), resp.GetContentType())
}

func (m *MediaTools) generateAudio(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Prompt        string  `json:"prompt"`
		Model         string  `json:"model"`
		AllowDownload bool    `json:"allow_download"`
		Duration      float64 `json:"duration"`
		Lyrics        string  `json:"lyrics"`
		Seed          *int64  `json:"seed"`
		Steps         int32   `json:"steps"`
		OutputPath    string  `json:"output_path"`
		OutputDir     string  `json:"output_dir"`
	}
	if err := bindArgs(req, &args); err != nil {
		return errResult(err), nil
	}
	if strings.TrimSpace(args.Prompt) == "" {
		return mcp.NewToolResultError("prompt is required: the music or sound to make"), nil
	}
	if args.Duration < 0 {
		return mcp.NewToolResultError("duration must be a positive number of seconds"), nil
	}
	out, err := m.t.openOutputs(args.OutputPath, args.OutputDir)
	if err != nil {
		return errResult(err), nil
	}
	defer out.root.Close()
	model, miss, err := m.t.resolveModel(ctx, req, inferencev1.ModelType_MODEL_TYPE_AUDIO_GENERATION, args.Model, args.AllowDownload)
	if err != nil {
		return toolError("resolve model", err), nil
	}
	if miss != nil {
		return miss, nil
	}
	progress(ctx, req, 0, 1, "generating audio with "+model)
	resp, err := m.media.GenerateAudio(ctx, &inferencev1.GenerateAudioRequest{Model: model, Prompt: args.Prompt,
		DurationSeconds: args.Duration, Lyrics: args.Lyrics, Seed: args.Seed, Steps: args.Steps})
	if err != nil {
		return toolError("audio generation", err), nil
	}
	return m.audioResult(ctx, req, out, slugOf(args.Prompt), model, resp.GetAudio(), resp.GetContentType())
}

// audioResult writes audio and answers with its path and the audio itself.
func (m *MediaTools) audioResult(ctx context.Context, req mcp.CallToolRequest, out *outputs, slug, model string, audio []byte, contentType string) (*mcp.CallToolResult, error) {
	ext := ".wav"
	switch {
	case strings.Contains(contentType, "pcm"):
		ext = ".pcm"
	case strings.Contains(contentType, "mpeg"), strings.Contains(contentType, "mp3"):
		ext = ".mp3"
	case strings.Contains(contentType, "opus"), strings.Contains(contentType, "ogg"):
		ext = ".ogg"
	}
	path, err := out.write(out.name(slug, ext, 1, true), audio)
	if err != nil {
		return errResult(err), nil
	}
	progress(ctx, req, 1, 1, "wrote "+path)
	logf(ctx, mcp.LoggingLevelInfo, "wrote %d bytes of audio with %s to %s", len(audio), model, path)
	res := &mcp.CallToolResult{Content: []mcp.Content{
		mcp.NewTextContent(fmt.Sprintf("Wrote %s (%d bytes, %s) with %s", path, len(audio), contentType, model)),
		mcp.NewAudioContent(base64.StdEncoding.EncodeToString(audio), contentType),
	}}
	res.StructuredContent = map[string]any{"file": path, "model": model, "content_type": contentType, "bytes": len(audio)}
	return res, nil
}

func (m *MediaTools) editImage(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Prompt        string  `json:"prompt"`
		Model         string  `json:"model"`
		AllowDownload bool    `json:"allow_download"`
		ImagePath     string  `json:"image_path"`
		MaskPath      string  `json:"mask_path"`
		Size          string  `json:"size"`
		N             *int    `json:"n"`
		Seed          *int64  `json:"seed"`
		Steps         int32   `json:"steps"`
		CfgScale      float64 `json:"cfg_scale"`
		OutputPath    string  `json:"output_path"`
		OutputDir     string  `json:"output_dir"`
	}
	imageB64, rest, err := takeString(req.GetArguments(), "image_base64")
	if err != nil {
		return mcp.NewToolResultError("argument image_base64 must be a string (base64 of a PNG)"), nil
	}
	maskB64, rest, err := takeString(rest, "mask_base64")
	if err != nil {
		return mcp.NewToolResultError("argument mask_base64 must be a string (base64 of a PNG)"), nil
	}
	if err := bindMap(rest, &args); err != nil {
		return errResult(err), nil
	}
	if strings.TrimSpace(args.Prompt) == "" {
		return mcp.NewToolResultError("prompt is required: the edit to make"), nil
	}
	n, w, h, bad := imageCountAndSize(args.N, args.Size, args.OutputPath)
	if bad != nil {
		return bad, nil
	}
	image, err := m.t.inputImage(ctx, "image", args.ImagePath, imageB64, true)
	if err != nil {
		return errResult(err), nil
	}
	mask, err := m.t.inputImage(ctx, "mask", args.MaskPath, maskB64, false)
	if err != nil {
		return errResult(err), nil
	}
	out, err := m.t.openOutputs(args.OutputPath, args.OutputDir)
	if err != nil {
		return errResult(err), nil
	}
	defer out.root.Close()
	model, miss, err := m.t.resolveModel(ctx, req, inferencev1.ModelType_MODEL_TYPE_IMAGE, args.Model, args.AllowDownload)
	if err != nil {
		return toolError("resolve model", err), nil
	}
	if miss != nil {
		return miss, nil
	}
	progress(ctx, req, 0, float64(n+1), "editing with "+model)
	resp, err := m.media.EditImage(ctx, &inferencev1.EditImageRequest{Model: model, Image: image, Mask: mask, Prompt: args.Prompt,
		N: int32(n), Width: w, Height: h, Seed: args.Seed, Steps: args.Steps, CfgScale: args.CfgScale})
	if err != nil {
		return toolError("image edit", err), nil
	}
	res := &mcp.CallToolResult{}
	var written []string
	for i, img := range resp.GetImages() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		path, err := out.write(out.name(slugOf(args.Prompt), ".png", i+1, true), img)
		if err != nil {
			return errResult(err), nil
		}
		written = append(written, path)
		progress(ctx, req, float64(i+2), float64(n+1), "wrote "+path)
		res.Content = append(res.Content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(img), "image/png"))
	}
	res.Content = append([]mcp.Content{mcp.NewTextContent(fmt.Sprintf("Wrote %d edited image(s) with %s: %s", len(written), model, strings.Join(written, ", ")))}, res.Content...)
	res.StructuredContent = map[string]any{"files": written, "model": model}
	logf(ctx, mcp.LoggingLevelInfo, "wrote %d edited image(s) with %s", len(written), model)
	return res, nil
}

func (m *MediaTools) generate3D(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Prompt        string `json:"prompt"`
		ImagePath     string `json:"image_path"`
		Model         string `json:"model"`
		ImageModel    string `json:"image_model"`
		AllowDownload bool   `json:"allow_download"`
		Resolution    int32  `json:"resolution"`
		Seed          *int64 `json:"seed"`
		OutputPath    string `json:"output_path"`
		OutputDir     string `json:"output_dir"`
	}
	imageB64, rest, err := takeString(req.GetArguments(), "image_base64")
	if err != nil {
		return mcp.NewToolResultError("argument image_base64 must be a string (base64 of a picture)"), nil
	}
	if err := bindMap(rest, &args); err != nil {
		return errResult(err), nil
	}
	fromPrompt := args.ImagePath == "" && imageB64 == ""
	if fromPrompt && strings.TrimSpace(args.Prompt) == "" {
		return mcp.NewToolResultError("give image_path or image_base64 (the picture to reconstruct), or a prompt to draw one first"), nil
	}
	if r := args.Resolution; r != 0 && r != 512 && r != 1024 && r != 1536 {
		return mcp.NewToolResultError(fmt.Sprintf("resolution %d: use 512, 1024 or 1536", r)), nil
	}
	var image []byte
	if !fromPrompt {
		if image, err = m.t.inputImage(ctx, "image", args.ImagePath, imageB64, true); err != nil {
			return errResult(err), nil
		}
	}
	out, err := m.t.openOutputs(args.OutputPath, args.OutputDir)
	if err != nil {
		return errResult(err), nil
	}
	defer out.root.Close()
	model, miss, err := m.t.resolveModel(ctx, req, inferencev1.ModelType_MODEL_TYPE_MESH, args.Model, args.AllowDownload)
	if err != nil {
		return toolError("resolve model", err), nil
	}
	if miss != nil {
		return miss, nil
	}
	slug := slugOf(args.Prompt)
	if !fromPrompt && args.ImagePath != "" {
		slug = slugOf(strings.TrimSuffix(filepath.Base(args.ImagePath), filepath.Ext(args.ImagePath)))
	}
	res := &mcp.CallToolResult{}
	structured := map[string]any{"model": model}
	const steps = 3
	if fromPrompt {
		imageModel, miss, err := m.t.resolveModel(ctx, req, inferencev1.ModelType_MODEL_TYPE_IMAGE, args.ImageModel, args.AllowDownload)
		if err != nil {
			return toolError("resolve image model", err), nil
		}
		if miss != nil {
			return miss, nil
		}
		progress(ctx, req, 0, steps, fmt.Sprintf("drawing a %dx%d reference image with %s", ReferenceSide, ReferenceSide, imageModel))
		img, err := m.t.inference.GenerateImage(ctx, &inferencev1.GenerateImageRequest{Model: imageModel, Prompt: args.Prompt, N: 1,
			Width: ReferenceSide, Height: ReferenceSide, Seed: args.Seed})
		if err != nil {
			return toolError("reference image", err), nil
		}
		if len(img.GetImages()) == 0 {
			return mcp.NewToolResultError("reference image failed: the image model answered no image"), nil
		}
		image = img.GetImages()[0]
		path, err := out.write(out.name(slug, ".png", 1, false), image)
		if err != nil {
			return errResult(err), nil
		}
		structured["reference_image"], structured["image_model"] = path, imageModel
		res.Content = append(res.Content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(image), "image/png"))
		progress(ctx, req, 1, steps, "wrote the reference image "+path)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	progress(ctx, req, 1, steps, "reconstructing the mesh with "+model)
	mesh, err := m.media.Generate3D(ctx, &inferencev1.Generate3DRequest{Model: model, Image: image, Resolution: args.Resolution, Seed: args.Seed})
	if err != nil {
		return toolError("3D generation", err), nil
	}
	path, err := out.write(out.name(slug, ".glb", 1, true), mesh.GetGlb())
	if err != nil {
		return errResult(err), nil
	}
	structured["file"] = path
	progress(ctx, req, steps, steps, "wrote "+path)
	res.Content = append(res.Content, mcp.NewEmbeddedResource(mcp.BlobResourceContents{
		URI: "file://" + filepath.ToSlash(path), MIMEType: "model/gltf-binary", Blob: base64.StdEncoding.EncodeToString(mesh.GetGlb()),
	}))
	text := fmt.Sprintf("Wrote %s (%d bytes, glTF binary) with %s", path, len(mesh.GetGlb()), model)
	if ref, ok := structured["reference_image"].(string); ok {
		text += "; reference image " + ref
	}
	res.Content = append([]mcp.Content{mcp.NewTextContent(text)}, res.Content...)
	res.StructuredContent = structured
	logf(ctx, mcp.LoggingLevelInfo, "%s", text)
	return res, nil
}
