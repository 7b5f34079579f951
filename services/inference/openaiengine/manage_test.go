package openaiengine

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zestmcp/zest/services/inference/modelfile"
)

func managed(t *testing.T, kind string, urls ...string) *Engine {
	t.Helper()
	f := &modelfile.File{HealthInterval: time.Hour, Models: []modelfile.Model{{ID: "m", Engine: "openai", EngineKind: kind, Type: "llm",
		UpstreamModel: "up", BaseURLs: urls, MaxConcurrency: 2, Timeout: 5 * time.Second}}}
	e, err := New(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestLemonadePullRelaysEvents: lemond's SSE progress becomes Progress, complete ends it, an
// error event fails it with the engine's words.
func TestLemonadePullRelaysEvents(t *testing.T) {
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/api/v1/pull" || !strings.Contains(string(b), `"model_name":"up"`) || !strings.Contains(string(b), `"stream":true`) {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"status":"error","message":"unexpected %s %s"}`, r.URL.Path, b)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: progress\ndata: {\"file\":\"a.gguf\",\"file_index\":1,\"total_files\":1,\"bytes_downloaded\":5,\"bytes_total\":10,\"percent\":50}\n\n")
		if fail {
			fmt.Fprint(w, "event: error\ndata: {\"error\":\"disk full\"}\n\n")
			return
		}
		fmt.Fprint(w, "event: complete\ndata: {\"percent\":100}\n\n")
	}))
	defer srv.Close()
	e := managed(t, KindLemonade, srv.URL+"/api/v1")
	var got []Progress
	msg, err := e.Manage(t.Context(), "m", OpPull, map[string]any{"subscribe": false}, func(p Progress) error { got = append(got, p); return nil })
	if err != nil || msg != "Installed model: m" || len(got) != 1 || got[0].Percent != 50 || got[0].File != "a.gguf" {
		t.Fatalf("pull: %q %v %+v", msg, err, got)
	}
	fail = true
	if _, err := e.Manage(t.Context(), "m", OpPull, nil, func(Progress) error { return nil }); !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("failed pull: %v", err)
	}
}

// TestOllamaOps: keep_alive for load and unload, NDJSON pull progress, DELETE for delete,
// and an error line is a refusal.
func TestOllamaOps(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodGet { // the prober's /models and /api/ps after each op
			seen = append(seen, r.Method+" "+r.URL.Path+" "+string(b))
		}
		switch r.URL.Path {
		case "/api/pull":
			if strings.Contains(string(b), "missing") {
				fmt.Fprintln(w, `{"error":"pull model manifest: file does not exist"}`)
				return
			}
			fmt.Fprintln(w, `{"status":"pulling d","digest":"d","total":4,"completed":1}`)
			fmt.Fprintln(w, `{"status":"success"}`)
		case "/api/delete":
			if strings.Contains(string(b), "missing") {
				w.WriteHeader(404)
				fmt.Fprint(w, `{"error":"model 'missing' not found"}`)
			}
		default:
			fmt.Fprint(w, `{"done":true}`)
		}
	}))
	defer srv.Close()
	e := managed(t, KindOllama, srv.URL+"/v1")
	ctx := t.Context()
	for _, op := range []string{OpLoad, OpUnload, OpDelete} {
		if _, err := e.Manage(ctx, "m", op, nil, nil); err != nil {
			t.Fatal(op, err)
		}
	}
	var got []Progress
	if _, err := e.Manage(ctx, "m", OpPull, nil, func(p Progress) error { got = append(got, p); return nil }); err != nil || len(got) != 1 || got[0].Percent != 25 {
		t.Fatalf("pull: %v %+v", err, got)
	}
	want := []string{`POST /api/generate {"keep_alive":-1,"model":"up","stream":false}`, `POST /api/generate {"keep_alive":0,"model":"up","stream":false}`,
		`DELETE /api/delete {"model":"up"}`, `POST /api/pull {"model":"up","stream":true}`}
	for i, w := range want {
		if !strings.HasPrefix(seen[i], w) {
			t.Errorf("call %d: %s, want %s", i, seen[i], w)
		}
	}
	e.models["m"].Cfg.UpstreamModel = "missing"
	if _, err := e.Manage(ctx, "m", OpDelete, nil, nil); !errors.Is(err, ErrUpstreamRequest) || !strings.Contains(err.Error(), "model 'missing' not found") {
		t.Fatalf("delete of a missing model: %v", err)
	}
	if _, err := e.Manage(ctx, "m", OpPull, nil, nil); !errors.Is(err, ErrUpstreamRequest) || !strings.Contains(err.Error(), "file does not exist") {
		t.Fatalf("pull of a missing model: %v", err)
	}
}

// TestNoManagementAndDown: a plain engine is refused naming its URL; a dead one is ErrNoReplica.
func TestNoManagementAndDown(t *testing.T) {
	dead := deadURL(t)
	if _, err := managed(t, KindOpenAI, dead).Manage(t.Context(), "m", OpLoad, nil, nil); !errors.Is(err, ErrNoManagement) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("plain: %v", err)
	}
	if _, err := managed(t, KindLemonade, dead).Manage(t.Context(), "m", OpLoad, nil, nil); !errors.Is(err, ErrNoReplica) || !strings.Contains(err.Error(), "cannot be reached") {
		t.Fatalf("down: %v", err)
	}
}

func TestErrorText(t *testing.T) {
	for body, want := range map[string]string{`{"status":"error","message":"a"}`: "a", `{"error":"b"}`: "b",
		`{"error":{"message":"c"}}`: "c", `plain`: "plain"} {
		if got := errorText([]byte(body)); got != want {
			t.Errorf("%s: %q", body, got)
		}
	}
}

// TestPullLineBound: a pull progress line (lemond's SSE, Ollama's NDJSON) longer than
// maxManageLine fails the pull, after at most that much of it, instead of being gathered whole.
func TestPullLineBound(t *testing.T) {
	for _, c := range []struct{ kind, base, start string }{
		{KindLemonade, "/api/v1", "event: progress\ndata: {\"file\":\""},
		{KindOllama, "/v1", `{"status":"`},
	} {
		t.Run(c.kind, func(t *testing.T) {
			var sent atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/pull") {
					return
				}
				if c.kind == KindLemonade {
					w.Header().Set("Content-Type", "text/event-stream")
				}
				io.WriteString(w, c.start)
				piece := strings.Repeat("a", 4096)
				for sent.Load() < 64*maxManageLine {
					n, err := io.WriteString(w, piece)
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
			}))
			t.Cleanup(srv.Close)
			e := managed(t, c.kind, srv.URL+c.base)
			_, err := e.Manage(t.Context(), "m", OpPull, nil, func(Progress) error { return nil })
			if !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), "too long") {
				t.Fatalf("an endless progress line: %v", err)
			}
			if n := sent.Load(); n >= 64*maxManageLine {
				t.Errorf("the engine sent all of its %d bytes: nothing stopped reading", n)
			}
		})
	}
}
