package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/httpstatus"
	"github.com/zestmcp/zest/lib/openaichat"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// Lemonade's model management routes (docs/api/lemonade.md of lemonade-sdk): POST load,
// unload, pull, delete with {"model_name": …} bodies answered {"status":"success","message"},
// GET stats and GET system-info, all turned into ModelAdminService calls.

// MaxModelBodyBytes caps the JSON body of load, unload, pull and delete: a model name and a
// few options.
const MaxModelBodyBytes = 64 << 10

// registerModels adds the model management routes under prefix.
func (a *API) registerModels(mux *http.ServeMux, prefix string, wrap func(http.Handler) http.Handler) {
	mux.Handle(prefix+"load", wrap(postOnly(a.load)))
	mux.Handle(prefix+"unload", wrap(postOnly(a.unload)))
	mux.Handle(prefix+"pull", wrap(postOnly(a.pull)))
	mux.Handle(prefix+"delete", wrap(postOnly(a.deleteModel)))
	mux.Handle(prefix+"stats", wrap(httpguard.GetOnly(http.HandlerFunc(a.stats))))
	mux.Handle(prefix+"system-info", wrap(httpguard.GetOnly(http.HandlerFunc(a.systemInfo))))
}

// fieldKinds are the JSON kinds of the fields these routes read; others are relayed to a
// Lemonade engine as they are.
var fieldKinds = map[string]string{"model_name": "string", "stream": "boolean", "subscribe": "boolean",
	"pinned": "boolean", "save_options": "boolean", "ctx_size": "number"}

// modelBody reads a model route's JSON object (empty allowed when !needName), checks the
// kinds of the fields it knows, and returns model_name and the other fields.
func modelBody(w http.ResponseWriter, r *http.Request, needName bool) (string, map[string]any, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxModelBodyBytes)
	body, ok := readBody(w, r)
	if !ok {
		return "", nil, false
	}
	fields := map[string]any{}
	if len(strings.TrimSpace(string(body))) > 0 || needName {
		if _, err := openaichat.DecodeObject(body); err != nil {
			writeFieldError(w, err)
			return "", nil, false
		}
		_ = json.Unmarshal(body, &fields) // a valid object, checked above
	}
	for k, want := range fieldKinds {
		v, ok := fields[k]
		if !ok {
			continue
		}
		got := jsonKind(v)
		if got != want {
			writeError(w, http.StatusBadRequest, "invalid_request_error", k, fmt.Sprintf("%s must be a %s, not %s", k, want, got))
			return "", nil, false
		}
	}
	name, _ := fields["model_name"].(string)
	delete(fields, "model_name")
	if needName && strings.TrimSpace(name) == "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "model_name", "model_name is required: the model id, as GET /api/v1/models?show_all=true lists it")
		return "", nil, false
	}
	return name, fields, true
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

// writeModelStatus writes a management error as writeStatus does, naming model_name where
// the refusal is about it; an engine that is down is named as such (503), not as the
// inference service.
func writeModelStatus(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	switch st.Code() {
	case codes.InvalidArgument:
		param := ""
		if strings.HasPrefix(st.Message(), "model_name") {
			param = "model_name"
		}
		writeStatusParam(w, err, param)
	case codes.NotFound:
		writeStatusParam(w, err, "model_name")
	case codes.Unavailable:
		writeError(w, httpstatus.FromCode(st.Code()), "api_error", "", st.Message())
	default:
		writeStatus(w, err)
	}
}

func success(w http.ResponseWriter, msg string, extra ...any) {
	out := map[string]any{"status": "success", "message": msg}
	for i := 0; i+1 < len(extra); i += 2 {
		out[extra[i].(string)] = extra[i+1]
	}
	httpguard.WriteJSON(w, http.StatusOK, out)
}

func (a *API) load(w http.ResponseWriter, r *http.Request) {
	name, opts, ok := modelBody(w, r, true)
	if !ok {
		return
	}
	o, err := structpb.NewStruct(opts)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "the load options are not JSON values: "+err.Error())
		return
	}
	resp, err := a.Models.Load(a.Forward(r), &inferencev1.LoadRequest{ModelName: name, Options: o})
	if err != nil {
		writeModelStatus(w, err)
		return
	}
	success(w, resp.GetMessage())
}

func (a *API) unload(w http.ResponseWriter, r *http.Request) {
	name, _, ok := modelBody(w, r, false)
	if !ok {
		return
	}
	resp, err := a.Models.Unload(a.Forward(r), &inferencev1.UnloadRequest{ModelName: name})
	if err != nil {
		writeModelStatus(w, err)
		return
	}
	names := resp.GetModelNames()
	if names == nil {
		names = []string{}
	}
	success(w, resp.GetMessage(), "model_names", names)
}

func (a *API) deleteModel(w http.ResponseWriter, r *http.Request) {
	name, _, ok := modelBody(w, r, true)
	if !ok {
		return
	}
	resp, err := a.Models.Delete(a.Forward(r), &inferencev1.DeleteRequest{ModelName: name})
	if err != nil {
		writeModelStatus(w, err)
		return
	}
	success(w, resp.GetMessage())
}

// pull downloads a model. stream false (default): one answer when done. stream true: Server-
// Sent Events as lemond sends them (event: progress, then complete or error). stream true with
// subscribe false asks lemond for a server-owned job; Zest keeps no background jobs, so the
// answer comes when the download is over, as the completed job's snapshot.
func (a *API) pull(w http.ResponseWriter, r *http.Request) {
	name, opts, ok := modelBody(w, r, true)
	if !ok {
		return
	}
	streamed, _ := opts["stream"].(bool)
	subscribe, given := opts["subscribe"].(bool)
	if !given {
		subscribe = true
	}
	delete(opts, "stream")
	delete(opts, "subscribe")
	o, err := structpb.NewStruct(opts)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "the pull options are not JSON values: "+err.Error())
		return
	}
	stream, err := a.Models.Pull(a.Forward(r), &inferencev1.PullRequest{ModelName: name, Options: o})
	if err != nil {
		writeModelStatus(w, err)
		return
	}
	first, err := stream.Recv()
	if err != nil {
		writeModelStatus(w, err) // nothing written yet: a proper HTTP error
		return
	}
	if !streamed || !subscribe {
		last := first
		for {
			ev, rerr := stream.Recv()
			if rerr != nil {
				err = rerr
				break
			}
			last = ev
		}
		if !errors.Is(err, io.EOF) {
			writeModelStatus(w, err)
			return
		}
		if !streamed {
			success(w, last.GetMessage())
			return
		}
		httpguard.WriteJSON(w, http.StatusOK, map[string]any{"id": "model:" + name, "type": "model", "model_name": name,
			"status": "completed", "running": false, "file": "", "file_index": last.GetFileIndex(), "total_files": last.GetTotalFiles(),
			"bytes_downloaded": last.GetBytesDownloaded(), "bytes_total": last.GetBytesTotal(), "percent": 100, "complete": true,
			"message": last.GetMessage()})
		return
	}
	sse := startSSE(w)
	for ev := first; ; {
		event, data := "progress", map[string]any{"file": ev.GetFile(), "file_index": ev.GetFileIndex(), "total_files": ev.GetTotalFiles(),
			"bytes_downloaded": ev.GetBytesDownloaded(), "bytes_total": ev.GetBytesTotal(), "percent": ev.GetPercent()}
		if ev.GetMessage() != "" {
			data["message"] = ev.GetMessage()
		}
		if ev.GetComplete() {
			event = "complete"
			delete(data, "file")
			delete(data, "bytes_downloaded")
			delete(data, "bytes_total")
		}
		if !sse.event(event, data) {
			return // the client left: r.Context() is cancelled, which ends the pull
		}
		if ev, err = stream.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				sse.event("error", map[string]any{"error": status.Convert(err).Message()})
			}
			return
		}
	}
}

// event writes one named SSE event; false means the client is gone.
func (s sseWriter) event(name string, data any) bool {
	b, err := json.Marshal(data)
	if err != nil {
		return false
	}
	if _, err := io.WriteString(s.w, "event: "+name+"\ndata: "+string(b)+"\n\n"); err != nil {
		return false
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return true
}

func (a *API) stats(w http.ResponseWriter, r *http.Request) {
	s, err := a.Models.Stats(a.Forward(r), &inferencev1.StatsRequest{})
	if err != nil {
		writeStatus(w, err)
		return
	}
	times := s.GetDecodeTokenTimes()
	if times == nil {
		times = []float64{}
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{
		"time_to_first_token": s.GetTimeToFirstToken(), "tokens_per_second": s.GetTokensPerSecond(),
		"input_tokens": s.GetInputTokens(), "output_tokens": s.GetOutputTokens(), "prompt_tokens": s.GetPromptTokens(),
		"cache_tokens": nil, "decode_token_times": times,
		"request_count_total": s.GetRequestCountTotal(), "input_tokens_total": s.GetInputTokensTotal(),
		"output_tokens_total": s.GetOutputTokensTotal(), "prompt_tokens_total": s.GetPromptTokensTotal(),
	})
}

func (a *API) systemInfo(w http.ResponseWriter, r *http.Request) {
	s, err := a.Models.SystemInfo(a.Forward(r), &inferencev1.SystemInfoRequest{})
	if err != nil {
		writeStatus(w, err)
		return
	}
	recipes := map[string]any{}
	for _, rc := range s.GetRecipes() {
		backends := map[string]any{}
		for _, b := range rc.GetBackends() {
			e := map[string]any{"devices": nonNil(b.GetDevices()), "state": b.GetState(), "message": b.GetMessage(), "action": b.GetAction()}
			if b.GetVersion() != "" {
				e["version"] = b.GetVersion()
			}
			backends[b.GetName()] = e
		}
		recipes[rc.GetName()] = map[string]any{"default_backend": rc.GetDefaultBackend(), "backends": backends}
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{
		"OS Version": s.GetOsVersion(), "Processor": s.GetProcessor(),
		"Physical Memory": fmt.Sprintf("%.1f GB", float64(s.GetPhysicalMemoryBytes())/(1<<30)),
		"devices": map[string]any{"cpu": map[string]any{"name": s.GetProcessor(), "cores": s.GetCpuCores(), "threads": s.GetCpuThreads(),
			"available": true, "family": s.GetCpuFamily()}},
		"recipes": recipes, "version": s.GetVersion(),
	})
}

// LoadedModelsJSON is lemond's health members for the loaded models (all_models_loaded,
// model_loaded, version), for the edge's health route. last_use is in Unix milliseconds, a
// whole number, as lemond sends it (GUI3 reads it as such: seconds showed as "499h uptime");
// the RPC's is in seconds.
func LoadedModelsJSON(resp *inferencev1.LoadedModelsResponse) map[string]any {
	all := []map[string]any{}
	for _, m := range resp.GetModels() {
		all = append(all, map[string]any{"model_name": m.GetModelName(), "checkpoint": m.GetCheckpoint(), "last_use": int64(math.Round(m.GetLastUse() * 1000)),
			"type": m.GetType(), "device": m.GetDevice(), "pinned": m.GetPinned(), "recipe": m.GetRecipe(),
			"backend_url": m.GetBackendUrl(), "labels": nonNil(m.GetLabels()), "recipe_options": map[string]any{}})
	}
	var loaded any
	if resp.GetModelLoaded() != "" {
		loaded = resp.GetModelLoaded()
	}
	return map[string]any{"all_models_loaded": all, "model_loaded": loaded, "version": resp.GetVersion()}
}
