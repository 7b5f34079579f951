// Package openaiengine serves models from OpenAI-compatible servers (llama.cpp's
// llama-server, vLLM, Ollama, Lemonade, hosted APIs). Several base URLs of one model are
// replicas: a request goes to the least busy healthy one, a connection error fails over to
// the next, each replica has a bound on requests in flight, and a prober marks replicas up
// and down. Chat streams are relayed chunk by chunk.
package openaiengine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zestmcp/zest/lib/envref"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/inference/modelfile"
)

// Errors of the engine; the node maps them to gRPC codes.
var (
	// ErrNoReplica means no replica of the model is reachable.
	ErrNoReplica = errors.New("no replica of the model is reachable")
	// ErrUpstream means the engine answered with an error.
	ErrUpstream = errors.New("engine error")
	// ErrUpstreamRequest means the engine refused the request as invalid (4xx).
	ErrUpstreamRequest = errors.New("engine refused the request")
)

// Replica is one base URL of a model.
type Replica struct {
	BaseURL  string
	sem      chan struct{}
	inFlight atomic.Int64
	mu       sync.Mutex
	healthy  bool
	lastErr  string
	listed   bool // the engine's /models lists the upstream model
}

// Model is a model served by an OpenAI-compatible engine.
type Model struct {
	Cfg      modelfile.Model
	Replicas []*Replica
	apiKey   string
}

// Engine holds the configured models and probes their replicas.
type Engine struct {
	models   map[string]*Model
	order    []string
	client   *http.Client
	interval time.Duration
	log      *slog.Logger
	created  int64
}

// New builds the engine from a model file; lookupEnv resolves api_key references.
func New(f *modelfile.File, lookupEnv func(string) (string, bool), log *slog.Logger) (*Engine, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if log == nil {
		log = slog.Default()
	}
	e := &Engine{models: map[string]*Model{}, client: &http.Client{}, interval: f.HealthInterval, log: log, created: time.Now().Unix()}
	for _, c := range f.Models {
		m := &Model{Cfg: c}
		if c.APIKey != "" {
			name, _ := envref.Variable(c.APIKey)
			v, ok := lookupEnv(name)
			if !ok {
				return nil, fmt.Errorf("model %q: api_key: %w: %s", c.ID, envref.ErrNotSet, name)
			}
			m.apiKey = v
		}
		for _, u := range c.BaseURLs {
			m.Replicas = append(m.Replicas, &Replica{BaseURL: strings.TrimRight(u, "/"), sem: make(chan struct{}, c.MaxConcurrency), healthy: true})
		}
		e.models[c.ID] = m
		e.order = append(e.order, c.ID)
	}
	sort.Strings(e.order)
	return e, nil
}

// Has reports whether the engine serves model id.
func (e *Engine) Has(id string) bool { _, ok := e.models[id]; return ok }

// Run probes every replica until ctx is done.
func (e *Engine) Run(ctx context.Context) {
	if len(e.models) == 0 {
		return
	}
	defer trackRunning(e)() // metrics.go: replica health while probing
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for {
		e.probeAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *Engine) probeAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range e.models {
		for _, r := range m.Replicas {
			wg.Add(1)
			go func() { defer wg.Done(); e.probe(ctx, m, r) }()
		}
	}
	wg.Wait()
}

// probe asks a replica for its models: reachable means healthy; listing the upstream model
// means the model is loaded there.
func (e *Engine) probe(ctx context.Context, m *Model, r *Replica) {
	ctx, cancel := context.WithTimeout(ctx, min(e.interval, 5*time.Second))
	defer cancel()
	listed, err := e.listModels(ctx, m, r)
	if l, ok := e.loadedAt(ctx, m, r); err == nil && ok { // lemond and Ollama say what is loaded (manage.go)
		listed = l
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.healthy
	r.healthy, r.listed = err == nil, listed
	if err != nil {
		r.lastErr = err.Error()
	}
	if was != r.healthy {
		e.log.Warn("engine replica health changed", "model", m.Cfg.ID, "base_url", r.BaseURL, "healthy", r.healthy, "err", err)
	}
}

func (r *Replica) markDown(err error) {
	r.mu.Lock()
	r.healthy, r.lastErr = false, err.Error()
	r.mu.Unlock()
}

func (r *Replica) markUp() {
	r.mu.Lock()
	r.healthy = true
	r.mu.Unlock()
}

func (r *Replica) isHealthy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.healthy
}

// candidates orders the replicas for one request: healthy ones by fewest requests in flight,
// then the unhealthy ones (tried last: a replica may be back before the prober notices).
func (m *Model) candidates() []*Replica {
	out := append([]*Replica(nil), m.Replicas...)
	sort.SliceStable(out, func(i, j int) bool {
		hi, hj := out[i].isHealthy(), out[j].isHealthy()
		if hi != hj {
			return hi
		}
		return out[i].inFlight.Load() < out[j].inFlight.Load()
	})
	return out
}

// acquire takes a slot on r, waiting within ctx.
func (r *Replica) acquire(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
		r.inFlight.Add(1)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: all %d request slots busy: %w", r.BaseURL, cap(r.sem), ctx.Err())
	}
}

// tryAcquire takes a slot on r if one is free.
func (r *Replica) tryAcquire() bool {
	select {
	case r.sem <- struct{}{}:
		r.inFlight.Add(1)
		return true
	default:
		return false
	}
}

func (r *Replica) release() {
	r.inFlight.Add(-1)
	<-r.sem
}

// Models lists the configured models with their state as the engines report it: loaded when
// a healthy replica lists the upstream model, available when a replica is healthy, suggested
// (not usable now) when none is.
func (e *Engine) Models() []*inferencev1.Model {
	var out []*inferencev1.Model
	for _, id := range e.order {
		m := e.models[id]
		state := inferencev1.ModelState_MODEL_STATE_SUGGESTED
		for _, r := range m.Replicas {
			r.mu.Lock()
			switch {
			case r.healthy && r.listed:
				state = inferencev1.ModelState_MODEL_STATE_LOADED
			case r.healthy && state == inferencev1.ModelState_MODEL_STATE_SUGGESTED:
				state = inferencev1.ModelState_MODEL_STATE_AVAILABLE
			}
			r.mu.Unlock()
		}
		out = append(out, &inferencev1.Model{
			Id: id, Type: modelType(m.Cfg.Type), State: state, Engine: "openai", Labels: m.Cfg.Labels,
			OwnedBy: "zest", Created: e.created, Description: m.Cfg.Description,
		})
	}
	return out
}

func modelType(t string) inferencev1.ModelType {
	switch t {
	case "transcription":
		return inferencev1.ModelType_MODEL_TYPE_TRANSCRIPTION
	case "image":
		return inferencev1.ModelType_MODEL_TYPE_IMAGE
	case "omni":
		return inferencev1.ModelType_MODEL_TYPE_OMNI
	case "tts":
		return inferencev1.ModelType_MODEL_TYPE_TTS
	case "audio-generation":
		return inferencev1.ModelType_MODEL_TYPE_AUDIO_GENERATION
	case "3d":
		return inferencev1.ModelType_MODEL_TYPE_MESH
	case "embedding":
		return inferencev1.ModelType_MODEL_TYPE_EMBEDDING
	}
	return inferencev1.ModelType_MODEL_TYPE_LLM
}

// ReplicaHealth is one replica's state, for health pages.
type ReplicaHealth struct {
	Model, BaseURL string
	Healthy        bool
	InFlight       int64
	LastError      string
}

// Health reports every replica.
func (e *Engine) Health() []ReplicaHealth {
	var out []ReplicaHealth
	for _, id := range e.order {
		for _, r := range e.models[id].Replicas {
			r.mu.Lock()
			out = append(out, ReplicaHealth{Model: id, BaseURL: r.BaseURL, Healthy: r.healthy, InFlight: r.inFlight.Load(), LastError: r.lastErr})
			r.mu.Unlock()
		}
	}
	return out
}
