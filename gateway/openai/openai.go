// Package openai serves Lemonade's OpenAI-compatible REST routes at the edge and turns them
// into calls to the inference service: models, chat completions (JSON, or SSE chunk by chunk
// as the engine produces them), audio transcriptions (multipart) and image generations.
package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/httpstatus"
	"github.com/zestmcp/zest/lib/openaichat"
	"github.com/zestmcp/zest/lib/transcription"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// API serves the OpenAI routes.
type API struct {
	Inference inferencev1.InferenceServiceClient
	// Models serves load, unload, pull, delete, stats and system-info (models.go).
	Models inferencev1.ModelAdminServiceClient
	// Media answers the media routes (media.go).
	Media inferencev1.MediaServiceClient
	// Text serves embeddings, completions and responses (text.go, responses.go).
	Text inferencev1.TextServiceClient
	// ToolChat runs chats that select MCP providers (a "preset" or "mcp_server_ids" field).
	ToolChat mcpgatewayv1.ChatServiceClient
	Log      *slog.Logger
	// Forward returns the request's context carrying the caller's credentials.
	Forward func(*http.Request) context.Context
}

// Register adds the routes under prefix (e.g. "/api/v1/") to mux, each wrapped by wrap.
func (a *API) Register(mux *http.ServeMux, prefix string, wrap func(http.Handler) http.Handler) {
	mux.Handle(prefix+"models", wrap(httpguard.GetOnly(http.HandlerFunc(a.models))))
	mux.Handle(prefix+"models/{id}", wrap(httpguard.GetOnly(http.HandlerFunc(a.model))))
	mux.Handle(prefix+"chat/completions", wrap(postOnly(a.chat)))
	mux.Handle(prefix+"audio/transcriptions", wrap(postOnly(a.transcribe)))
	mux.Handle(prefix+"audio/translations", wrap(postOnly(a.translate)))
	mux.Handle(prefix+"images/generations", wrap(postOnly(a.images)))
	a.registerModels(mux, prefix, wrap)
	a.registerMedia(mux, prefix, wrap)
	a.registerText(mux, prefix, wrap)
}

func postOnly(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			httpguard.WriteError(w, http.StatusMethodNotAllowed, "Method Not Allowed. Use POST for this endpoint")
			return
		}
		h(w, r)
	})
}

// writeError writes OpenAI's error shape {"error":{"message","type","param","code"}}; param
// is null when empty.
func writeError(w http.ResponseWriter, code int, typ, param, msg string) {
	var p any
	if param != "" {
		p = param
	}
	httpguard.WriteJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": p, "code": nil}})
}

// WriteError writes OpenAI's error shape with no param: these routes' writer for the answers
// the edge gives in their place (a body over the limit, no route, a body that timed out, a key
// refused). A 401 is authentication_error with code invalid_api_key and a 429 OpenAI's
// rate-limit error, as OpenAI answers them; anything else is invalid_request_error.
func WriteError(w http.ResponseWriter, code int, msg string) {
	switch code {
	case http.StatusUnauthorized:
		httpguard.WriteJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": "authentication_error", "param": nil, "code": "invalid_api_key"}})
	case http.StatusTooManyRequests:
		WriteLimited(w, msg)
	default:
		writeError(w, code, "invalid_request_error", "", msg)
	}
}

// writeStatus writes an inference error in OpenAI's shape with the status of the one table
// (httpstatus): the type is authentication_error for a 401, invalid_request_error for another
// refusal (4xx; a NotFound names the model), api_error for a failure (5xx); an unreachable
// inference service is named as such; a refusal whose BadRequest detail names a field names it
// in error.param. A call its client cancelled is not answered.
func writeStatus(w http.ResponseWriter, err error) {
	writeStatusParam(w, err, httpstatus.BadField(status.Convert(err)))
}

// writeStatusParam is writeStatus naming param as the field a refusal is about (NotFound names
// the model unless param says otherwise).
func writeStatusParam(w http.ResponseWriter, err error, param string) {
	st := status.Convert(err)
	code, msg := httpstatus.FromCode(st.Code()), st.Message()
	typ := "invalid_request_error"
	httpstatus.SetHeaders(w.Header(), st)
	switch {
	case st.Code() == codes.Canceled:
		return
	case code == http.StatusTooManyRequests:
		WriteLimited(w, msg)
		return
	case code == http.StatusUnauthorized:
		typ = "authentication_error"
	case st.Code() == codes.NotFound && param == "":
		param = "model"
	case st.Code() == codes.Unavailable:
		msg = "inference service unavailable: " + msg
	}
	if code >= 500 {
		typ, param = "api_error", ""
	}
	writeError(w, code, typ, param, msg)
}

// WriteLimited writes OpenAI's rate-limit error (429): {"error":{"message","type":"requests",
// "param":null,"code":"rate_limit_exceeded"}}; the caller sets Retry-After.
func WriteLimited(w http.ResponseWriter, msg string) {
	httpguard.WriteJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
		"message": msg, "type": "requests", "param": nil, "code": "rate_limit_exceeded"}})
}

func modelJSON(m *inferencev1.Model) map[string]any {
	return map[string]any{
		"id": m.GetId(), "object": "model", "created": m.GetCreated(), "owned_by": m.GetOwnedBy(),
		"labels": m.GetLabels(), "recipe": m.GetEngine(),
		"downloaded": m.GetState() != inferencev1.ModelState_MODEL_STATE_SUGGESTED,
		"loaded":     m.GetState() == inferencev1.ModelState_MODEL_STATE_LOADED,
		"suggested":  m.GetState() == inferencev1.ModelState_MODEL_STATE_SUGGESTED,
	}
}

func (a *API) models(w http.ResponseWriter, r *http.Request) {
	all := r.URL.Query().Get("show_all") == "true"
	resp, err := a.Inference.ListModels(a.Forward(r), &inferencev1.ListModelsRequest{IncludeAvailable: true, IncludeSuggested: all})
	if err != nil {
		writeStatus(w, err)
		return
	}
	data := []map[string]any{}
	for _, m := range resp.GetModels() {
		data = append(data, modelJSON(m))
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (a *API) model(w http.ResponseWriter, r *http.Request) {
	resp, err := a.Inference.GetModel(a.Forward(r), &inferencev1.GetModelRequest{Id: r.PathValue("id")})
	if err != nil {
		writeStatus(w, err)
		return
	}
	httpguard.WriteJSON(w, http.StatusOK, modelJSON(resp.GetModel()))
}

// readBody reads a request body, answering 413 past the limit the edge set.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := httpguard.ReadBody(r)
	if err != nil {
		writeReadError(w, err, "")
		return nil, false
	}
	return b, true
}

// writeReadError answers a body that could not be read: 413 past the limit, else 400.
func writeReadError(w http.ResponseWriter, err error, param string) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", param, httpguard.TooLargeMessage(tooBig.Limit))
		return
	}
	writeError(w, http.StatusBadRequest, "invalid_request_error", param, "could not read the body: the connection ended before it did")
}

// writeFieldError answers a request refused by openaichat (a *openaichat.FieldError names
// the field).
func writeFieldError(w http.ResponseWriter, err error) {
	var fe *openaichat.FieldError
	if errors.As(err, &fe) {
		writeError(w, http.StatusBadRequest, "invalid_request_error", fe.Param, fe.Message)
		return
	}
	writeError(w, http.StatusBadRequest, "invalid_request_error", "", "the request is not a valid chat completion request")
}

func (a *API) chat(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	// The body is decoded once; a chat that selects MCP providers (either field present,
	// null included) goes to mcpgateway's tool loop.
	raw, err := openaichat.DecodeObject(body)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	_, preset := raw["preset"]
	_, ids := raw["mcp_server_ids"]
	if preset || ids {
		a.toolChat(w, r, raw)
		return
	}
	req, err := openaichat.ParseObject(raw)
	if err == nil {
		err = openaichat.CheckToolChoice(req.Chat)
	}
	if err != nil {
		writeFieldError(w, err)
		return
	}
	// The edge's span of the request names the model, as GUI3's Telemetry reads it (a no-op
	// with tracing off).
	trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("gen_ai.request.model", req.Chat.GetModel()))
	// The engine call ends when the client goes away: r.Context() is cancelled then.
	stream, err := a.Inference.Chat(a.Forward(r), req.Chat)
	if err != nil {
		writeStatus(w, err)
		return
	}
	first, err := stream.Recv()
	if err != nil {
		writeStatus(w, err) // nothing written yet: a proper HTTP error
		return
	}
	// An engine that names no completion gets an id of ours: every response has its own.
	id := first.GetId()
	if id == "" {
		id = openaichat.NewCompletionID()
	}
	if !req.Stream {
		var c openaichat.Completion
		for ch := first; ; {
			ch.Id = id
			c.Add(ch)
			if ch, err = stream.Recv(); err != nil {
				break
			}
		}
		if !errors.Is(err, io.EOF) {
			writeStatus(w, err)
			return
		}
		b, err := c.JSON()
		if err != nil {
			writeStatus(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return
	}
	sse := startSSE(w)
	for ch := first; ; {
		ch.Id = id
		b, err := openaichat.Chunk(ch, req.IncludeUsage)
		if err != nil || !sse.data(b) {
			return // the client left: r.Context() is cancelled, which ends the engine call
		}
		if ch, err = stream.Recv(); err != nil {
			sse.end(err)
			return
		}
	}
}

// sseWriter writes an OpenAI event stream: "data: {json}" events, then "data: [DONE]".
type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
}

func startSSE(w http.ResponseWriter) sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return sseWriter{w: w, flusher: f}
}

// data writes one event; false means the client is gone.
func (s sseWriter) data(b []byte) bool {
	if _, err := io.WriteString(s.w, "data: "+string(b)+"\n\n"); err != nil {
		return false
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return true
}

// end closes the stream after err from upstream (io.EOF: a normal end): an error event when
// it failed mid-way, then [DONE].
func (s sseWriter) end(err error) {
	if !errors.Is(err, io.EOF) {
		msg, _ := json.Marshal(map[string]any{"error": map[string]any{"message": status.Convert(err).Message(), "type": "api_error"}})
		s.data(msg)
	}
	s.data([]byte("[DONE]"))
}

// transcriptionFields are the form fields of a transcription besides the file.
var transcriptionFields = []string{"model", "language", "prompt", "response_format", "temperature"}

// maxFieldBytes caps one form field other than the file.
const maxFieldBytes = 64 << 10

// transcribe reads the multipart form as it arrives: the file goes into one buffer sized from
// Content-Length (no temporary file, no copy as it grows), the body limit applies throughout.
func (a *API) transcribe(w http.ResponseWriter, r *http.Request) { a.speechToText(w, r, false) }

// translate is OpenAI's audio/translations: the audio's speech as English text (the engine's
// model must translate, as whisper does; one that cannot says so).
func (a *API) translate(w http.ResponseWriter, r *http.Request) { a.speechToText(w, r, true) }

// speechToText serves audio/transcriptions, and audio/translations when translate is set.
func (a *API) speechToText(w http.ResponseWriter, r *http.Request, translate bool) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "send multipart/form-data with a file and a model")
		return
	}
	fields := map[string]string{}
	var (
		audio    []byte
		filename string
		haveFile bool
	)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.As(err, new(*http.MaxBytesError)) {
				writeReadError(w, err, "file")
				return
			}
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "the multipart/form-data body is malformed: send a file part and a model field")
			return
		}
		name := part.FormName()
		switch {
		case name == "file":
			if haveFile {
				writeError(w, http.StatusBadRequest, "invalid_request_error", "file", "send one file")
				return
			}
			filename, haveFile = part.FileName(), true
			if audio, err = httpguard.ReadSized(part, r.ContentLength); err != nil {
				writeReadError(w, err, "file")
				return
			}
		case slices.Contains(transcriptionFields, name):
			b, err := httpguard.ReadSized(io.LimitReader(part, maxFieldBytes+1), -1)
			if err != nil {
				writeReadError(w, err, name)
				return
			}
			if len(b) > maxFieldBytes {
				writeError(w, http.StatusBadRequest, "invalid_request_error", name, name+" is longer than 64 KiB")
				return
			}
			fields[name] = string(b)
		default: // a field this route does not read: skipped (the body limit still counts it)
			if _, err := io.Copy(io.Discard, part); err != nil {
				writeReadError(w, err, "")
				return
			}
		}
	}
	if !haveFile {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "file", "file is required: the audio to transcribe (or translate)")
		return
	}
	req := &inferencev1.TranscribeRequest{Model: fields["model"], Audio: audio, Filename: filename,
		Language: fields["language"], Prompt: fields["prompt"], Translate: translate}
	if translate {
		req.Language = "" // a translation's text is English; OpenAI's translations take no language
	}
	if t := fields["temperature"]; t != "" {
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || v < 0 || v > 1 {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "temperature", "temperature must be a number between 0 and 1")
			return
		}
		req.Temperature = &v
	}
	format := fields["response_format"]
	if err := transcription.CheckFormat(format); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "response_format", err.Error())
		return
	}
	resp, err := a.Inference.Transcribe(a.Forward(r), req)
	if err != nil {
		writeStatus(w, err)
		return
	}
	switch format {
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, resp.GetText())
	default:
		httpguard.WriteJSON(w, http.StatusOK, transcription.Body(format, translate, resp))
	}
}

var sizePattern = regexp.MustCompile(`^([0-9]{1,5})x([0-9]{1,5})$`)

func (a *API) images(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		Model          string  `json:"model"`
		Prompt         string  `json:"prompt"`
		N              *int32  `json:"n"`
		Size           string  `json:"size"`
		ResponseFormat string  `json:"response_format"`
		NegativePrompt string  `json:"negative_prompt"`
		Seed           *int64  `json:"seed"`
		Steps          int32   `json:"steps"`
		CfgScale       float64 `json:"cfg_scale"`
	}
	if err := decodeJSON(body, &in); err != nil {
		writeFieldError(w, err)
		return
	}
	if in.ResponseFormat != "" && in.ResponseFormat != "b64_json" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "response_format", "response_format "+strconv.Quote(in.ResponseFormat)+" is not served: use b64_json")
		return
	}
	req := &inferencev1.GenerateImageRequest{Model: in.Model, Prompt: in.Prompt, NegativePrompt: in.NegativePrompt,
		Seed: in.Seed, Steps: in.Steps, CfgScale: in.CfgScale}
	if in.N != nil {
		req.N = *in.N
	}
	if in.Size != "" {
		var ok bool
		if req.Width, req.Height, ok = parseSize(in.Size); !ok {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "size", "size must be WIDTHxHEIGHT, e.g. 512x512")
			return
		}
	}
	resp, err := a.Inference.GenerateImage(a.Forward(r), req)
	if err != nil {
		writeStatus(w, err)
		return
	}
	writeImages(w, resp.GetCreated(), resp.GetImages())
}

// parseSize reads an image size WIDTHxHEIGHT.
func parseSize(s string) (w, h int32, ok bool) {
	m := sizePattern.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	wd, _ := strconv.Atoi(m[1])
	ht, _ := strconv.Atoi(m[2])
	return int32(wd), int32(ht), true
}

// writeImages answers OpenAI's image shape: {"created", "data":[{"b64_json"}…]}.
func writeImages(w http.ResponseWriter, created int64, images [][]byte) {
	data := make([]map[string]any, 0, len(images))
	for _, img := range images {
		data = append(data, map[string]any{"b64_json": base64.StdEncoding.EncodeToString(img)})
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{"created": created, "data": data})
}
