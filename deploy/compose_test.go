package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// zest maps each compose service of Zest to its listen variable and port.
var zest = map[string]struct {
	listenVar string
	port      uint32
}{
	"gateway":    {"ZEST_EDGE_ADDR", 13305},
	"mcpgateway": {"ZEST_MCPGATEWAY_ADDR", 13311},
	"inference":  {"ZEST_INFERENCE_ADDR", 13310},
	"toolhost":   {"ZEST_TOOLHOST_ADDR", 13312},
}

// loadCompose parses compose.yaml as docker compose does (interpolation, merge keys,
// profiles), with env as the only environment: nothing of the test's own leaks in.
func loadCompose(t *testing.T, env []string, profiles ...string) (*types.Project, error) {
	t.Helper()
	return loadComposeFile(t, "compose.yaml", env, profiles...)
}

// loadComposeFile is loadCompose for another file of deploy/ (compose.ha.yaml), under the
// project name the file gives itself.
func loadComposeFile(t *testing.T, file string, env []string, profiles ...string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithWorkingDirectory("."), cli.WithEnv(env), cli.WithProfiles(profiles))
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(t.Context())
}

// callers says which service calls which (the edge also asks the tool host for /health).
var callers = map[string]map[string]bool{
	"gateway":    {"mcpgateway": true, "inference": true, "toolhost": true},
	"mcpgateway": {"inference": true, "toolhost": true},
}

var composeEnv = []string{"ZEST_SERVICE_KEY=0123456789abcdef0123456789abcdef"}

// dockerStages returns the Dockerfile's stage names with each stage's ENTRYPOINT binary.
func dockerStages(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]string{}
	stage := ""
	for _, line := range strings.Split(string(b), "\n") {
		if m := regexp.MustCompile(`^FROM \S+ AS (\S+)$`).FindStringSubmatch(line); m != nil {
			stage = m[1]
			stages[stage] = ""
		}
		if m := regexp.MustCompile(`^ENTRYPOINT \["([^"]+)"\]$`).FindStringSubmatch(line); m != nil {
			stages[stage] = m[1]
		}
	}
	return stages
}

func TestComposeServicesAndHealthChecks(t *testing.T) {
	p, err := loadCompose(t, composeEnv, "engine")
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range p.Services {
			if !yield(n) {
				return
			}
		}
	})
	if want := []string{"engine", "gateway", "inference", "mcpgateway", "toolhost"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	stages := dockerStages(t)
	for name, svc := range p.Services {
		hc := svc.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) < 2 {
			t.Errorf("%s: no health check", name)
			continue
		}
		if hc.Timeout == nil || *hc.Timeout <= 0 || hc.Interval == nil || hc.Retries == nil {
			t.Errorf("%s: health check without explicit interval, timeout and retries", name)
		}
		if !svc.ReadOnly || !slices.Contains(svc.CapDrop, "ALL") || !slices.Contains(svc.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: want read_only, cap_drop [ALL], no-new-privileges (got %v %v %v)", name, svc.ReadOnly, svc.CapDrop, svc.SecurityOpt)
		}
		if name == "engine" {
			continue
		}
		z := zest[name]
		// The binary checks itself: the stage's entrypoint run with -healthcheck, in exec form
		// (no shell in distroless), within a timeout longer than the probe's own 3 s.
		if svc.Build == nil || svc.Build.Target != name || stages[name] == "" {
			t.Errorf("%s: build target %v is not a Dockerfile stage with an ENTRYPOINT (%v)", name, svc.Build, stages)
			continue
		}
		if want := []string{"CMD", stages[name], "-healthcheck"}; !slices.Equal(hc.Test, want) {
			t.Errorf("%s: healthcheck test %q, want %q", name, hc.Test, want)
		}
		if *hc.Timeout <= types.Duration(3e9) {
			t.Errorf("%s: healthcheck timeout %v must exceed the probe's own 3s (lib/healthcheck.Timeout)", name, *hc.Timeout)
		}
		if svc.User == "" || strings.HasPrefix(svc.User, "0") || strings.HasPrefix(svc.User, "root") {
			t.Errorf("%s: user %q, want a non-root numeric user", name, svc.User)
		}
		if svc.Build.Args["VERSION"] == nil {
			t.Errorf("%s: build args carry no VERSION (the binary's -version)", name)
		}
		// Each listens on its container's interfaces; every other Zest service dials it by
		// its compose name on the same port.
		addr := svc.Environment[z.listenVar]
		if addr == nil || *addr != "0.0.0.0:"+itoa(z.port) {
			t.Errorf("%s: %s = %v, want 0.0.0.0:%d", name, z.listenVar, addr, z.port)
		}
		for other, o := range p.Services {
			if other == name || other == "engine" {
				continue
			}
			dial := o.Environment[z.listenVar]
			if dial == nil && callers[other][name] {
				t.Errorf("%s calls %s but has no %s", other, name, z.listenVar)
			}
			if dial != nil && *dial != name+":"+itoa(z.port) {
				t.Errorf("%s dials %s at %q, want %s:%d", other, name, *dial, name, z.port)
			}
		}
		// Keys: the service key reaches only the tool host and mcpgateway; the tool host
		// holds no Lemonade key.
		_, hasService := svc.Environment["ZEST_SERVICE_KEY"]
		_, hasAPI := svc.Environment["LEMONADE_API_KEY"]
		if hasService != (name == "toolhost" || name == "mcpgateway") {
			t.Errorf("%s: ZEST_SERVICE_KEY present = %v", name, hasService)
		}
		if hasAPI == (name == "toolhost") {
			t.Errorf("%s: LEMONADE_API_KEY present = %v", name, hasAPI)
		}
	}
	// The tool host's children write under HOME and /tmp and run what npx fetched there.
	for _, want := range []string{"/tmp:exec,", "/home/node:exec,"} {
		if !slices.ContainsFunc(p.Services["toolhost"].Tmpfs, func(m string) bool { return strings.HasPrefix(m, want) }) {
			t.Errorf("toolhost tmpfs %v: want %s… (writable and executable on a read-only root)", p.Services["toolhost"].Tmpfs, want)
		}
	}
	// Start order: the edge and mcpgateway wait for what they call to be healthy.
	for name, deps := range map[string][]string{"gateway": {"inference", "mcpgateway"}, "mcpgateway": {"inference", "toolhost"}} {
		for _, d := range deps {
			if c := p.Services[name].DependsOn[d].Condition; c != types.ServiceConditionHealthy {
				t.Errorf("%s depends on %s with condition %q, want service_healthy", name, d, c)
			}
		}
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// Only the edge is published, only on the host's loopback, with or without the engine.
func TestComposePublishesOnlyTheEdgeOnLoopback(t *testing.T) {
	for _, profiles := range [][]string{nil, {"engine"}} {
		p, err := loadCompose(t, append(composeEnv, "ZEST_EDGE_PORT=8088"), profiles...)
		if err != nil {
			t.Fatal(err)
		}
		for name, svc := range p.Services {
			if name != "gateway" {
				if len(svc.Ports) > 0 {
					t.Errorf("%s publishes %v: only the edge may", name, svc.Ports)
				}
				continue
			}
			if len(svc.Ports) != 1 {
				t.Fatalf("gateway ports %v, want one", svc.Ports)
			}
			port := svc.Ports[0]
			if port.HostIP != "127.0.0.1" || port.Target != 13305 || port.Published != "8088" {
				t.Errorf("gateway port %+v, want 127.0.0.1:8088 (ZEST_EDGE_PORT) → 13305", port)
			}
		}
		if _, on := p.Services["engine"]; on != (profiles != nil) {
			t.Errorf("profiles %v: engine enabled = %v", profiles, on)
		}
	}
}

// Without ZEST_SERVICE_KEY compose refuses to start, naming the variable and the fix.
func TestComposeRequiresServiceKey(t *testing.T) {
	_, err := loadCompose(t, nil)
	if err == nil || !strings.Contains(err.Error(), "ZEST_SERVICE_KEY") || !strings.Contains(err.Error(), "openssl rand") {
		t.Fatalf("load without ZEST_SERVICE_KEY: %v, want a refusal naming it", err)
	}
}

// The inference node and the tool host scale apart.
func TestComposeScalesInferenceApartFromToolHost(t *testing.T) {
	p, err := loadCompose(t, append(composeEnv, "ZEST_INFERENCE_REPLICAS=3", "ZEST_TOOLHOST_REPLICAS=2"))
	if err != nil {
		t.Fatal(err)
	}
	if got := scale(p, "inference"); got != 3 {
		t.Errorf("inference scale %d, want 3", got)
	}
	if got := scale(p, "toolhost"); got != 2 {
		t.Errorf("toolhost scale %d, want 2", got)
	}
	p, err = loadCompose(t, composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"inference", "toolhost", "gateway", "mcpgateway"} {
		if got := scale(p, n); got != 1 {
			t.Errorf("%s default scale %d, want 1", n, got)
		}
	}
}

// The engine is wired through the model file: inference mounts models.compose.yaml where
// ZEST_MODELS_FILE points, and that file names the engine service at its port and alias.
func TestComposeEngineWiredThroughModelFile(t *testing.T) {
	p, err := loadCompose(t, composeEnv, "engine")
	if err != nil {
		t.Fatal(err)
	}
	inf := p.Services["inference"]
	path := inf.Environment["ZEST_MODELS_FILE"]
	if path == nil {
		t.Fatal("inference has no ZEST_MODELS_FILE")
	}
	var src string
	for _, v := range inf.Volumes {
		if v.Target == *path {
			if !v.ReadOnly {
				t.Errorf("model file mounted writable")
			}
			src = v.Source
		}
	}
	if filepath.Base(src) != "models.compose.yaml" {
		t.Fatalf("inference mounts %q at %s, want deploy/models.compose.yaml", src, *path)
	}
	raw, err := os.ReadFile("models.compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var mf struct {
		Models []struct {
			ID       string   `yaml:"id"`
			Upstream string   `yaml:"upstream_model"`
			BaseURLs []string `yaml:"base_urls"`
		} `yaml:"models"`
	}
	if err := yaml.Unmarshal(raw, &mf); err != nil {
		t.Fatal(err)
	}
	eng := p.Services["engine"]
	if eng.Image != "ghcr.io/ggml-org/llama.cpp:server" || !slices.Equal(eng.Profiles, []string{"engine"}) {
		t.Errorf("engine image %q profiles %v", eng.Image, eng.Profiles)
	}
	arg := func(flag string) string {
		if i := slices.Index(eng.Command, flag); i >= 0 && i+1 < len(eng.Command) {
			return eng.Command[i+1]
		}
		return ""
	}
	wired := false
	for _, m := range mf.Models {
		name := m.Upstream
		if name == "" {
			name = m.ID
		}
		if slices.Contains(m.BaseURLs, "http://engine:"+arg("--port")+"/v1") && name == arg("--alias") {
			wired = true
		}
	}
	if !wired || arg("--host") != "0.0.0.0" {
		t.Errorf("no model of models.compose.yaml reaches the engine (command %q, models %+v)", eng.Command, mf.Models)
	}
	for _, v := range eng.Volumes {
		if !v.ReadOnly {
			t.Errorf("engine mounts %s writable", v.Target)
		}
	}
}

func scale(p *types.Project, name string) int {
	svc := p.Services[name]
	return svc.GetScale()
}

// No secret is written into a compose file: every variable named like one is the host's
// variable of the same name (${NAME}), with no default value.
func TestComposeNoLiteralSecrets(t *testing.T) {
	secrets := []string{"ZEST_SERVICE_KEY", "ZEST_SESSION_KEY", "LEMONADE_API_KEY", "LEMONADE_ADMIN_API_KEY"}
	required := []string{"ZEST_SERVICE_KEY=0123456789abcdef0123456789abcdef", "ZEST_SESSION_KEY=" + testSessionKey}
	for _, file := range []string{"compose.yaml", "compose.ha.yaml"} {
		var env []string
		for _, s := range secrets {
			env = append(env, s+"=from-env-"+s)
		}
		for _, withAll := range []bool{true, false} {
			if !withAll {
				env = required
			}
			p, err := loadComposeFile(t, file, env, "engine")
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for name, svc := range p.Services {
				for k, v := range svc.Environment {
					if !secretName(k) {
						continue
					}
					want := "from-env-" + k
					if !withAll {
						want = ""
						if i := slices.IndexFunc(required, func(r string) bool { return strings.HasPrefix(r, k+"=") }); i >= 0 {
							want = strings.TrimPrefix(required[i], k+"=")
						}
					}
					if got := deref(v); got != want {
						t.Errorf("%s: %s: %s = %q, want %q: a secret is ${%s} from the environment, without a default (a new one: add it to this test)", file, name, k, got, want, k)
					}
				}
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
