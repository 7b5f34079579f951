package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestComposeFileMatchesDockerfile parses deploy/docker-compose.yml (no Docker engine runs
// here) and checks it against deploy/Dockerfile and the services' address variables.
func TestComposeFileMatchesDockerfile(t *testing.T) {
	deploy := filepath.Join(repoRoot(), "deploy")
	raw, err := os.ReadFile(filepath.Join(deploy, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Build struct {
				Context, Dockerfile, Target string
			}
			Environment map[string]string
			Ports       []string
		}
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	docker, err := os.ReadFile(filepath.Join(deploy, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^FROM \S+ AS (\S+)$`).FindAllStringSubmatch(string(docker), -1) {
		targets[m[1]] = true
	}
	listen := map[string]string{"gateway": "ZEST_EDGE_ADDR", "mcpgateway": "ZEST_MCPGATEWAY_ADDR",
		"inference": "ZEST_INFERENCE_ADDR", "toolhost": "ZEST_TOOLHOST_ADDR"}
	if len(compose.Services) != len(listen) {
		t.Fatalf("services = %v, want the four", compose.Services)
	}
	for name, svc := range compose.Services {
		if !targets[svc.Build.Target] || svc.Build.Target != name {
			t.Errorf("%s: build target %q is not a stage of the Dockerfile (%v)", name, svc.Build.Target, targets)
		}
		addr := svc.Environment[listen[name]]
		if !strings.HasPrefix(addr, "0.0.0.0:") {
			t.Errorf("%s: %s = %q, want it to listen on its container's interfaces", name, listen[name], addr)
		}
		for other, svc2 := range compose.Services {
			if other == name || name == "gateway" {
				continue
			}
			if dial := svc2.Environment[listen[name]]; dial != name+":"+strings.TrimPrefix(addr, "0.0.0.0:") {
				t.Errorf("%s dials %s at %q, but it listens on %q", other, name, dial, addr)
			}
		}
		for _, p := range svc.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q beyond the host's loopback", name, p)
			}
		}
		_, hasAdmin := svc.Environment["LEMONADE_ADMIN_API_KEY"]
		_, hasAPI := svc.Environment["LEMONADE_API_KEY"]
		if name == "toolhost" {
			if hasAdmin || hasAPI {
				t.Errorf("toolhost holds a Lemonade key; it takes only ZEST_SERVICE_KEY")
			}
		} else if svc.Environment["LEMONADE_ADMIN_API_KEY"] == "" || svc.Environment["LEMONADE_API_KEY"] == "" {
			t.Errorf("%s: the Lemonade keys are not passed through", name)
		}
		// The service key reaches only the tool host and the one service that calls it, and
		// compose refuses to start without it (fail-closed).
		key, has := svc.Environment["ZEST_SERVICE_KEY"]
		switch name {
		case "toolhost", "mcpgateway":
			if !strings.HasPrefix(key, "${ZEST_SERVICE_KEY:?") {
				t.Errorf("%s: ZEST_SERVICE_KEY = %q, want a required ${ZEST_SERVICE_KEY:?…}", name, key)
			}
		default:
			if has {
				t.Errorf("%s holds ZEST_SERVICE_KEY; only mcpgateway and the tool host may", name)
			}
		}
	}
	if len(compose.Services["gateway"].Ports) != 1 {
		t.Errorf("only the edge should be published")
	}
}
