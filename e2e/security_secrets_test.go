package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
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
	testenv.Need(t, testenv.Root, "it reads the tool host's environment, which a non-dumpable process keeps from its own user")
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

// buildHostile builds the sandbox's hostile fixture server into dir.
func buildHostile(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "hostile")
	cmd := exec.Command("go", "build", "-o", bin, "./services/toolhost/internal/hostile")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the hostile fixture: %v\n%s", err, out)
	}
	return bin
}

// TestUnsandboxedServerCannotReadTheToolHost: a hostile server registered without a sandbox,
// on a tool host running as root with its defaults, walks up its ancestors' /proc entries: the
// tool host's environment (ZEST_SERVICE_KEY), descriptors and memory, and its shim's, are
// refused to it — the tool host and the shim are non-dumpable, and the server runs as nobody
// (ZEST_TOOLHOST_SERVER_UID), not as root. Only cmdline is readable, as for anyone.
func TestUnsandboxedServerCannotReadTheToolHost(t *testing.T) {
	hostile := buildHostile(t, sandboxWorkDir(t))
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_TOOLHOST_SERVER_UID=") // "": the default
	registerServer(t, s, map[string]any{"id": "hostile", "command": hostile})
	if r := admin(t, s, "POST", "/servers/hostile/connect", ""); r.Status != 200 {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	if sb := sandboxOf(t, s, "hostile"); sb != nil {
		t.Fatalf("the server is sandboxed: %v", sb)
	}
	if text, _ := sandboxCall(t, s, "hostile", "status", nil); !strings.Contains(text, "Uid: 65534 65534 65534 65534") {
		t.Fatalf("the unsandboxed server's status %q: want it to run as nobody", text)
	}
	text, isErr := sandboxCall(t, s, "hostile", "ancestors", nil)
	if isErr {
		t.Fatalf("ancestors: %s", text)
	}
	t.Logf("the server's ancestors: %s", text)
	var got []struct {
		Pid                       int
		Environ, Cmdline, Fd, Mem string
	}
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatal(err)
	}
	host := s.procs["zest-toolhost"].cmd.Process.Pid
	found := false
	for _, a := range got {
		found = found || a.Pid == host
		for what, v := range map[string]string{"environ": a.Environ, "fd/": a.Fd, "mem": a.Mem} {
			if !strings.Contains(v, "permission denied") {
				t.Errorf("the unsandboxed server read /proc/%d/%s (the tool host is %d): %s", a.Pid, what, host, v)
			}
		}
	}
	if !found || len(got) < 2 {
		t.Fatalf("the server's ancestors %s are not its shim and the tool host (%d)", text, host)
	}
}

// TestToolhostAsAUserCannotBeReadByItsServers: as deployed (compose and Kubernetes run the
// tool host as an unprivileged user), a server runs as the tool host's own user; the tool host
// and its shims being non-dumpable is then what keeps their /proc entries (environ, fd/, mem)
// from the server.
func TestToolhostAsAUserCannotBeReadByItsServers(t *testing.T) {
	const uid = 65532 // the deployment's user (deploy/compose.yaml)
	dir := sandboxWorkDir(t)
	traversableBy(t, filepath.Join(binDir, "zest-toolhost")) // a clone in a private directory
	hostile := buildHostile(t, dir)
	addr := freeAddr(t)
	cmd := exec.Command(filepath.Join(binDir, "zest-toolhost"), "-toolhost-stop-grace", "1s")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ZEST_TOOLHOST_ADDR="+addr, "ZEST_TOOLHOST_METRICS_ADDR=off", "ZEST_LOG_LEVEL=warn",
		"ZEST_SERVICE_KEY="+serviceKey, "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	p := startProc(t, "zest-toolhost", cmd, false)
	t.Cleanup(func() { p.stop(syscall.SIGTERM, 15*time.Second) })
	c := toolhostv1.NewToolHostServiceClient(dialService(t, addr, serviceKey))
	waitfor.NoError(t, 10*time.Second, func() error {
		_, err := c.ListServers(t.Context(), &toolhostv1.ListServersRequest{})
		return err
	})
	st := ensure(t, c, "hostile", hostile)
	args, _ := json.Marshal(map[string]any{"name": "ancestors", "arguments": map[string]any{}})
	r, err := c.Call(t.Context(), &toolhostv1.CallRequest{Id: "hostile", Method: "tools/call", Params: args})
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ Content []struct{ Text string } }
	if err := json.Unmarshal(r.GetResult(), &res); err != nil || len(res.Content) != 1 {
		t.Fatalf("ancestors: %s %v", r.GetResult(), err)
	}
	t.Logf("the server's ancestors: %s", res.Content[0].Text)
	var got []struct {
		Pid                       int
		Environ, Cmdline, Fd, Mem string
	}
	if err := json.Unmarshal([]byte(res.Content[0].Text), &got); err != nil {
		t.Fatal(err)
	}
	want := map[int]string{int(st.GetPid()): "the shim", p.cmd.Process.Pid: "the tool host"}
	for _, a := range got {
		if want[a.Pid] == "" {
			continue
		}
		for what, v := range map[string]string{"environ": a.Environ, "fd/": a.Fd, "mem": a.Mem} {
			if !strings.Contains(v, "permission denied") {
				t.Errorf("the server (uid %d, as the tool host) read %s's /proc/%d/%s: %s", uid, want[a.Pid], a.Pid, what, v)
			}
		}
		delete(want, a.Pid)
	}
	if len(want) > 0 {
		t.Fatalf("the server's ancestors miss %v", want)
	}
}

// TestServicesAreNotDumpable: every Zest service running as a user (as deployed, or `make
// run` by a user) keeps its /proc entries from the other processes of that user — a tool
// server the tool host runs as the same user among them: its environment holds Lemonade's
// keys (the edge, mcpgateway, inference), ZEST_SESSION_KEY and ZEST_SERVICE_KEY (mcpgateway).
func TestServicesAreNotDumpable(t *testing.T) {
	const uid = 65532
	dir := sandboxWorkDir(t)
	traversableBy(t, filepath.Join(binDir, "zest-toolhost")) // a clone in a private directory
	// mcpgateway's data dir, for that user.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	env, _, _ := suiteEnv(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_DATA_DIR="+filepath.Join(dir, "data"), "ZEST_LOG_LEVEL=info", "HOME="+dir)
	asUser := func(cmd *exec.Cmd) *exec.Cmd {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
		return cmd
	}
	for _, name := range []string{"zest-inference", "zest-toolhost", "zest-mcpgateway", "zest-gateway"} {
		cmd := asUser(exec.Command(filepath.Join(binDir, name)))
		cmd.Env, cmd.Dir = env, dir
		p := startProc(t, name, cmd, false)
		t.Cleanup(func() { p.stop(syscall.SIGTERM, 15*time.Second) })
		waitfor.NoError(t, 15*time.Second, func() error { // past its start (service.Main)
			if l := p.logs.String(); !strings.Contains(l, "grpc serving") && !strings.Contains(l, "http serving") {
				return fmt.Errorf("%s has not started: %s", name, l)
			}
			return nil
		})
		for entry, try := range map[string]string{"environ": "cat %s", "mem": "exec 3<%s", "fd": "ls %s"} {
			path := fmt.Sprintf("/proc/%d/%s", p.cmd.Process.Pid, entry)
			out, err := asUser(exec.Command("/bin/sh", "-c", fmt.Sprintf(try, path))).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "Permission denied") {
				t.Errorf("a process of %s's user read its /proc/%d/%s (%v): %.200q", name, p.cmd.Process.Pid, entry, err, out)
			}
		}
	}
}

// TestReservedReferenceRefusedAtRegistration: a server config whose env or bearer_token refers
// to a variable of Zest's own services (its keys) is refused when it is registered — 400 naming
// the field and the fix, nothing stored — rather than accepted and failing at connect (env) or
// sent to the server (bearer_token, which mcpgateway resolves in its own environment).
func TestReservedReferenceRefusedAtRegistration(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	for _, c := range []struct {
		name, field, want string
		cfg               map[string]any
	}{
		{"env", "env", "env TOKEN refers to ${ZEST_SERVICE_KEY}, a variable reserved for Zest's own services; no MCP server gets a ZEST_* or LEMONADE_* variable: put the value in another variable of the tool host's environment (e.g. TOKEN) and write ${TOKEN}",
			map[string]any{"id": "leaky", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}, "env": map[string]string{"TOKEN": "${ZEST_SERVICE_KEY}"}}},
		{"bearer_token", "bearer_token", "bearer_token refers to ${LEMONADE_ADMIN_API_KEY}, a variable reserved for Zest's own services; no MCP server gets a ZEST_* or LEMONADE_* variable: put the value in another variable of mcpgateway's environment (e.g. MCP_BEARER_TOKEN) and write ${MCP_BEARER_TOKEN}",
			map[string]any{"id": "leaky", "transport": "streamable-http", "url": "https://mcp.example.com/mcp", "bearer_token": "${LEMONADE_ADMIN_API_KEY}"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := admin(t, s, "POST", "/servers", jsonBody(t, c.cfg))
			if r.Status != 400 || errMessage(t, r) != "invalid server config: "+c.want {
				t.Fatalf("register: %d %s, want 400 saying %q", r.Status, r.Body, c.want)
			}
			if p, _ := r.JSON(t)["error"].(map[string]any)["param"].(string); p != c.field {
				t.Errorf("the error's param is %q, want %q (the form shows the error by that field)", p, c.field)
			}
			if r := admin(t, s, "GET", "/servers/leaky", ""); r.Status != 404 {
				t.Fatalf("the refused config was stored: %d %s", r.Status, r.Body)
			}
		})
	}
}
