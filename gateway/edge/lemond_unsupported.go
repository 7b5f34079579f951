package edge

// lemond's routes for what Zest does not do: install backends and cloud providers, search
// model registries, register model definitions, run jobs, upscale images, transcribe live
// audio. Each answers as lemond answers a feature it cannot offer (its registry search when
// offline: 400 {"error":{"message","type":"invalid_request_error","code"}}), with a message
// GUI3 shows (it reads error.message) that says what Zest does instead. The listing routes
// answer what is true: no jobs.

import (
	"encoding/json"
	"net/http"

	"github.com/coder/websocket"
	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/gateway/openai"
)

// UnsupportedCode is the error code of a lemond feature Zest does not have.
const UnsupportedCode = "not_in_zest"

// What Zest does instead of each feature, said once.
const (
	modelFileHint = "each Zest model is an entry of the inference node's model file (ZEST_MODELS_FILE: id, base_urls, " +
		"api_key as a ${VARIABLE}), served by the engine at base_urls; edit the file and restart the inference node"
	noBackends = "Zest installs no backends: an engine is an OpenAI-compatible server you run yourself (llama-server, " +
		"vLLM, Ollama, Lemonade) and name in the model file; " + modelFileHint
	noCloud = "Zest has no cloud providers to add or remove here: a hosted OpenAI-compatible API is a model of the " +
		"model file like any engine (ZEST_MODELS_FILE: id, base_urls, api_key as a ${VARIABLE} of the inference " +
		"node's environment); edit the file and restart the inference node"
	noRegistry = "Zest does not search model registries: pull a model by name with POST /api/v1/pull where its engine " +
		"can (Lemonade, Ollama), or add one to the model file"
	noRegister = "Zest does not register model definitions: " + modelFileHint
	noJobs     = "Zest runs no jobs: call the routes a job's steps would call (chat/completions, images/generations, " +
		"audio/speech…) one by one"
	noUpscale  = "Zest has no image upscaling: no engine of the model file serves images/upscale"
	noRealtime = "Zest has no live transcription (/v1/realtime): send a recording to POST /api/v1/audio/transcriptions"
)

// unsupported answers a lemond feature Zest does not have: 400 with msg, as lemond answers
// one that is unavailable.
func unsupported(msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		httpguard.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
			"message": msg, "type": "invalid_request_error", "param": nil, "code": UnsupportedCode}})
	}
}

// install answers POST {prefix}install: {"backend":"cloud",…} is GUI3's Add cloud provider,
// {"recipe","backend"} a backend install.
func install(w http.ResponseWriter, r *http.Request) {
	installOrUninstall(w, r, noCloud, noBackends)
}

// uninstall answers POST {prefix}uninstall the same way (GUI3's Uninstall of a provider or a
// backend).
func uninstall(w http.ResponseWriter, r *http.Request) {
	installOrUninstall(w, r, noCloud, "Zest installs no backends, so there is none to uninstall: "+modelFileHint)
}

func installOrUninstall(w http.ResponseWriter, r *http.Request, cloud, backend string) {
	body, ok := readObject(w, r)
	if !ok {
		return
	}
	var b string
	_ = json.Unmarshal(body["backend"], &b)
	if b == "cloud" {
		unsupported(cloud)(w, r)
		return
	}
	unsupported(backend)(w, r)
}

// jobs answers GET {prefix}jobs in lemond's shape ({"jobs":[…]}): Zest runs none. POST (create
// one) is refused.
func jobs(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		httpguard.WriteJSON(w, http.StatusOK, map[string]any{"jobs": []any{}})
	case http.MethodPost:
		unsupported(noJobs)(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		openai.WriteError(w, http.StatusMethodNotAllowed, "Method Not Allowed. Use GET or POST for this endpoint")
	}
}

// job answers {prefix}jobs/{id} and its actions as lemond answers an id it does not know: 404.
func job(w http.ResponseWriter, r *http.Request) {
	openai.WriteParamError(w, http.StatusNotFound, "id", "Job not found: "+r.PathValue("id")+" (Zest runs no jobs: GET jobs is always empty)")
}

// realtime answers the /v1/realtime WebSocket (GUI3's live microphone): after the key check it
// sends OpenAI's realtime error event, which GUI3 shows, and closes normally, so that GUI3
// shows that message rather than a failed connection.
func (l *lemond) realtime(w http.ResponseWriter, r *http.Request) {
	c, slot := l.accept(w, r, false)
	if c == nil {
		return
	}
	defer slot.release()
	defer c.CloseNow()
	if writeWS(r.Context(), c, wsError(noRealtime)) != nil {
		return
	}
	c.Close(websocket.StatusNormalClosure, "live transcription is not served")
}

// registerUnsupported adds these routes under each prefix, each wrapped by api (small: with
// the settings' body bound, for those that read their body), but the realtime WebSocket,
// which checks the key itself.
func (l *lemond) registerUnsupported(mux *http.ServeMux, api, small func(http.HandlerFunc) http.Handler, cors func(http.Handler) http.Handler) {
	for _, p := range Prefixes {
		mux.Handle(p+"install", small(post(install)))
		mux.Handle(p+"install/dry-run", small(post(install)))
		mux.Handle(p+"uninstall", small(post(uninstall)))
		mux.Handle(p+"cloud/auth", api(post(unsupported(noCloud))))
		mux.Handle("DELETE "+p+"cloud/auth/{provider}", api(unsupported(noCloud)))
		mux.Handle(p+"pull/variants", api(httpguard.GetOnly(unsupported(noRegistry)).ServeHTTP))
		mux.Handle(p+"registry/search", api(httpguard.GetOnly(unsupported(noRegistry)).ServeHTTP))
		mux.Handle(p+"models/register", api(post(unsupported(noRegister))))
		mux.Handle(p+"jobs", api(jobs))
		mux.Handle(p+"jobs/{id}", api(job))
		mux.Handle(p+"jobs/{id}/{action}", api(post(job)))
		mux.Handle(p+"images/upscale", api(post(unsupported(noUpscale))))
		mux.Handle(p+"realtime", cors(http.HandlerFunc(l.realtime)))
	}
}
