package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// TestHealthcheckFlag runs each real binary with -healthcheck as compose's health check does
// (the service's own environment, so the address it probes is the one it listens on):
// healthy against the started suite, also when the address is written 0.0.0.0:port as in a
// container; unhealthy against an address where nothing serves, and against a service that
// was stopped.
func TestHealthcheckFlag(t *testing.T) {
	s := startSuite(t)
	for bin, listenVar := range listenVars {
		if code, out := runHealthcheck(t, bin, s.Env); code != 0 || strings.TrimSpace(out) != bin+": healthy" {
			t.Errorf("%s -healthcheck against the suite: exit %d, %q; want 0", bin, code, out)
		}
		_, port, _ := strings.Cut(envOf(s.Env, listenVar), ":")
		if code, out := runHealthcheck(t, bin, append(s.Env, listenVar+"=0.0.0.0:"+port)); code != 0 {
			t.Errorf("%s -healthcheck with %s=0.0.0.0:%s: exit %d, %q; want 0 (probed on loopback)", bin, listenVar, port, code, out)
		}
		stopped := unusedAddr(t)
		code, out := runHealthcheck(t, bin, append(s.Env, listenVar+"="+stopped))
		if code != 1 || !strings.Contains(out, bin+": unhealthy:") || !strings.Contains(out, stopped) {
			t.Errorf("%s -healthcheck against stopped %s: exit %d, %q; want 1 naming the address", bin, stopped, code, out)
		}
		ver, err := exec.Command(filepath.Join(binDir, bin), "-version").Output()
		if v, ok := strings.CutPrefix(strings.TrimSpace(string(ver)), bin+" "); err != nil || !ok || v == "" {
			t.Errorf("%s -version: %q, %v", bin, ver, err)
		}
	}
	// A service stopped in place: its own probe says so.
	s.Kill("zest-toolhost", syscall.SIGTERM)
	if code, out := runHealthcheck(t, "zest-toolhost", s.Env); code != 1 {
		t.Errorf("zest-toolhost -healthcheck after it stopped: exit %d, %q; want 1", code, out)
	}
}

// TestHealthcheckComposeModelFile starts an inference node on deploy/models.compose.yaml, the
// model file compose mounts, whose engine (profile "engine") is not running here: the file
// loads (GetModel knows its model local-llm), and the node serves: -healthcheck 0, so compose
// starts the rest. (The edge's /api/v1/health then says "degraded", naming the engine.)
func TestHealthcheckComposeModelFile(t *testing.T) {
	env, _, _ := suiteEnv(t, "ZEST_MODELS_FILE="+filepath.Join(repoRoot(), "deploy", "models.compose.yaml"))
	cmd := exec.Command(filepath.Join(binDir, "zest-inference"))
	cmd.Env = env
	p := startProc(t, "zest-inference", cmd, false)
	t.Cleanup(func() { p.stopChecked(t) })
	waitfor.NoError(t, 10*time.Second, func() error {
		if code, out := runHealthcheck(t, "zest-inference", env); code != 0 {
			return errors.New(out)
		}
		return nil
	})
	res, err := inferencev1.NewInferenceServiceClient(dialService(t, envOf(env, "ZEST_INFERENCE_ADDR"), "")).
		GetModel(t.Context(), &inferencev1.GetModelRequest{Id: "local-llm"})
	if err != nil || !strings.Contains(res.String(), `"local-llm"`) {
		t.Errorf("GetModel local-llm (models.compose.yaml): %v %v", err, res)
	}
	if logs := p.logs.String(); strings.Contains(logs, "model file") && strings.Contains(logs, "level=ERROR") {
		t.Errorf("inference logs an error about the model file:\n%s", logs)
	}
}
