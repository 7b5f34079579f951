package openaiengine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// maxMediaAnswer caps an engine's audio, image or mesh answer: past it the engine is
// answering something no client asked for (and the gRPC message would be refused anyway).
const maxMediaAnswer = 256 << 20

// postJSON sends in as JSON to path on a replica and returns the whole answer and its type.
func (e *Engine) postJSON(ctx context.Context, m *Model, path string, in map[string]any) ([]byte, string, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, "", err
	}
	return e.post(ctx, m, path, "application/json", body)
}

func (e *Engine) post(ctx context.Context, m *Model, path, contentType string, body []byte) ([]byte, string, error) {
	resp, done, err := e.send(ctx, m, func(base string) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, "POST", base+path, bytes.NewReader(body))
		if err == nil {
			r.Header.Set("Content-Type", contentType)
		}
		return r, err
	})
	if err != nil {
		return nil, "", err
	}
	defer done()
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMediaAnswer+1))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s: the answer broke off: %v", ErrUpstream, path, err)
	}
	if len(b) > maxMediaAnswer {
		return nil, "", fmt.Errorf("%w: %s: the answer is over %d MiB", ErrUpstream, path, maxMediaAnswer>>20)
	}
	if len(b) == 0 {
		return nil, "", fmt.Errorf("%w: %s: the engine answered nothing", ErrUpstream, path)
	}
	return b, resp.Header.Get("Content-Type"), nil
}

// Speech relays a text-to-speech request to the engine's /audio/speech.
func (e *Engine) Speech(ctx context.Context, req *inferencev1.SpeechRequest) (*inferencev1.SpeechResponse, error) {
	m, err := e.model(req.GetModel())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	b, ct, err := e.postJSON(ctx, m, "/audio/speech", speechBody(m, req))
	if err != nil {
		return nil, err
	}
	return &inferencev1.SpeechResponse{Audio: b, ContentType: orDefault(ct, "application/octet-stream")}, nil
}

func speechBody(m *Model, req *inferencev1.SpeechRequest) map[string]any {
	in := map[string]any{"model": m.Cfg.UpstreamModel, "input": req.GetInput()}
	if req.GetVoice() != "" {
		in["voice"] = req.GetVoice()
	}
	if req.GetResponseFormat() != "" {
		in["response_format"] = req.GetResponseFormat()
	}
	if req.GetSpeed() != 0 {
		in["speed"] = req.GetSpeed()
	}
	return in
}

// streamPiece is the most of a relayed audio stream sent in one message.
const streamPiece = 32 << 10

// StreamSpeech asks the engine's /audio/speech with stream_format "audio" and relays the
// audio as it arrives: each read of the engine's answer (at most streamPiece bytes) is sent
// at once, the first with the answer's Content-Type.
func (e *Engine) StreamSpeech(ctx context.Context, req *inferencev1.SpeechRequest, send func(*inferencev1.StreamSpeechResponse) error) error {
	m, err := e.model(req.GetModel())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	in := speechBody(m, req)
	in["stream_format"] = "audio"
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, done, err := e.postRaw(ctx, m, "/audio/speech", body, false)
	if err != nil {
		return err
	}
	defer done()
	defer resp.Body.Close()
	ct := orDefault(resp.Header.Get("Content-Type"), "application/octet-stream")
	buf := make([]byte, streamPiece)
	total := 0
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if total += n; total > maxMediaAnswer {
				return fmt.Errorf("%w: /audio/speech: the stream is over %d MiB", ErrUpstream, maxMediaAnswer>>20)
			}
			c := &inferencev1.StreamSpeechResponse{Audio: bytes.Clone(buf[:n])}
			if ct != "" {
				c.ContentType, ct = ct, ""
			}
			if err := send(c); err != nil {
				return err
			}
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF) && total == 0:
			return fmt.Errorf("%w: /audio/speech: the engine answered nothing", ErrUpstream)
		case errors.Is(rerr, io.EOF):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			return fmt.Errorf("%w: /audio/speech: the stream broke: %v", ErrUpstream, rerr)
		}
	}
}

// GenerateAudio relays a music or sound request to the engine's /audio/generations (Lemonade's).
func (e *Engine) GenerateAudio(ctx context.Context, req *inferencev1.GenerateAudioRequest) (*inferencev1.GenerateAudioResponse, error) {
	m, err := e.model(req.GetModel())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	in := map[string]any{"model": m.Cfg.UpstreamModel, "prompt": req.GetPrompt()}
	if req.GetDurationSeconds() != 0 {
		in["duration"] = req.GetDurationSeconds()
	}
	if req.Seed != nil {
		in["seed"] = req.GetSeed()
	}
	if req.GetLyrics() != "" {
		in["lyrics"] = req.GetLyrics()
	}
	if req.GetSteps() != 0 {
		in["steps"] = req.GetSteps()
	}
	if req.GetResponseFormat() != "" {
		in["response_format"] = req.GetResponseFormat()
	}
	b, ct, err := e.postJSON(ctx, m, "/audio/generations", in)
	if err != nil {
		return nil, err
	}
	return &inferencev1.GenerateAudioResponse{Audio: b, ContentType: orDefault(ct, "audio/wav")}, nil
}

// Generate3D relays an image to the engine's /3d/generations (Lemonade's: JSON, base64 image).
func (e *Engine) Generate3D(ctx context.Context, req *inferencev1.Generate3DRequest) (*inferencev1.Generate3DResponse, error) {
	m, err := e.model(req.GetModel())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	in := map[string]any{"model": m.Cfg.UpstreamModel, "image": base64.StdEncoding.EncodeToString(req.GetImage())}
	if req.GetResolution() != 0 {
		in["resolution"] = req.GetResolution()
	}
	if req.Seed != nil {
		in["seed"] = req.GetSeed()
	}
	if req.GetBgRemoval() != "" {
		in["bg_removal"] = req.GetBgRemoval()
	}
	if req.GetUv() != "" {
		in["uv"] = req.GetUv()
	}
	b, ct, err := e.postJSON(ctx, m, "/3d/generations", in)
	if err != nil {
		return nil, err
	}
	return &inferencev1.Generate3DResponse{Glb: b, ContentType: orDefault(ct, "model/gltf-binary")}, nil
}

// EditImage relays an edit to the engine's /images/edits as multipart/form-data and decodes
// the base64 PNGs of its answer.
func (e *Engine) EditImage(ctx context.Context, req *inferencev1.EditImageRequest) (*inferencev1.EditImageResponse, error) {
	m, err := e.model(req.GetModel())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("image", "image.png")
	_, _ = fw.Write(req.GetImage())
	if len(req.GetMask()) > 0 {
		fw, _ = mw.CreateFormFile("mask", "mask.png")
		_, _ = fw.Write(req.GetMask())
	}
	fields := map[string]string{"model": m.Cfg.UpstreamModel, "prompt": req.GetPrompt(), "response_format": "b64_json"}
	if req.GetN() > 0 {
		fields["n"] = strconv.Itoa(int(req.GetN()))
	}
	if req.GetWidth() > 0 && req.GetHeight() > 0 {
		fields["size"] = fmt.Sprintf("%dx%d", req.GetWidth(), req.GetHeight())
	}
	if req.Seed != nil {
		fields["seed"] = strconv.FormatInt(req.GetSeed(), 10)
	}
	if req.GetSteps() > 0 {
		fields["steps"] = strconv.Itoa(int(req.GetSteps()))
	}
	if req.GetCfgScale() != 0 {
		fields["cfg_scale"] = strconv.FormatFloat(req.GetCfgScale(), 'g', -1, 64)
	}
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	_ = mw.Close()
	b, _, err := e.post(ctx, m, "/images/edits", mw.FormDataContentType(), body.Bytes())
	if err != nil {
		return nil, err
	}
	var out struct {
		Created int64 `json:"created"`
		Data    []struct {
			B64JSON string `json:"b64_json"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%w: the image edit answer is not JSON: %v", ErrUpstream, err)
	}
	res := &inferencev1.EditImageResponse{Created: out.Created}
	if res.Created == 0 {
		res.Created = time.Now().Unix()
	}
	for _, d := range out.Data {
		img, err := base64.StdEncoding.DecodeString(d.B64JSON)
		if err != nil {
			return nil, fmt.Errorf("%w: an edited image is not base64: %v", ErrUpstream, err)
		}
		res.Images = append(res.Images, img)
	}
	return res, nil
}

func orDefault(ct, def string) string {
	if ct = strings.TrimSpace(ct); ct == "" {
		return def
	}
	return ct
}
