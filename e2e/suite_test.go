// Package e2e drives the four built Zest binaries as separate processes on free loopback
// ports, as a user would: over HTTP, through the edge.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

var binDir string

func TestMain(m *testing.M) {
	binDir = os.Getenv("ZEST_BIN_DIR")
	if binDir == "" {
		// Build the binaries when the test runs on its own (make e2e passes ZEST_BIN_DIR).
		dir, err := os.MkdirTemp("", "zest-e2e-bin")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(file))
		for _, pkg := range []string{"./gateway/cmd/zest-gateway", "./services/inference/cmd/zest-inference",
			"./services/mcpgateway/cmd/zest-mcpgateway", "./services/toolhost/cmd/zest-toolhost"} {
			cmd := exec.Command("go", "build", "-o", dir+"/", pkg)
			cmd.Dir = root
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "build", pkg, err)
				os.Exit(1)
			}
		}
		binDir = dir
	}
	os.Exit(m.Run())
}

// Suite is one running copy of Zest.
type Suite struct {
	URL     string
	DataDir string
	Env     []string
}

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// suiteEnv returns the environment of a suite on free ports with data in a temp dir.
func suiteEnv(t *testing.T, extra ...string) (env []string, edge, dataDir string) {
	t.Helper()
	edge = freeAddr(t)
	dataDir = filepath.Join(t.TempDir(), "data")
	env = append(os.Environ(),
		"ZEST_EDGE_ADDR="+edge,
		"ZEST_INFERENCE_ADDR="+freeAddr(t),
		"ZEST_MCPGATEWAY_ADDR="+freeAddr(t),
		"ZEST_TOOLHOST_ADDR="+freeAddr(t),
		"ZEST_DATA_DIR="+dataDir,
		"ZEST_LOG_LEVEL=warn",
		"LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=", "LEMONADE_ALLOWED_ORIGINS=",
	)
	return append(env, extra...), edge, dataDir
}

// startSuite starts the four binaries and stops them (SIGTERM, then SIGKILL) at cleanup,
// failing the test when one does not exit cleanly.
func startSuite(t *testing.T, extra ...string) *Suite {
	t.Helper()
	env, edge, dataDir := suiteEnv(t, extra...)
	s := &Suite{URL: "http://" + edge, DataDir: dataDir, Env: env}
	for _, name := range []string{"zest-inference", "zest-toolhost", "zest-mcpgateway", "zest-gateway"} {
		cmd := exec.Command(filepath.Join(binDir, name))
		cmd.Env = env
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() { stopProcess(t, name, cmd, &logs) })
	}
	key := ""
	for _, kv := range extra {
		if v, ok := strings.CutPrefix(kv, "LEMONADE_API_KEY="); ok {
			key = v
		}
	}
	waitFor(t, 15*time.Second, func() error {
		req, _ := http.NewRequest("GET", s.URL+"/api/v1/health", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("health %d %s", resp.StatusCode, b)
		}
		return nil
	})
	return s
}

func stopProcess(t *testing.T, name string, cmd *exec.Cmd, logs *bytes.Buffer) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s exited with %v after SIGTERM; logs:\n%s", name, err, logs.String())
		}
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("%s did not stop within 15s of SIGTERM; killed. logs:\n%s", name, logs.String())
	}
}

// waitFor polls f until it succeeds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("not ready after %v: %v", d, err)
}

// Response is an HTTP answer read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body.
func (r Response) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object (status %d): %v\n%s", r.Status, err, r.Body)
	}
	return m
}

// do sends a request; headers are "Name: value" strings.
func do(t *testing.T, method, url, body string, headers ...string) Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		if strings.EqualFold(k, "Host") {
			req.Host = strings.TrimSpace(v)
			continue
		}
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}
