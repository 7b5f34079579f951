package edge

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/gateway/openai"
	"github.com/zestmcp/zest/lib/keyauth"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// forwardAuth passes the caller's Authorization header on to the service called.
func forwardAuth(r *http.Request) context.Context {
	ctx := r.Context()
	if a := r.Header.Get("Authorization"); keyauth.BearerToken(a) != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", a)
	}
	return ctx
}

// health answers GET {prefix}health with the gRPC health of every service behind the edge.
func (e *Edge) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	services := map[string]string{}
	ok := true
	names := make([]string, 0, len(e.backend))
	for n := range e.backend {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		resp, err := grpc_health_v1.NewHealthClient(e.backend[n]).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		switch {
		case err != nil:
			services[n] = "UNREACHABLE"
			ok = false
		default:
			services[n] = resp.GetStatus().String()
			ok = ok && resp.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING
		}
	}
	out := map[string]any{"status": "ok", "services": services}
	// Engine replicas: a model whose every replica is down makes the suite degraded.
	if reps, err := e.infer.ListReplicas(forwardAuth(r.WithContext(ctx)), &inferencev1.ListReplicasRequest{}); err == nil {
		engines := []map[string]any{}
		up := map[string]bool{}
		for _, rp := range reps.GetReplicas() {
			engines = append(engines, map[string]any{"model": rp.GetModel(), "base_url": rp.GetBaseUrl(), "healthy": rp.GetHealthy(),
				"in_flight": rp.GetInFlight(), "last_error": rp.GetLastError()})
			up[rp.GetModel()] = up[rp.GetModel()] || rp.GetHealthy()
		}
		for _, u := range up {
			ok = ok && u
		}
		out["engines"] = engines
	}
	// lemond's members: the loaded models, the most recent one and the version (GUI3 lists
	// loaded models from all_models_loaded); empty when the inference node does not answer.
	lm, err := inferencev1.NewModelAdminServiceClient(e.backend["inference"]).LoadedModels(forwardAuth(r.WithContext(ctx)), &inferencev1.LoadedModelsRequest{})
	if err != nil {
		lm = &inferencev1.LoadedModelsResponse{Version: "unknown"}
	}
	for k, v := range openai.LoadedModelsJSON(lm) {
		out[k] = v
	}
	// lemond's capacity per type: Zest caps no type (every model it serves can be loaded at
	// once), so max_models counts the models it serves of each type; pinned_models counts the
	// loaded ones pinned. GUI3's Monitor shows loaded / max.
	pinned, capacity := map[string]int{}, map[string]int{}
	for _, t := range lemonadeTypes {
		pinned[t], capacity[t] = 0, 0
	}
	for _, m := range lm.GetModels() {
		if m.GetPinned() {
			pinned[m.GetType()]++
		}
	}
	if all, err := e.infer.ListModels(forwardAuth(r.WithContext(ctx)), &inferencev1.ListModelsRequest{IncludeAvailable: true}); err == nil {
		for _, m := range all.GetModels() {
			capacity[lemonadeType(m)]++
		}
	}
	out["pinned_models"], out["max_models"] = pinned, capacity
	if !ok {
		out["status"] = "degraded"
		httpguard.WriteJSON(w, http.StatusServiceUnavailable, out)
		return
	}
	httpguard.WriteJSON(w, http.StatusOK, out)
}

// lemonadeTypes are the model types lemond's health counts.
var lemonadeTypes = []string{"llm", "embedding", "reranking", "transcription", "image", "tts"}

// lemonadeType is the lemond type of a model: by its labels first (embeddings, reranking,
// tts), else by its Zest type.
func lemonadeType(m *inferencev1.Model) string {
	for _, l := range m.GetLabels() {
		switch l {
		case "embeddings", "embedding":
			return "embedding"
		case "reranking":
			return "reranking"
		case "tts":
			return "tts"
		}
	}
	switch m.GetType() {
	case inferencev1.ModelType_MODEL_TYPE_EMBEDDING:
		return "embedding"
	case inferencev1.ModelType_MODEL_TYPE_TTS:
		return "tts"
	case inferencev1.ModelType_MODEL_TYPE_TRANSCRIPTION:
		return "transcription"
	case inferencev1.ModelType_MODEL_TYPE_IMAGE:
		return "image"
	}
	return "llm"
}
