// Package modelfile reads the inference node's model file (YAML, or JSON which is YAML too):
// which model ids exist and which engine serves each.
package modelfile

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"time"

	"github.com/zestmcp/zest/lib/envref"
	"go.yaml.in/yaml/v3"
)

// Model is one entry of the model file.
type Model struct {
	// ID is the name clients put in "model".
	ID string `yaml:"id"`
	// Engine is "openai" (any OpenAI-compatible server: llama.cpp, vLLM, Ollama, Lemonade, a hosted API).
	Engine string `yaml:"engine"`
	// EngineKind says which server the OpenAI-compatible engine is, for model management
	// (load, unload, pull, delete): "lemonade" (lemond: its own /load, /unload, /pull,
	// /delete next to the OpenAI routes), "ollama" (its /api/pull, /api/delete, and
	// keep_alive), or "openai" (default: any other server, which has no model management).
	EngineKind string `yaml:"engine_kind"`
	// Type is llm, transcription, image, omni, tts, audio-generation, 3d or embedding.
	Type string `yaml:"type"`
	// UpstreamModel is the model's name at the engine (default: ID).
	UpstreamModel string `yaml:"upstream_model"`
	// BaseURLs are the engine's replicas, each up to and including /v1.
	BaseURLs []string `yaml:"base_urls"`
	// APIKey is a ${VAR} reference resolved from the inference node's environment.
	APIKey string `yaml:"api_key"`
	// Labels are shown with the model.
	Labels []string `yaml:"labels"`
	// MaxConcurrency bounds requests in flight per replica (default 8).
	MaxConcurrency int `yaml:"max_concurrency"`
	// Timeout bounds one request (default 300s).
	Timeout time.Duration `yaml:"timeout"`
	// Description says in one line what the model is.
	Description string `yaml:"description"`
}

// File is the model file.
type File struct {
	// HealthInterval is how often replicas are probed (default 5s).
	HealthInterval time.Duration `yaml:"health_interval"`
	Models         []Model       `yaml:"models"`
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,128}$`)

// Load reads and checks the model file at path.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model file: %w", err)
	}
	return Parse(b)
}

// Parse reads and checks a model file's text.
func Parse(b []byte) (*File, error) {
	var f File
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("model file: %w", err)
	}
	if f.HealthInterval == 0 {
		f.HealthInterval = 5 * time.Second
	}
	seen := map[string]bool{}
	var errs []error
	for i := range f.Models {
		m := &f.Models[i]
		where := fmt.Sprintf("models[%d]", i)
		if !idPattern.MatchString(m.ID) {
			errs = append(errs, fmt.Errorf("%s.id %q must match [A-Za-z0-9_.:/-]{1,128}", where, m.ID))
			continue
		}
		where = fmt.Sprintf("model %q", m.ID)
		if seen[m.ID] {
			errs = append(errs, fmt.Errorf("%s is listed twice", where))
		}
		seen[m.ID] = true
		if m.Engine == "" {
			m.Engine = "openai"
		}
		if m.Engine != "openai" {
			errs = append(errs, fmt.Errorf("%s: engine %q: use openai (any OpenAI-compatible server)", where, m.Engine))
		}
		switch m.EngineKind {
		case "":
			m.EngineKind = "openai"
		case "openai", "lemonade", "ollama":
		default:
			errs = append(errs, fmt.Errorf("%s: engine_kind %q: use lemonade, ollama or openai (default: no model management)", where, m.EngineKind))
		}
		switch m.Type {
		case "":
			m.Type = "llm"
		case "llm", "transcription", "image", "omni", "tts", "audio-generation", "3d", "embedding":
		default:
			errs = append(errs, fmt.Errorf("%s: type %q: use llm, transcription, image, omni, tts, audio-generation, 3d or embedding", where, m.Type))
		}
		if m.UpstreamModel == "" {
			m.UpstreamModel = m.ID
		}
		if len(m.BaseURLs) == 0 {
			errs = append(errs, fmt.Errorf("%s: base_urls is empty: give the engine's URL, e.g. http://127.0.0.1:8080/v1", where))
		}
		for _, u := range m.BaseURLs {
			pu, err := url.Parse(u)
			if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.User != nil {
				errs = append(errs, fmt.Errorf("%s: base_urls entry %q: want http(s)://host[:port]/v1 without credentials", where, u))
			}
		}
		if m.APIKey != "" {
			if _, err := envref.Variable(m.APIKey); err != nil {
				errs = append(errs, fmt.Errorf("%s: api_key %w", where, err))
			}
		}
		if m.MaxConcurrency == 0 {
			m.MaxConcurrency = 8
		}
		if m.MaxConcurrency < 1 {
			errs = append(errs, fmt.Errorf("%s: max_concurrency must be at least 1", where))
		}
		if m.Timeout == 0 {
			m.Timeout = 300 * time.Second
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &f, nil
}
