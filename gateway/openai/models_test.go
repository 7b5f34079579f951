package openai

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/grpctest"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeModels is ModelAdminService: it records the last load and pulls with two progress
// events; the model "gone" is on an engine that is down, "plain" on one without management.
type fakeModels struct {
	inferencev1.UnimplementedModelAdminServiceServer
	load *inferencev1.LoadRequest
}

func refusal(name string) error {
	switch name {
	case "gone":
		return status.Error(codes.Unavailable, `model "gone": its lemonade engine at http://x cannot be reached`)
	case "plain":
		return status.Error(codes.InvalidArgument, `model "plain" is served by an OpenAI-compatible server at http://y, which has no model management`)
	}
	return nil
}

func (f *fakeModels) Load(_ context.Context, req *inferencev1.LoadRequest) (*inferencev1.LoadResponse, error) {
	f.load = req
	if err := refusal(req.GetModelName()); err != nil {
		return nil, err
	}
	return &inferencev1.LoadResponse{Message: "Loaded model: " + req.GetModelName()}, nil
}

func (f *fakeModels) Pull(req *inferencev1.PullRequest, s inferencev1.ModelAdminService_PullServer) error {
	if err := refusal(req.GetModelName()); err != nil {
		return err
	}
	_ = s.Send(&inferencev1.PullResponse{File: "a", FileIndex: 1, TotalFiles: 1, BytesDownloaded: 5, BytesTotal: 10, Percent: 50})
	if req.GetModelName() == "breaks" {
		return status.Error(codes.Unavailable, "the pull stream broke")
	}
	return s.Send(&inferencev1.PullResponse{FileIndex: 1, TotalFiles: 1, Percent: 100, Message: "Installed model: " + req.GetModelName(), Complete: true})
}

func newModelsEdge(t *testing.T) (string, *fakeModels) {
	t.Helper()
	f := &fakeModels{}
	cc := grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterModelAdminServiceServer(s, f) })
	api := &API{Models: inferencev1.NewModelAdminServiceClient(cc), Forward: func(r *http.Request) context.Context { return r.Context() }}
	mux := http.NewServeMux()
	api.registerModels(mux, "/api/v1/", func(h http.Handler) http.Handler { return httpguard.LimitBody(bodyLimit, WriteError, h) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/api/v1/", f
}

// TestModelRoutesRefuseBadFieldsByName: each bad body is 400 (413 past 64 KiB) naming the field.
func TestModelRoutesRefuseBadFieldsByName(t *testing.T) {
	url, _ := newModelsEdge(t)
	for _, c := range []struct {
		route, body string
		status      int
		param       any
		want        string
	}{
		{"load", `{}`, 400, "model_name", "model_name is required"},
		{"load", `{"model_name":"  "}`, 400, "model_name", "model_name is required"},
		{"delete", ``, 400, nil, "JSON"},
		{"pull", `{"model_name":["a"]}`, 400, "model_name", "model_name must be a string, not array"},
		{"pull", `{"model_name":"a","stream":1}`, 400, "stream", "stream must be a boolean, not number"},
		{"pull", `{"model_name":"a","subscribe":"no"}`, 400, "subscribe", "subscribe must be a boolean"},
		{"load", `{"model_name":"a","pinned":"yes"}`, 400, "pinned", "pinned must be a boolean"},
		{"load", `{"model_name":"a","ctx_size":null}`, 400, "ctx_size", "ctx_size must be a number, not null"},
		{"unload", `"x"`, 400, nil, "not a JSON object"},
		{"load", `{"model_name":"a","pad":"` + strings.Repeat("x", MaxModelBodyBytes) + `"}`, 413, nil, "the limit is 64 KiB"},
		{"load", `{"model_name":"plain"}`, 400, nil, "no model management"},
	} {
		msg, param := openAIError(t, postJSON(t, url+c.route, c.body), c.status)
		if param != c.param || !strings.Contains(msg, c.want) {
			t.Errorf("%s %.40s: %q param %v, want %q param %v", c.route, c.body, msg, param, c.want, c.param)
		}
	}
}

// TestModelRoutes: options reach the service; pull answers JSON, SSE, or the completed
// snapshot; an engine down is 503 naming it.
func TestModelRoutes(t *testing.T) {
	url, f := newModelsEdge(t)
	a := postJSON(t, url+"load", `{"model_name":"m","ctx_size":4096,"llamacpp_args":"-np 2"}`)
	if a.status != 200 || strings.TrimSpace(string(a.body)) != `{"message":"Loaded model: m","status":"success"}` ||
		f.load.GetOptions().AsMap()["ctx_size"] != float64(4096) || f.load.GetOptions().AsMap()["llamacpp_args"] != "-np 2" {
		t.Fatalf("load: %d %s %v", a.status, a.body, f.load)
	}
	if a := postJSON(t, url+"pull", `{"model_name":"m"}`); strings.TrimSpace(string(a.body)) != `{"message":"Installed model: m","status":"success"}` {
		t.Fatalf("pull: %s", a.body)
	}
	a = postJSON(t, url+"pull", `{"model_name":"m","stream":true}`)
	want := "event: progress\ndata: {\"bytes_downloaded\":5,\"bytes_total\":10,\"file\":\"a\",\"file_index\":1,\"percent\":50,\"total_files\":1}\n\n" +
		"event: complete\ndata: {\"file_index\":1,\"message\":\"Installed model: m\",\"percent\":100,\"total_files\":1}\n\n"
	if a.header.Get("Content-Type") != "text/event-stream" || string(a.body) != want {
		t.Fatalf("pull stream:\n%s", a.body)
	}
	if a := postJSON(t, url+"pull", `{"model_name":"breaks","stream":true}`); !strings.HasSuffix(string(a.body), "event: error\ndata: {\"error\":\"the pull stream broke\"}\n\n") {
		t.Fatalf("broken pull stream:\n%s", a.body)
	}
	if a := postJSON(t, url+"pull", `{"model_name":"m","stream":true,"subscribe":false}`); !strings.Contains(string(a.body), `"complete":true`) || !strings.Contains(string(a.body), `"status":"completed"`) {
		t.Fatalf("pull subscribe false: %s", a.body)
	}
	a = postJSON(t, url+"load", `{"model_name":"gone"}`)
	if a.status != 503 || !strings.Contains(string(a.body), "cannot be reached") || strings.Contains(string(a.body), "inference service unavailable") {
		t.Fatalf("engine down: %d %s", a.status, a.body)
	}
}

// TestLoadedModelsLastUseInMilliseconds: health's last_use is Unix milliseconds, a whole
// number, as lemond sends it (GUI3 showed seconds as "499h uptime"); the RPC's is seconds.
func TestLoadedModelsLastUseInMilliseconds(t *testing.T) {
	out := LoadedModelsJSON(&inferencev1.LoadedModelsResponse{Models: []*inferencev1.LoadedModel{{ModelName: "m", LastUse: 1764900000.1234}}})
	all := out["all_models_loaded"].([]map[string]any)
	if got, ok := all[0]["last_use"].(int64); !ok || got != 1764900000123 {
		t.Errorf("last_use %v (%T), want 1764900000123 ms", all[0]["last_use"], all[0]["last_use"])
	}
}
