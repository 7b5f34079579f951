package modelfile

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseDefaultsAndErrors(t *testing.T) {
	f, err := Parse([]byte("models:\n  - id: m1\n    base_urls: [http://127.0.0.1:8080/v1]\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := f.Models[0]
	if m.Engine != "openai" || m.Type != "llm" || m.UpstreamModel != "m1" || m.MaxConcurrency != 8 || m.Timeout != 300*time.Second || f.HealthInterval != 5*time.Second {
		t.Fatalf("defaults: %+v", m)
	}
	for name, tc := range map[string]struct{ text, msg string }{
		"no urls":     {"models:\n  - id: m1\n", "base_urls is empty"},
		"bad url":     {"models:\n  - id: m1\n    base_urls: [ftp://x]\n", `base_urls entry "ftp://x"`},
		"credentials": {"models:\n  - id: m1\n    base_urls: [http://u:p@h/v1]\n", "without credentials"},
		"raw key":     {"models:\n  - id: m1\n    base_urls: [http://h/v1]\n    api_key: sk-123\n", "api_key must be a ${VARIABLE} reference"},
		"bad type":    {"models:\n  - id: m1\n    type: video\n    base_urls: [http://h/v1]\n", `type "video"`},
		"bad engine":  {"models:\n  - id: m1\n    engine: tgi\n    base_urls: [http://h/v1]\n", `engine "tgi"`},
		"twice":       {"models:\n  - id: m1\n    base_urls: [http://h/v1]\n  - id: m1\n    base_urls: [http://h/v1]\n", "listed twice"},
		"bad id":      {"models:\n  - id: 'a b'\n    base_urls: [http://h/v1]\n", "models[0].id"},
		"not yaml":    {"models: [", "model file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %q", err, tc.msg)
			}
			if strings.Contains(err.Error(), "sk-123") {
				t.Fatal("the error shows the raw key")
			}
		})
	}
}

func TestTheDeployExampleLoads(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "models.example.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatalf("deploy/models.example.yaml: %v", err)
	}
	if len(f.Models) != 3 || len(f.Models[0].BaseURLs) != 2 {
		t.Fatalf("example: %+v", f.Models)
	}
}

// TestEngineKind: openai by default; lemonade and ollama accepted; anything else refused.
func TestEngineKind(t *testing.T) {
	f, err := Parse([]byte("models:\n  - id: a\n    base_urls: [http://h/v1]\n  - id: b\n    engine_kind: ollama\n    base_urls: [http://h/v1]\n"))
	if err != nil || f.Models[0].EngineKind != "openai" || f.Models[1].EngineKind != "ollama" {
		t.Fatalf("%+v %v", f, err)
	}
	if _, err := Parse([]byte("models:\n  - id: a\n    engine_kind: vllm\n    base_urls: [http://h/v1]\n")); err == nil || !strings.Contains(err.Error(), `engine_kind "vllm": use lemonade, ollama or openai`) {
		t.Fatalf("vllm: %v", err)
	}
}
