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
	"strings"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

func (e *Engine) model(id string) (*Model, error) {
	m := e.models[id]
	if m == nil {
		return nil, fmt.Errorf("model %q is not served by an OpenAI-compatible engine", id)
	}
	return m, nil
}

// send runs one HTTP request on the first replica that answers: the least busy healthy one
// with a free slot, then the others when the connection fails; when every replica is at its
// bound it waits for the least busy one. The caller closes the body and calls done.
func (e *Engine) send(ctx context.Context, m *Model, build func(base string) (*http.Request, error)) (*http.Response, func(), error) {
	var errs []error
	// try sends on r (holding one of its slots): nil, nil means "try the next replica".
	try := func(r *Replica) (*http.Response, error) {
		resp, err := e.attempt(ctx, m, r, build)
		if err == nil {
			return resp, nil
		}
		r.release()
		if !errors.Is(err, errConnection) {
			return nil, err
		}
		errs = append(errs, err)
		return nil, nil
	}
	cands := m.candidates()
	tried := 0
	for _, r := range cands {
		if !r.tryAcquire() {
			continue
		}
		tried++
		if resp, err := try(r); resp != nil || err != nil {
			return resp, r.release, err
		}
	}
	if tried == 0 { // every replica is at its bound: wait for the least busy one
		r := cands[0]
		if err := r.acquire(ctx); err != nil {
			return nil, nil, fmt.Errorf("%w: %q: %w", ErrNoReplica, m.Cfg.ID, err)
		}
		if resp, err := try(r); resp != nil || err != nil {
			return resp, r.release, err
		}
	}
	return nil, nil, fmt.Errorf("%w: %q: %w", ErrNoReplica, m.Cfg.ID, errors.Join(errs...))
}

// errConnection marks a failure to reach a replica (another replica may do).
var errConnection = errors.New("cannot reach the engine")

// attempt sends one request to replica r.
func (e *Engine) attempt(ctx context.Context, m *Model, r *Replica, build func(base string) (*http.Request, error)) (*http.Response, error) {
	req, err := build(r.BaseURL)
	if err != nil {
		return nil, err
	}
	if m.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.markDown(err)
		e.log.Warn("engine replica failed; trying the next", "model", m.Cfg.ID, "base_url", r.BaseURL, "err", err)
		return nil, fmt.Errorf("%w: %s: %v", errConnection, r.BaseURL, err)
	}
	r.markUp() // it answered: reachable, whatever the status
	if resp.StatusCode < 400 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(b))
	var oe struct {
		Error struct {
			Message string `json:"message"`
			Param   string `json:"param"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &oe) == nil && oe.Error.Message != "" {
		msg = oe.Error.Message
	}
	kind := ErrUpstream
	if resp.StatusCode < 500 {
		kind = ErrUpstreamRequest
	}
	err = &statusError{code: resp.StatusCode, err: fmt.Errorf("%w: %s answered %d: %s", kind, r.BaseURL, resp.StatusCode, msg)}
	if oe.Error.Param != "" {
		return nil, &ParamError{Param: oe.Error.Param, Err: err}
	}
	return nil, err
}

// statusError is an engine's answer of an HTTP error status.
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// ParamError is an engine's refusal that names the request field at fault (OpenAI's
// "param"), so that a relay can name it too.
type ParamError struct {
	Param string
	Err   error
}

func (e *ParamError) Error() string { return e.Err.Error() }
func (e *ParamError) Unwrap() error { return e.Err }

func (e *Engine) listModels(ctx context.Context, m *Model, r *Replica) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", r.BaseURL+"/models", nil)
	if err != nil {
		return false, err
	}
	if m.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return false, fmt.Errorf("GET /models answered %d", resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&list); err != nil {
		return false, fmt.Errorf("GET /models: %w", err)
	}
	for _, d := range list.Data {
		if d.ID == m.Cfg.UpstreamModel {
			return true, nil
		}
	}
	return false, nil
}

// chatBody renders the contract's request as OpenAI JSON for the engine of kind kind:
// enable_thinking becomes chat_template_kwargs.enable_thinking for a Lemonade engine (unless
// the caller's kwargs name it) and is sent to no other kind.
func chatBody(req *inferencev1.ChatRequest, upstream, kind string) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(req)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["model"], m["stream"] = upstream, true
	delete(m, "enable_thinking")
	if req.EnableThinking != nil && kind == KindLemonade {
		kw, _ := m["chat_template_kwargs"].(map[string]any)
		if kw == nil {
			kw = map[string]any{}
		}
		if _, set := kw["enable_thinking"]; !set {
			kw["enable_thinking"] = req.GetEnableThinking()
		}
		m["chat_template_kwargs"] = kw
	}
	if msgs, ok := m["messages"].([]any); ok {
		for _, x := range msgs {
			msg, _ := x.(map[string]any)
			if parts, ok := msg["content_parts"]; ok {
				msg["content"] = parts
				delete(msg, "content_parts")
			}
			if calls, ok := msg["tool_calls"].([]any); ok {
				for _, c := range calls {
					if cm, ok := c.(map[string]any); ok {
						delete(cm, "index")
					}
				}
			}
		}
	}
	return json.Marshal(m)
}

// Chat streams a chat completion from the engine, relaying each chunk as it arrives.
func (e *Engine) Chat(ctx context.Context, req *inferencev1.ChatRequest, send func(*inferencev1.ChatResponse) error) error {
	m, err := e.model(req.GetModel())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	body, err := chatBody(req, m.Cfg.UpstreamModel, m.Cfg.EngineKind)
	if err != nil {
		return err
	}
	resp, done, err := e.postRaw(ctx, m, "/chat/completions", body, true)
	if err != nil {
		return err
	}
	defer done()
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// An engine that ignored "stream": one JSON completion.
		var c chunk
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxCompletionBytes)).Decode(&c); err != nil {
			return fmt.Errorf("%w: the completion is not JSON: %v", ErrUpstream, err)
		}
		return send(c.toResponse(req.GetModel(), true))
	}
	return readEvents(ctx, resp.Body, func(data []byte) (bool, error) {
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return false, fmt.Errorf("%w: a stream chunk is not JSON: %v", ErrUpstream, err)
		}
		if c.Error != nil {
			return false, fmt.Errorf("%w: %s", ErrUpstream, c.Error.Message)
		}
		return false, send(c.toResponse(req.GetModel(), false))
	})
}

// chunk is an OpenAI chat.completion(.chunk).
type chunk struct {
	ID      string `json:"id"`
	Created int64  `json:"created"`
	Choices []struct {
		Delta        message `json:"delta"`
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int32 `json:"prompt_tokens"`
		CompletionTokens int32 `json:"completion_tokens"`
		TotalTokens      int32 `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is llama.cpp's and lemond's thinking; Reasoning is Ollama's.
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
	ToolCalls        []struct {
		Index    int32  `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (c *chunk) toResponse(model string, whole bool) *inferencev1.ChatResponse {
	out := &inferencev1.ChatResponse{Id: c.ID, Model: model, Created: c.Created, Delta: &inferencev1.ChatMessage{}}
	if len(c.Choices) > 0 {
		ch := c.Choices[0]
		m := ch.Delta
		if whole {
			m = ch.Message
		}
		out.Delta.Role, out.Delta.Content, out.FinishReason = m.Role, m.Content, ch.FinishReason
		out.Delta.ReasoningContent = m.ReasoningContent + m.Reasoning
		for i, tc := range m.ToolCalls {
			idx := tc.Index
			if whole {
				idx = int32(i)
			}
			out.Delta.ToolCalls = append(out.Delta.ToolCalls, &inferencev1.ToolCall{Index: idx, Id: tc.ID, Type: tc.Type,
				Function: &inferencev1.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
	}
	if c.Usage != nil {
		out.Usage = &inferencev1.Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens, TotalTokens: c.Usage.TotalTokens}
	}
	return out
}

// Transcribe sends audio to the engine's /audio/transcriptions, or /audio/translations for a
// translation.
func (e *Engine) Transcribe(ctx context.Context, req *inferencev1.TranscribeRequest) (*inferencev1.TranscribeResponse, error) {
	m, err := e.model(req.GetModel())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	name := req.GetFilename()
	if name == "" {
		name = "audio.wav"
	}
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(req.GetAudio())
	_ = mw.WriteField("model", m.Cfg.UpstreamModel)
	_ = mw.WriteField("response_format", "json")
	for k, v := range map[string]string{"language": req.GetLanguage(), "prompt": req.GetPrompt()} {
		if v != "" {
			_ = mw.WriteField(k, v)
		}
	}
	if req.Temperature != nil {
		_ = mw.WriteField("temperature", fmt.Sprint(req.GetTemperature()))
	}
	_ = mw.Close()
	resp, done, err := e.send(ctx, m, func(base string) (*http.Request, error) {
		path := "/audio/transcriptions"
		if req.GetTranslate() {
			path = "/audio/translations"
		}
		r, err := http.NewRequestWithContext(ctx, "POST", base+path, bytes.NewReader(body.Bytes()))
		if err == nil {
			r.Header.Set("Content-Type", mw.FormDataContentType())
		}
		return r, err
	})
	var st *statusError
	if req.GetTranslate() && errors.As(err, &st) && (st.code == http.StatusNotFound || st.code == http.StatusMethodNotAllowed) {
		return nil, fmt.Errorf("%w: model %q cannot translate: its engine serves no /audio/translations (it answered %d); use audio/transcriptions, or a model whose engine translates to English (whisper does)",
			ErrUpstreamRequest, req.GetModel(), st.code)
	}
	if err != nil {
		return nil, err
	}
	defer done()
	defer resp.Body.Close()
	var out struct {
		Text     string  `json:"text"`
		Language string  `json:"language"`
		Duration float64 `json:"duration"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%w: the transcription is not JSON: %v", ErrUpstream, err)
	}
	return &inferencev1.TranscribeResponse{Text: out.Text, Language: out.Language, DurationSeconds: out.Duration}, nil
}

// GenerateImage asks the engine's /images/generations for base64 PNGs.
func (e *Engine) GenerateImage(ctx context.Context, req *inferencev1.GenerateImageRequest) (*inferencev1.GenerateImageResponse, error) {
	m, err := e.model(req.GetModel())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	in := map[string]any{"model": m.Cfg.UpstreamModel, "prompt": req.GetPrompt(), "response_format": "b64_json"}
	if req.GetN() > 0 {
		in["n"] = req.GetN()
	}
	if req.GetWidth() > 0 && req.GetHeight() > 0 {
		in["size"] = fmt.Sprintf("%dx%d", req.GetWidth(), req.GetHeight())
	}
	if req.Seed != nil {
		in["seed"] = req.GetSeed()
	}
	if req.GetNegativePrompt() != "" {
		in["negative_prompt"] = req.GetNegativePrompt()
	}
	body, _ := json.Marshal(in)
	resp, done, err := e.send(ctx, m, func(base string) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, "POST", base+"/images/generations", bytes.NewReader(body))
		if err == nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, err
	})
	if err != nil {
		return nil, err
	}
	defer done()
	defer resp.Body.Close()
	var out struct {
		Created int64 `json:"created"`
		Data    []struct {
			B64JSON string `json:"b64_json"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%w: the image answer is not JSON: %v", ErrUpstream, err)
	}
	res := &inferencev1.GenerateImageResponse{Created: out.Created}
	for _, d := range out.Data {
		b, err := base64.StdEncoding.DecodeString(d.B64JSON)
		if err != nil {
			return nil, fmt.Errorf("%w: an image is not base64: %v", ErrUpstream, err)
		}
		res.Images = append(res.Images, b)
	}
	return res, nil
}
