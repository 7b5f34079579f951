package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// environOf is what /proc/<pid>/environ of a process shows: the environment it started with.
func environOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "\x00", "\n")
}

// refusedAtStart runs a service binary with env and returns its exit code and output: for a
// configuration it must refuse before serving (it would otherwise run until killed).
func refusedAtStart(t *testing.T, name string, env []string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, name))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("%s: %v, want it to exit refusing its configuration; output:\n%s", name, err, out)
	}
	return exit.ExitCode(), string(out)
}

// TestServiceKeyFromAFile: with ZEST_SERVICE_KEY_FILE the tool host and mcpgateway take the
// service key from a file (mode 0600), tool calls work, and the key is in neither process's
// environment; a file others may read, or both variables at once, stop each at start with the
// variable and the fix.
func TestServiceKeyFromAFile(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "service.key")
	if err := os.WriteFile(keyFile, []byte(serviceKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_SERVICE_KEY=", "ZEST_SERVICE_KEY_FILE="+keyFile)
	registerServer(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}})
	if r := admin(t, s, "POST", "/servers/echo/tools/call", `{"name":"echo","arguments":{"text":"from-the-file"}}`); r.Status != 200 || !strings.Contains(string(r.Body), "from-the-file") {
		t.Fatalf("a tool call with the service key from a file: %d %s", r.Status, r.Body)
	}
	for _, name := range []string{"zest-toolhost", "zest-mcpgateway"} {
		if env := environOf(t, s.procs[name].cmd.Process.Pid); strings.Contains(env, serviceKey) {
			t.Errorf("%s holds the service key in its environment", name)
		}
	}

	for _, c := range []struct {
		name string
		mode os.FileMode
		env  []string
		want string
	}{
		{"readable by others", 0o644, []string{"ZEST_SERVICE_KEY_FILE=" + keyFile}, "ZEST_SERVICE_KEY_FILE " + keyFile + " is open to group or others (mode 0644): chmod 600 " + keyFile},
		{"both variables", 0o600, []string{"ZEST_SERVICE_KEY=" + serviceKey, "ZEST_SERVICE_KEY_FILE=" + keyFile}, "ZEST_SERVICE_KEY and ZEST_SERVICE_KEY_FILE are both set: keep one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.Chmod(keyFile, c.mode); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"zest-toolhost", "zest-mcpgateway"} {
				env := append(append(os.Environ(), "ZEST_TOOLHOST_ADDR="+unusedAddr(t), "ZEST_MCPGATEWAY_ADDR="+unusedAddr(t),
					"ZEST_DATA_DIR="+t.TempDir(), "ZEST_SERVICE_KEY="), c.env...)
				code, out := refusedAtStart(t, name, env)
				if code != 2 || !strings.Contains(out, c.want) || strings.Contains(out, serviceKey) {
					t.Errorf("%s: exit %d, output %q; want 2 and %q, never the key", name, code, out, c.want)
				}
			}
		})
	}
}

// TestToolhostDropsLemonadeKeys: started with Lemonade's keys in its environment (one
// environment for every service, as `make run` and a shell with the keys exported give it), the
// tool host executes itself again without them: /proc/<pid>/environ of the same pid holds
// neither, its log says which it dropped, and it serves as before.
func TestToolhostDropsLemonadeKeys(t *testing.T) {
	const apiKey = "e2e-api-key-to-drop"
	s := startSuite(t, "LEMONADE_API_KEY="+apiKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	th := s.procs["zest-toolhost"]
	env := environOf(t, th.cmd.Process.Pid)
	if strings.Contains(env, apiKey) || strings.Contains(env, adminKey) {
		t.Fatalf("the tool host holds a Lemonade key in its environment:\n%s", env)
	}
	if logs := s.Logs("zest-toolhost"); !strings.Contains(logs, "dropped Lemonade's keys") || !strings.Contains(logs, "LEMONADE_API_KEY") ||
		strings.Contains(logs, apiKey) || strings.Contains(logs, adminKey) {
		t.Fatalf("the tool host's log does not name what it dropped (or shows a key):\n%s", logs)
	}
	registerServer(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}})
	if r := admin(t, s, "POST", "/servers/echo/tools/call", `{"name":"echo","arguments":{"text":"still-serving"}}`); r.Status != 200 || !strings.Contains(string(r.Body), "still-serving") {
		t.Fatalf("a tool call: %d %s", r.Status, r.Body)
	}
}
