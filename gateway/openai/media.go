package openai

import (
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/httpstatus"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Upload limits of the media routes, each under the edge's body limit (ZEST_MAX_BODY_BYTES,
// 32 MiB by default), which still bounds the whole request: a part over its own limit is
// answered 413 naming the field.
const (
	// MaxImageUploadBytes caps the image of images/edits and 3d/generations (decoded, for base64).
	MaxImageUploadBytes = 16 << 20
	// MaxMaskUploadBytes caps the mask of images/edits.
	MaxMaskUploadBytes = 8 << 20
)

// editFields are the form fields images/edits reads; OpenAI's others are accepted and ignored.
var editFields = map[string]bool{"model": true, "prompt": true, "n": true, "size": true, "response_format": true,
	"seed": true, "steps": true, "cfg_scale": true}

// registerMedia adds the media routes: audio/speech, audio/generations, images/edits and
// 3d/generations, each answered by MediaService.
func (a *API) registerMedia(mux *http.ServeMux, prefix string, wrap func(http.Handler) http.Handler) {
	mux.Handle(prefix+"audio/speech", wrap(postOnly(a.speech)))
	mux.Handle(prefix+"audio/generations", wrap(postOnly(a.audioGenerations)))
	mux.Handle(prefix+"images/edits", wrap(postOnly(a.imageEdits)))
	mux.Handle(prefix+"3d/generations", wrap(postOnly(a.generate3D)))
}

// writeMediaStatus is writeStatus, naming the field a BadRequest detail names.
func writeMediaStatus(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	if st.Code() == codes.InvalidArgument {
		writeStatusParam(w, err, httpstatus.BadField(st))
		return
	}
	writeStatus(w, err)
}

func badField(w http.ResponseWriter, field, msg string) {
	writeError(w, http.StatusBadRequest, "invalid_request_error", field, msg)
}

// writeBytes answers media bytes with their type.
func writeBytes(w http.ResponseWriter, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func (a *API) speech(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		Model          string   `json:"model"`
		Input          *string  `json:"input"`
		Voice          string   `json:"voice"`
		ResponseFormat string   `json:"response_format"`
		Speed          *float64 `json:"speed"`
		StreamFormat   string   `json:"stream_format"`
		Instructions   string   `json:"instructions"`
	}
	if err := decodeJSON(body, &in); err != nil {
		writeFieldError(w, err)
		return
	}
	switch {
	case in.Model == "":
		badField(w, "model", "model is required: a text-to-speech model (GET /api/v1/models, label tts)")
		return
	case in.Input == nil || strings.TrimSpace(*in.Input) == "":
		badField(w, "input", "input is required: the text to speak")
		return
	case in.StreamFormat != "" && in.StreamFormat != "audio":
		badField(w, "stream_format", "stream_format "+strconv.Quote(in.StreamFormat)+" is not served: omit it or use audio")
		return
	}
	req := &inferencev1.SpeechRequest{Model: in.Model, Input: *in.Input, Voice: in.Voice, ResponseFormat: in.ResponseFormat}
	if in.Speed != nil {
		if *in.Speed <= 0 {
			badField(w, "speed", "speed must be a positive number, e.g. 1.0")
			return
		}
		req.Speed = *in.Speed
	}
	if in.StreamFormat == "audio" {
		a.streamSpeech(w, r, req)
		return
	}
	resp, err := a.Media.Speech(a.Forward(r), req)
	if err != nil {
		writeMediaStatus(w, err)
		return
	}
	writeBytes(w, resp.GetContentType(), resp.GetAudio())
}

// streamSpeech writes the audio chunk by chunk as the engine makes it (chunked transfer, a
// flush per chunk). An error before the first chunk is a proper HTTP error; one after it
// aborts the response, so that the client sees a broken transfer rather than a short file.
func (a *API) streamSpeech(w http.ResponseWriter, r *http.Request, req *inferencev1.SpeechRequest) {
	stream, err := a.Media.StreamSpeech(a.Forward(r), &inferencev1.StreamSpeechRequest{Speech: req})
	if err != nil {
		writeMediaStatus(w, err)
		return
	}
	first, err := stream.Recv()
	if err != nil {
		writeMediaStatus(w, err)
		return
	}
	w.Header().Set("Content-Type", first.GetContentType())
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for c := first; ; {
		if _, err := w.Write(c.GetAudio()); err != nil {
			return // the client left: r.Context() is cancelled, which ends the engine call
		}
		if flusher != nil {
			flusher.Flush()
		}
		if c, err = stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			panic(http.ErrAbortHandler)
		}
	}
}

func (a *API) audioGenerations(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		Model          string   `json:"model"`
		Prompt         string   `json:"prompt"`
		Lyrics         string   `json:"lyrics"`
		VocalLanguage  string   `json:"vocal_language"`
		Duration       *float64 `json:"duration"`
		Steps          int32    `json:"steps"`
		Cfg            float64  `json:"cfg"`
		Seed           *int64   `json:"seed"`
		ResponseFormat string   `json:"response_format"`
	}
	if err := decodeJSON(body, &in); err != nil {
		writeFieldError(w, err)
		return
	}
	switch {
	case in.Model == "":
		badField(w, "model", "model is required: an audio generation model (GET /api/v1/models, label audio-generation)")
		return
	case strings.TrimSpace(in.Prompt) == "":
		badField(w, "prompt", "prompt is required: the music or sound to make")
		return
	case in.ResponseFormat != "" && in.ResponseFormat != "wav":
		badField(w, "response_format", "response_format "+strconv.Quote(in.ResponseFormat)+" is not served: use wav")
		return
	case in.Duration != nil && *in.Duration <= 0:
		badField(w, "duration", "duration must be a positive number of seconds")
		return
	}
	req := &inferencev1.GenerateAudioRequest{Model: in.Model, Prompt: in.Prompt, Lyrics: in.Lyrics, Seed: in.Seed,
		Steps: in.Steps, ResponseFormat: in.ResponseFormat}
	if in.Duration != nil {
		req.DurationSeconds = *in.Duration
	}
	resp, err := a.Media.GenerateAudio(a.Forward(r), req)
	if err != nil {
		writeMediaStatus(w, err)
		return
	}
	writeBytes(w, resp.GetContentType(), resp.GetAudio())
}

// upload is a multipart/form-data request's files and fields.
type upload struct {
	files  map[string][]byte
	fields map[string]string
}

// readUpload reads a multipart form as it arrives: each file named in limits is read up to
// its limit (413 naming it past that), each field in known up to maxFieldBytes, other parts
// are skipped; "image[]" is read as "image". It answers the error itself and returns false.
func readUpload(w http.ResponseWriter, r *http.Request, limits map[string]int, known map[string]bool) (*upload, bool) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "send multipart/form-data with an image file, a prompt and a model")
		return nil, false
	}
	up := &upload{files: map[string][]byte{}, fields: map[string]string{}}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return up, true
		}
		if err != nil {
			if errors.As(err, new(*http.MaxBytesError)) {
				writeReadError(w, err, "")
				return nil, false
			}
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "the multipart/form-data body is malformed: send an image file part, a prompt and a model")
			return nil, false
		}
		name := strings.TrimSuffix(part.FormName(), "[]")
		if limit, ok := limits[name]; ok {
			if _, dup := up.files[name]; dup {
				badField(w, name, "send one "+name+" file")
				return nil, false
			}
			b, err := httpguard.ReadSized(io.LimitReader(part, int64(limit)+1), -1)
			if err != nil {
				writeReadError(w, err, name)
				return nil, false
			}
			if len(b) > limit {
				writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", name,
					name+" is larger than the upload limit of "+strconv.Itoa(limit>>20)+" MiB")
				return nil, false
			}
			up.files[name] = b
			continue
		}
		if !known[name] { // a field this route does not read (OpenAI's user, quality, …): skipped
			if _, err := io.Copy(io.Discard, part); err != nil {
				writeReadError(w, err, "")
				return nil, false
			}
			continue
		}
		b, err := httpguard.ReadSized(io.LimitReader(part, maxFieldBytes+1), -1)
		if err != nil {
			writeReadError(w, err, name)
			return nil, false
		}
		if len(b) > maxFieldBytes {
			badField(w, name, name+" is longer than 64 KiB")
			return nil, false
		}
		up.fields[name] = string(b)
	}
}

// intField parses an optional integer field within [lo, hi], answering 400 naming it.
func intField(w http.ResponseWriter, fields map[string]string, name string, lo, hi int64) (int64, bool, bool) {
	s, ok := fields[name]
	if !ok || s == "" {
		return 0, false, true
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v < lo || v > hi {
		badField(w, name, name+" must be an integer from "+strconv.FormatInt(lo, 10)+" to "+strconv.FormatInt(hi, 10))
		return 0, false, false
	}
	return v, true, true
}

func (a *API) imageEdits(w http.ResponseWriter, r *http.Request) {
	up, ok := readUpload(w, r, map[string]int{"image": MaxImageUploadBytes, "mask": MaxMaskUploadBytes}, editFields)
	if !ok {
		return
	}
	f := up.fields
	switch {
	case len(up.files["image"]) == 0:
		badField(w, "image", "image is required: the PNG file to edit")
		return
	case strings.TrimSpace(f["prompt"]) == "":
		badField(w, "prompt", "prompt is required: the edit to make")
		return
	case f["model"] == "":
		badField(w, "model", "model is required: an image model (GET /api/v1/models, label image)")
		return
	case f["response_format"] != "" && f["response_format"] != "b64_json":
		badField(w, "response_format", "response_format "+strconv.Quote(f["response_format"])+" is not served: use b64_json")
		return
	}
	req := &inferencev1.EditImageRequest{Model: f["model"], Image: up.files["image"], Mask: up.files["mask"], Prompt: f["prompt"]}
	n, _, ok := intField(w, f, "n", 1, 10)
	if !ok {
		return
	}
	req.N = int32(n)
	if seed, set, ok := intField(w, f, "seed", -1<<62, 1<<62); !ok {
		return
	} else if set {
		req.Seed = &seed
	}
	steps, _, ok := intField(w, f, "steps", 1, 200)
	if !ok {
		return
	}
	req.Steps = int32(steps)
	if s := f["cfg_scale"]; s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || v > 50 {
			badField(w, "cfg_scale", "cfg_scale must be a number from 0 to 50")
			return
		}
		req.CfgScale = v
	}
	if s := f["size"]; s != "" && s != "auto" {
		var ok bool
		if req.Width, req.Height, ok = parseSize(s); !ok {
			badField(w, "size", "size must be WIDTHxHEIGHT, e.g. 512x512, or auto")
			return
		}
	}
	resp, err := a.Media.EditImage(a.Forward(r), req)
	if err != nil {
		writeMediaStatus(w, err)
		return
	}
	writeImages(w, resp.GetCreated(), resp.GetImages())
}

// generate3D takes Lemonade's JSON (image as base64 or a data: URL) or, as a convenience,
// multipart/form-data with an image file and the same fields.
func (a *API) generate3D(w http.ResponseWriter, r *http.Request) {
	var (
		req    = &inferencev1.Generate3DRequest{}
		format string
	)
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		up, ok := readUpload(w, r, map[string]int{"image": MaxImageUploadBytes},
			map[string]bool{"model": true, "resolution": true, "seed": true, "bg_removal": true, "uv": true, "response_format": true})
		if !ok {
			return
		}
		f := up.fields
		req.Model, req.Image, req.BgRemoval, req.Uv, format = f["model"], up.files["image"], f["bg_removal"], f["uv"], f["response_format"]
		res, _, ok := intField(w, f, "resolution", 1, 1<<15)
		if !ok {
			return
		}
		req.Resolution = int32(res)
		if seed, set, ok := intField(w, f, "seed", -1<<62, 1<<62); !ok {
			return
		} else if set {
			req.Seed = &seed
		}
	} else {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		var in struct {
			Model          string `json:"model"`
			Image          string `json:"image"`
			Resolution     int32  `json:"resolution"`
			BgRemoval      string `json:"bg_removal"`
			UV             string `json:"uv"`
			Seed           *int64 `json:"seed"`
			ResponseFormat string `json:"response_format"`
		}
		if err := decodeJSON(body, &in); err != nil {
			writeFieldError(w, err)
			return
		}
		req.Model, req.Resolution, req.BgRemoval, req.Uv, req.Seed, format = in.Model, in.Resolution, in.BgRemoval, in.UV, in.Seed, in.ResponseFormat
		if in.Image != "" {
			img, status, msg := decodeImageArg(in.Image)
			if msg != "" {
				writeError(w, status, "invalid_request_error", "image", msg)
				return
			}
			req.Image = img
		}
	}
	switch {
	case req.Model == "":
		badField(w, "model", "model is required: a 3D model (GET /api/v1/models, label 3d)")
		return
	case len(req.Image) == 0:
		badField(w, "image", "image is required: the picture to reconstruct, base64 or a data: URL")
		return
	case format != "" && format != "glb":
		badField(w, "response_format", "response_format "+strconv.Quote(format)+" is not served: use glb")
		return
	}
	resp, err := a.Media.Generate3D(a.Forward(r), req)
	if err != nil {
		writeMediaStatus(w, err)
		return
	}
	writeBytes(w, resp.GetContentType(), resp.GetGlb())
}

// decodeImageArg decodes a base64 image or a data: URL, refusing more than
// MaxImageUploadBytes before decoding; a message names what is wrong.
func decodeImageArg(s string) ([]byte, int, string) {
	if rest, ok := strings.CutPrefix(s, "data:"); ok {
		_, payload, found := strings.Cut(rest, ",")
		if !found || !strings.Contains(rest[:len(rest)-len(payload)], ";base64") {
			return nil, http.StatusBadRequest, "image is a data: URL without ;base64, data"
		}
		s = payload
	}
	if base64.StdEncoding.DecodedLen(len(s)) > MaxImageUploadBytes+2 {
		return nil, http.StatusRequestEntityTooLarge, "image is larger than the upload limit of " + strconv.Itoa(MaxImageUploadBytes>>20) + " MiB"
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, http.StatusBadRequest, "image is not valid base64"
	}
	if len(b) > MaxImageUploadBytes {
		return nil, http.StatusRequestEntityTooLarge, "image is larger than the upload limit of " + strconv.Itoa(MaxImageUploadBytes>>20) + " MiB"
	}
	return b, 0, ""
}
