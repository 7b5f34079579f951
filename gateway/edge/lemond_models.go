package edge

// The routes of GUI3's model views that Zest answers from what it knows of a model (its entry
// in the model file, through ModelOptionsService): the files behind it, its runtime context
// size and the command that loads it.

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/gateway/openai"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// modelInfo is a model's entry as ModelOptionsService gives it; false means the answer (404
// for an unknown model, the service's error otherwise) is written.
func (l *lemond) modelInfo(w http.ResponseWriter, r *http.Request, id string) (*inferencev1.GetModelOptionsResponse, bool) {
	resp, err := l.options.GetModelOptions(forwardAuth(r), &inferencev1.GetModelOptionsRequest{Id: id})
	if err != nil {
		openai.WriteStatus(w, err)
		return nil, false
	}
	return resp, true
}

// modelFiles answers GET {prefix}models/{id}/files in lemond's shape ({"model_id","files"}):
// no file, for every model Zest serves. A Zest model is an entry of the model file served by
// an engine, which holds the model's files itself (a built-in model has none at all); an
// unknown model is 404 as lemond answers it.
func (l *lemond) modelFiles(w http.ResponseWriter, r *http.Request) {
	resp, ok := l.modelInfo(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{"model_id": resp.GetId(), "files": []any{}})
}

// modelRuntime answers GET {prefix}models/{id}/runtime, which GUI3 asks for a loaded model's
// context size: Zest loads no model with a context size (an engine runs its models as it was
// started), so ctx_size is -1, lemond's "auto", as resolved_ctx_size of models/{id}/options.
func (l *lemond) modelRuntime(w http.ResponseWriter, r *http.Request) {
	resp, ok := l.modelInfo(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{"model_name": resp.GetId(), "recipe": resp.GetEngine(), "ctx_size": -1})
}

// loadCommand answers POST {prefix}load/command {"model_name",…options} in lemond's shape
// (model_name, recipe, backend, options, args): Zest starts no backend process, so backend is
// "" and args empty; options are the model's entry of the model file (the options sent are
// not applied by a load, which Zest hands to the engine as they are); command is the request
// that loads it (Zest's addition, as load_command of models/{id}/options).
func (l *lemond) loadCommand(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r)
	if !ok {
		return
	}
	var id string
	if json.Unmarshal(body["model_name"], &id) != nil || strings.TrimSpace(id) == "" {
		openai.WriteParamError(w, http.StatusBadRequest, "model_name", "'model_name' is required: the model id, as GET /api/v1/models?show_all=true lists it")
		return
	}
	resp, ok := l.modelInfo(w, r, id)
	if !ok {
		return
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{
		"model_name": resp.GetId(), "recipe": resp.GetEngine(), "backend": "",
		"options": resp.GetOptions().AsMap(), "args": []string{}, "ctx_size_auto_resolved": false,
		"command": l.loadCurl(resp.GetId()),
	})
}

// loadCurl is the curl command that loads model id through this edge.
func (l *lemond) loadCurl(id string) string {
	cmd := "curl -X POST $LEMONADE_BASE_URL/v1/load -H \"Content-Type: application/json\""
	if l.cfg.Keys.API != "" {
		cmd += " -H \"Authorization: Bearer $LEMONADE_API_KEY\""
	}
	body, _ := json.Marshal(map[string]string{"model_name": id})
	return cmd + " -d '" + strings.ReplaceAll(string(body), "'", `'\''`) + "'"
}

// pin answers POST /internal/pin {"model_name" (or "model"), "pinned"} as lemond does
// ({"status":"success","model_name","pinned"}): the inference node keeps the mark, which
// health's all_models_loaded shows. Zest evicts no model, so the mark keeps nothing loaded
// that would not stay loaded anyway (as a pin in lemond with auto_evict off).
func (l *lemond) pin(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r)
	if !ok {
		return
	}
	var name string
	for _, k := range []string{"model", "model_name"} {
		if raw, present := body[k]; present && name == "" {
			_ = json.Unmarshal(raw, &name)
		}
	}
	if strings.TrimSpace(name) == "" {
		openai.WriteParamError(w, http.StatusBadRequest, "model_name", "Parameter 'model' or 'model_name' is required: the model id, as GET /api/v1/models?show_all=true lists it")
		return
	}
	var pinned *bool
	if json.Unmarshal(body["pinned"], &pinned) != nil || pinned == nil {
		openai.WriteParamError(w, http.StatusBadRequest, "pinned", "Parameter 'pinned' is required and must be a boolean")
		return
	}
	resp, err := l.models.Pin(forwardAuth(r), &inferencev1.PinRequest{ModelName: name, Pinned: *pinned})
	if err != nil {
		openai.WriteStatus(w, err)
		return
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{"status": "success", "model_name": resp.GetModelName(), "pinned": resp.GetPinned()})
}
