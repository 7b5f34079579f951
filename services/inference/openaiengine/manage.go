package openaiengine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Model management (load, unload, pull, delete) on the engines that have it, chosen by the
// model file's engine_kind: a Lemonade server (lemond) answers its own /load, /unload, /pull
// and /delete next to its OpenAI routes; Ollama has /api/pull and /api/delete at its root and
// loads or unloads a model through keep_alive; any other OpenAI-compatible server has none.

// Engine kinds of the model file.
const (
	KindOpenAI   = "openai"
	KindLemonade = "lemonade"
	KindOllama   = "ollama"
)

// ErrNoManagement means the model's engine has no model management: the operation is done
// at the engine itself.
var ErrNoManagement = errors.New("the engine has no model management")

// Management operations.
const (
	OpLoad   = "load"
	OpUnload = "unload"
	OpPull   = "pull"
	OpDelete = "delete"
)

// Progress is one download progress event of a pull, in Lemonade's terms.
type Progress struct {
	File            string
	FileIndex       int
	TotalFiles      int
	BytesDownloaded int64
	BytesTotal      int64
	Percent         float64
	Message         string
}

// maxManageLine caps one line (SSE or NDJSON) of an engine's pull progress, and
// maxManageBody an engine's whole answer to a management call that is not a stream.
const (
	maxManageLine = 64 << 10
	maxManageBody = 1 << 20
)

// Kind returns the engine kind of model id ("" when the engine does not serve it).
func (e *Engine) Kind(id string) string {
	if m := e.models[id]; m != nil {
		return m.Cfg.EngineKind
	}
	return ""
}

// Manage runs op (OpLoad, OpUnload, OpPull, OpDelete) for model id on every replica of its
// engine, in configuration order. options are Lemonade's extra fields, relayed to a Lemonade
// engine; progress (may be nil) receives a pull's progress events. A replica that cannot be
// reached fails the call with ErrNoReplica; an engine's refusal is ErrUpstreamRequest (4xx)
// or ErrUpstream (5xx) with its message.
func (e *Engine) Manage(ctx context.Context, id, op string, options map[string]any, progress func(Progress) error) (string, error) {
	m, err := e.model(id)
	if err != nil {
		return "", err
	}
	switch m.Cfg.EngineKind {
	case KindLemonade, KindOllama:
	default:
		return "", fmt.Errorf("%w: model %q is served by an OpenAI-compatible server at %s, which has no model management: %s it there, or set engine_kind: lemonade or ollama in the model file if the server is one",
			ErrNoManagement, id, strings.Join(m.Cfg.BaseURLs, ", "), op)
	}
	var msg string
	for _, r := range m.Replicas {
		if m.Cfg.EngineKind == KindLemonade {
			msg, err = e.lemonade(ctx, m, r, op, options, progress)
		} else {
			msg, err = e.ollama(ctx, m, r, op, progress)
		}
		if err != nil {
			return "", err
		}
		// The prober learns the new state now rather than at its next tick.
		e.probe(ctx, m, r)
	}
	return msg, nil
}

// manageCall sends one management request to replica r and returns the answer when it is a
// success (2xx); a refusal is read as Lemonade's {"status":"error","message"}, {"error":…}
// or OpenAI's error object.
func (e *Engine) manageCall(ctx context.Context, m *Model, r *Replica, method, url string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if m.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.markDown(err)
		return nil, fmt.Errorf("%w: model %q: its %s engine at %s cannot be reached: %v", ErrNoReplica, m.Cfg.ID, m.Cfg.EngineKind, r.BaseURL, err)
	}
	r.markUp()
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := errorText(raw)
	kind := ErrUpstream
	if resp.StatusCode < 500 {
		kind = ErrUpstreamRequest
	}
	return nil, fmt.Errorf("%w: %s answered %d to %s: %s", kind, r.BaseURL, resp.StatusCode, strings.TrimPrefix(url, r.BaseURL), msg)
}

// errorText finds the message of an engine's error body in its known shapes.
func errorText(raw []byte) string {
	var v struct {
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &v) == nil {
		var s string
		var o struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case json.Unmarshal(v.Error, &o) == nil && o.Message != "":
			return o.Message
		case v.Message != "":
			return v.Message
		}
	}
	return strings.TrimSpace(string(raw))
}

// lemonade relays op to lemond at r: POST {base}/{op} with Lemonade's body. A pull with
// progress asks for lemond's event stream (stream: true) and relays each progress event.
func (e *Engine) lemonade(ctx context.Context, m *Model, r *Replica, op string, options map[string]any, progress func(Progress) error) (string, error) {
	body := map[string]any{}
	for k, v := range options {
		body[k] = v
	}
	body["model_name"] = m.Cfg.UpstreamModel
	stream := op == OpPull && progress != nil
	if op == OpPull {
		body["stream"] = stream
		delete(body, "subscribe") // Zest keeps the download in this call: no server-owned job
	}
	resp, err := e.manageCall(ctx, m, r, http.MethodPost, r.BaseURL+"/"+op, body)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if !stream || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxManageBody))
		if err != nil {
			return "", fmt.Errorf("%w: %s: reading the answer to /%s: %v", ErrUpstream, r.BaseURL, op, err)
		}
		var v struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &v)
		if v.Status == "error" {
			return "", fmt.Errorf("%w: %s refused /%s: %s", ErrUpstreamRequest, r.BaseURL, op, v.Message)
		}
		return v.Message, nil
	}
	// event: progress|complete|error, then data: {json}.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4096), maxManageLine)
	event := "progress"
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event:"); ok {
			event = strings.TrimSpace(ev)
			continue
		}
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		var p struct {
			File            string  `json:"file"`
			FileIndex       int     `json:"file_index"`
			TotalFiles      int     `json:"total_files"`
			BytesDownloaded int64   `json:"bytes_downloaded"`
			BytesTotal      int64   `json:"bytes_total"`
			Percent         float64 `json:"percent"`
			Error           string  `json:"error"`
			Message         string  `json:"message"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(data)), &p); err != nil {
			return "", fmt.Errorf("%w: %s: a pull event is not JSON: %v", ErrUpstream, r.BaseURL, err)
		}
		switch event {
		case "error":
			return "", fmt.Errorf("%w: %s: pull failed: %s", ErrUpstream, r.BaseURL, cmpOr(p.Error, p.Message))
		case "complete":
			return "Installed model: " + m.Cfg.ID, nil
		}
		if err := progress(Progress{File: p.File, FileIndex: p.FileIndex, TotalFiles: p.TotalFiles,
			BytesDownloaded: p.BytesDownloaded, BytesTotal: p.BytesTotal, Percent: p.Percent, Message: p.Message}); err != nil {
			return "", err
		}
		event = "progress"
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%w: %s: the pull stream broke: %v", ErrUpstream, r.BaseURL, err)
	}
	return "", fmt.Errorf("%w: %s: the pull stream ended without a complete event", ErrUpstream, r.BaseURL)
}

// ollamaRoot is the server root of an Ollama base URL (its OpenAI routes are under /v1).
func ollamaRoot(base string) string { return strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1") }

// ollama runs op on Ollama at r: load and unload are a generate request with no prompt and
// keep_alive -1 (keep it loaded) or 0 (unload now); pull streams /api/pull's NDJSON status
// lines; delete is DELETE /api/delete.
func (e *Engine) ollama(ctx context.Context, m *Model, r *Replica, op string, progress func(Progress) error) (string, error) {
	root, name := ollamaRoot(r.BaseURL), m.Cfg.UpstreamModel
	switch op {
	case OpLoad, OpUnload:
		keep := -1
		if op == OpUnload {
			keep = 0
		}
		resp, err := e.manageCall(ctx, m, r, http.MethodPost, root+"/api/generate", map[string]any{"model": name, "keep_alive": keep, "stream": false})
		if err != nil {
			return "", err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxManageBody))
		resp.Body.Close()
		if op == OpLoad {
			return "Loaded model: " + m.Cfg.ID, nil
		}
		return "Model unloaded successfully", nil
	case OpDelete:
		resp, err := e.manageCall(ctx, m, r, http.MethodDelete, root+"/api/delete", map[string]any{"model": name})
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		return "Deleted model: " + m.Cfg.ID, nil
	}
	resp, err := e.manageCall(ctx, m, r, http.MethodPost, root+"/api/pull", map[string]any{"model": name, "stream": true})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4096), maxManageLine)
	files := map[string]int{}
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var p struct {
			Status    string `json:"status"`
			Digest    string `json:"digest"`
			Total     int64  `json:"total"`
			Completed int64  `json:"completed"`
			Error     string `json:"error"`
		}
		if err := json.Unmarshal(line, &p); err != nil {
			return "", fmt.Errorf("%w: %s: a pull status line is not JSON: %v", ErrUpstream, root, err)
		}
		if p.Error != "" {
			return "", fmt.Errorf("%w: %s: pull failed: %s", ErrUpstreamRequest, root, p.Error)
		}
		if p.Status == "success" {
			return "Installed model: " + m.Cfg.ID, nil
		}
		if progress == nil {
			continue
		}
		ev := Progress{Message: p.Status, File: p.Digest, BytesDownloaded: p.Completed, BytesTotal: p.Total}
		if p.Digest != "" {
			if _, ok := files[p.Digest]; !ok {
				files[p.Digest] = len(files) + 1
			}
			ev.FileIndex, ev.TotalFiles = files[p.Digest], len(files)
		}
		if p.Total > 0 {
			ev.Percent = float64(p.Completed) * 100 / float64(p.Total)
		}
		if err := progress(ev); err != nil {
			return "", err
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%w: %s: the pull stream broke: %v", ErrUpstream, root, err)
	}
	return "", fmt.Errorf("%w: %s: the pull stream ended without success", ErrUpstream, root)
}

// loadedAt asks a Lemonade or Ollama replica which models it holds in memory (lemond's
// health all_models_loaded, Ollama's /api/ps): their /models lists downloaded models, not
// loaded ones. ok is false for other engines, whose /models is all there is.
func (e *Engine) loadedAt(ctx context.Context, m *Model, r *Replica) (loaded, ok bool) {
	var url string
	switch m.Cfg.EngineKind {
	case KindLemonade:
		url = r.BaseURL + "/health"
	case KindOllama:
		url = ollamaRoot(r.BaseURL) + "/api/ps"
	default:
		return false, false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, false
	}
	if m.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	var v struct {
		All []struct {
			Name string `json:"model_name"`
		} `json:"all_models_loaded"`
		Models []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(io.LimitReader(resp.Body, maxManageBody)).Decode(&v) != nil {
		return false, false
	}
	for _, a := range v.All {
		if a.Name == m.Cfg.UpstreamModel {
			return true, true
		}
	}
	for _, o := range v.Models {
		if o.Name == m.Cfg.UpstreamModel || o.Model == m.Cfg.UpstreamModel {
			return true, true
		}
	}
	return false, true
}

// BaseURL returns the first healthy replica's URL of model id that holds it loaded, else the
// first replica's.
func (e *Engine) BaseURL(id string) string {
	m := e.models[id]
	if m == nil || len(m.Replicas) == 0 {
		return ""
	}
	for _, r := range m.Replicas {
		r.mu.Lock()
		ok := r.healthy && r.listed
		r.mu.Unlock()
		if ok {
			return r.BaseURL
		}
	}
	return m.Replicas[0].BaseURL
}

// UpstreamModel is model id's name at its engine.
func (e *Engine) UpstreamModel(id string) string {
	if m := e.models[id]; m != nil {
		return m.Cfg.UpstreamModel
	}
	return ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
