package openai

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/jsonerr"
	"github.com/zestmcp/zest/lib/openaichat"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// Limits of the text routes (the body limit is the edge's, answered with 413).
const (
	// MaxTextInputs caps the texts of one embeddings request and the prompts of one completion.
	MaxTextInputs = 2048
	// MaxStops caps the stop sequences of a completion, as OpenAI does.
	MaxStops = 4
)

// registerText adds the text routes besides chat: embeddings, legacy completions and the
// Responses API, served by TextService.
func (a *API) registerText(mux *http.ServeMux, prefix string, wrap func(http.Handler) http.Handler) {
	mux.Handle(prefix+"embeddings", wrap(postOnly(a.embeddings)))
	mux.Handle(prefix+"completions", wrap(postOnly(a.completions)))
	mux.Handle(prefix+"responses", wrap(postOnly(a.responses)))
}

func fieldError(param, format string, args ...any) error {
	return &openaichat.FieldError{Param: param, Message: fmt.Sprintf(format, args...)}
}

func mustBeErr(param, want string, v any) error {
	return fieldError(param, "%s must be %s, not %s", param, want, jsonerr.KindOf(v))
}

// presentField returns raw[key] unless it is absent or null (OpenAI clients send null for unset).
func presentField(raw map[string]any, key string) (any, bool) {
	v, ok := raw[key]
	return v, ok && v != nil
}

// requiredModel reads "model", which every text route needs.
func requiredModel(raw map[string]any) (string, error) {
	v, ok := presentField(raw, "model")
	if !ok {
		return "", fieldError("model", "model is required: GET /api/v1/models lists the models")
	}
	s, isStr := v.(string)
	if !isStr {
		return "", mustBeErr("model", "a string", v)
	}
	if s == "" {
		return "", fieldError("model", "model must not be empty: GET /api/v1/models lists the models")
	}
	return s, nil
}

// texts reads a required field that is a string or an array of 1 to MaxTextInputs strings;
// token arrays (numbers) are refused in words that say what to send.
func texts(raw map[string]any, key string) ([]string, error) {
	v, ok := presentField(raw, key)
	if !ok {
		return nil, fieldError(key, "%s is required: a string or an array of strings", key)
	}
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case []any:
		if len(x) == 0 || len(x) > MaxTextInputs {
			return nil, fieldError(key, "%s holds %d items: send 1 to %d strings", key, len(x), MaxTextInputs)
		}
		out := make([]string, len(x))
		for i, item := range x {
			switch s := item.(type) {
			case string:
				out[i] = s
			case json.Number, float64, []any:
				return nil, fieldError(key, "%s holds token ids: tokens are not served, send the text as a string or an array of strings", key)
			default:
				return nil, mustBeErr(fmt.Sprintf("%s[%d]", key, i), "a string", item)
			}
		}
		return out, nil
	}
	return nil, mustBeErr(key, "a string or an array of strings", v)
}

func numberField(raw map[string]any, key string, lo, hi float64) (*float64, error) {
	v, ok := presentField(raw, key)
	if !ok {
		return nil, nil
	}
	var f float64
	switch n := v.(type) {
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return nil, fieldError(key, "%s must be a number, not %s", key, n)
		}
	case float64:
		f = n
	default:
		return nil, mustBeErr(key, "a number", v)
	}
	if math.IsNaN(f) || f < lo || f > hi {
		return nil, fieldError(key, "%s must be between %g and %g, not %g", key, lo, hi, f)
	}
	return &f, nil
}

func integerField(raw map[string]any, key string, lo, hi int64) (*int64, error) {
	v, ok := presentField(raw, key)
	if !ok {
		return nil, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return nil, mustBeErr(key, "an integer", v)
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
			return nil, fieldError(key, "%s must be an integer, not %s", key, n)
		}
		i = int64(f)
	}
	if i < lo || i > hi {
		return nil, fieldError(key, "%s must be between %d and %d, not %d", key, lo, hi, i)
	}
	return &i, nil
}

func int32Field(raw map[string]any, key string, lo, hi int64) (*int32, error) {
	i, err := integerField(raw, key, lo, hi)
	if i == nil || err != nil {
		return nil, err
	}
	v := int32(*i)
	return &v, nil
}

func boolField(raw map[string]any, key string) (bool, error) {
	v, ok := presentField(raw, key)
	if !ok {
		return false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, mustBeErr(key, "true or false", v)
	}
	return b, nil
}

func stringField(raw map[string]any, key string) (string, error) {
	v, ok := presentField(raw, key)
	if !ok {
		return "", nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", mustBeErr(key, "a string", v)
	}
	return s, nil
}

// decodeText reads a body into a JSON object, answering 413/400 itself; nil means answered.
func decodeText(w http.ResponseWriter, r *http.Request) map[string]any {
	body, ok := readBody(w, r)
	if !ok {
		return nil
	}
	raw, err := openaichat.DecodeObject(body)
	if err != nil {
		writeFieldError(w, err)
		return nil
	}
	return raw
}

// newID returns prefix and 24 random hex digits, like OpenAI's ids.
func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func (a *API) embeddings(w http.ResponseWriter, r *http.Request) {
	raw := decodeText(w, r)
	if raw == nil {
		return
	}
	req := &inferencev1.EmbeddingsRequest{}
	var err error
	if req.Model, err = requiredModel(raw); err != nil {
		writeFieldError(w, err)
		return
	}
	if req.Input, err = texts(raw, "input"); err != nil {
		writeFieldError(w, err)
		return
	}
	for i, s := range req.Input {
		if s == "" {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "input", fmt.Sprintf("input[%d] is empty: send text to embed", i))
			return
		}
	}
	format, err := stringField(raw, "encoding_format")
	if err == nil && format != "" && format != "float" && format != "base64" {
		err = fieldError("encoding_format", "encoding_format %q is not served: use float or base64", format)
	}
	if err != nil {
		writeFieldError(w, err)
		return
	}
	dims, err := int32Field(raw, "dimensions", 1, math.MaxInt32)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	if dims != nil {
		req.Dimensions = *dims
	}
	resp, err := a.Text.Embeddings(a.Forward(r), req)
	if err != nil {
		writeStatus(w, err)
		return
	}
	data := make([]map[string]any, len(resp.GetData()))
	for i, e := range resp.GetData() {
		var vec any = e.GetVector()
		if format == "base64" { // OpenAI's: the float32s, little-endian
			b := make([]byte, 4*len(e.GetVector()))
			for j, f := range e.GetVector() {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(f))
			}
			vec = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": vec}
	}
	u := resp.GetUsage()
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]any{"prompt_tokens": u.GetPromptTokens(), "total_tokens": u.GetTotalTokens()}})
}

// completionsRequest reads a legacy completion body; stream and include_usage say how to answer.
func completionsRequest(raw map[string]any) (req *inferencev1.CompletionsRequest, stream, includeUsage bool, err error) {
	req = &inferencev1.CompletionsRequest{}
	if req.Model, err = requiredModel(raw); err != nil {
		return
	}
	if req.Prompt, err = texts(raw, "prompt"); err != nil {
		return
	}
	if req.MaxTokens, err = int32Field(raw, "max_tokens", 1, math.MaxInt32); err != nil {
		return
	}
	if req.Temperature, err = numberField(raw, "temperature", 0, 2); err != nil {
		return
	}
	if req.TopP, err = numberField(raw, "top_p", 0, 1); err != nil {
		return
	}
	if req.Seed, err = integerField(raw, "seed", math.MinInt64, math.MaxInt64); err != nil {
		return
	}
	if n, nerr := integerField(raw, "n", 1, 1); nerr != nil {
		return nil, false, false, fieldError("n", "n must be 1: one completion per prompt is served")
	} else if n != nil && *n != 1 {
		return nil, false, false, fieldError("n", "n must be 1")
	}
	if echo, eerr := boolField(raw, "echo"); eerr != nil || echo {
		if eerr == nil {
			eerr = fieldError("echo", "echo is not served: the prompt is not repeated in the completion")
		}
		return nil, false, false, eerr
	}
	if v, ok := presentField(raw, "stop"); ok {
		switch x := v.(type) {
		case string:
			req.Stop = []string{x}
		case []any:
			if len(x) > MaxStops {
				return nil, false, false, fieldError("stop", "stop holds %d sequences: send at most %d", len(x), MaxStops)
			}
			for i, s := range x {
				str, isStr := s.(string)
				if !isStr {
					return nil, false, false, mustBeErr(fmt.Sprintf("stop[%d]", i), "a string", s)
				}
				req.Stop = append(req.Stop, str)
			}
		default:
			return nil, false, false, mustBeErr("stop", "a string or an array of strings", v)
		}
	}
	if stream, err = boolField(raw, "stream"); err != nil {
		return
	}
	if v, ok := presentField(raw, "stream_options"); ok {
		o, isObj := v.(map[string]any)
		if !isObj {
			return nil, false, false, mustBeErr("stream_options", "an object", v)
		}
		if includeUsage, err = boolField(o, "include_usage"); err != nil {
			return nil, false, false, mustBeErr("stream_options.include_usage", "true or false", o["include_usage"])
		}
	}
	return req, stream, includeUsage, nil
}

func completionChoices(cs []*inferencev1.CompletionChoice) []map[string]any {
	out := make([]map[string]any, 0, len(cs))
	for _, c := range cs {
		var finish any
		if c.GetFinishReason() != "" {
			finish = c.GetFinishReason()
		}
		out = append(out, map[string]any{"index": c.GetIndex(), "text": c.GetText(), "finish_reason": finish, "logprobs": nil})
	}
	return out
}

func usageJSON(u *inferencev1.Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.GetPromptTokens(), "completion_tokens": u.GetCompletionTokens(), "total_tokens": u.GetTotalTokens()}
}

func (a *API) completions(w http.ResponseWriter, r *http.Request) {
	raw := decodeText(w, r)
	if raw == nil {
		return
	}
	req, streamed, includeUsage, err := completionsRequest(raw)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	stream, err := a.Text.Completions(a.Forward(r), req)
	if err != nil {
		writeStatus(w, err)
		return
	}
	first, err := stream.Recv()
	if err != nil {
		writeStatus(w, err) // nothing written yet: a proper HTTP error
		return
	}
	id := first.GetId()
	if id == "" {
		id = newID("cmpl-")
	}
	created := first.GetCreated()
	if created == 0 {
		created = time.Now().Unix()
	}
	obj := func() map[string]any {
		return map[string]any{"id": id, "object": "text_completion", "created": created, "model": req.GetModel()}
	}
	if !streamed {
		text := map[int32]string{}
		finish := map[int32]string{}
		var usage *inferencev1.Usage
		for ch := first; ; {
			for _, c := range ch.GetChoices() {
				text[c.GetIndex()] += c.GetText()
				if c.GetFinishReason() != "" {
					finish[c.GetIndex()] = c.GetFinishReason()
				}
			}
			if ch.GetUsage() != nil {
				usage = ch.GetUsage()
			}
			if ch, err = stream.Recv(); err != nil {
				break
			}
		}
		if !errors.Is(err, io.EOF) {
			writeStatus(w, err)
			return
		}
		var choices []*inferencev1.CompletionChoice
		for i := range req.GetPrompt() {
			choices = append(choices, &inferencev1.CompletionChoice{Index: int32(i), Text: text[int32(i)], FinishReason: finish[int32(i)]})
		}
		o := obj()
		o["choices"], o["usage"] = completionChoices(choices), usageJSON(usage)
		httpguard.WriteJSON(w, http.StatusOK, o)
		return
	}
	sse := startSSE(w)
	for ch := first; ; {
		o := obj()
		o["choices"] = completionChoices(ch.GetChoices())
		send := len(ch.GetChoices()) > 0
		if ch.GetUsage() != nil && includeUsage {
			o["usage"], send = usageJSON(ch.GetUsage()), true
		}
		if send {
			b, err := json.Marshal(o)
			if err != nil || !sse.data(b) {
				return // the client left: r.Context() is cancelled, which ends the engine call
			}
		}
		if ch, err = stream.Recv(); err != nil {
			sse.end(err)
			return
		}
	}
}
