package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
)

// wrapper writes a shell script that runs node as its child (a grandchild of the tool
// host's shim), as npx does.
func wrapper(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wrapper.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nnode \"$@\"\necho wrapper-done >&2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// escapingWrapper writes a shell script that starts a helper, `setsid sleep 300`, in a
// session and process group of its own (out of reach of a kill of the server's group), writes
// the helper's pid to the file returned, then runs node in its place.
func escapingWrapper(t *testing.T) (script, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	script, pidFile = filepath.Join(dir, "escaping.sh"), filepath.Join(dir, "helper.pid")
	src := "#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\necho $! > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + "\nexec node \"$@\"\n"
	if err := os.WriteFile(script, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, pidFile
}

// helperPid reads the pid an escaping wrapper wrote, and kills the helper at cleanup should
// the test fail.
func helperPid(t *testing.T, pidFile string) int {
	t.Helper()
	var pid int
	waitfor.NoError(t, 10*time.Second, func() error {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			_, err = fmt.Sscan(string(b), &pid)
		}
		return err
	})
	if !running(pid) {
		t.Fatalf("the helper %d is not running", pid)
	}
	t.Cleanup(func() {
		if running(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

func waitNotRunning(t *testing.T, what string, pid int) {
	t.Helper()
	waitfor.NoError(t, 10*time.Second, func() error {
		if running(pid) {
			return fmt.Errorf("%s: the helper %d still runs", what, pid)
		}
		return nil
	})
}

func echoVia(t *testing.T, c toolhostv1.ToolHostServiceClient, id, msg string) {
	t.Helper()
	p, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]any{"message": msg}})
	r, err := c.Call(t.Context(), &toolhostv1.CallRequest{Id: id, Method: "tools/call", Params: p})
	if err != nil || !strings.Contains(string(r.GetResult()), "Echo: "+msg) {
		t.Fatalf("echo via %s: %v %v", id, r, err)
	}
}

// descendants lists live processes whose process group is one of pgids.
func inGroups(pgids []int) []string {
	want := map[int]bool{}
	for _, g := range pgids {
		want[g] = true
	}
	entries, _ := os.ReadDir("/proc")
	var left []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 > len(s) {
			continue
		}
		var state string
		var ppid, pgrp int
		fmt.Sscanf(s[i+2:], "%s %d %d", &state, &ppid, &pgrp)
		if want[pgrp] {
			left = append(left, fmt.Sprintf("pid %s (%s) state %s", e.Name(), s[strings.IndexByte(s, '(')+1:i], state))
		}
	}
	return left
}

func waitGone(t *testing.T, what string, pgids []int) {
	t.Helper()
	waitfor.NoError(t, 10*time.Second, func() error {
		if left := inGroups(pgids); len(left) > 0 {
			return fmt.Errorf("%s: processes left: %v", what, left)
		}
		return nil
	})
}

func TestToolhostSignalsLeaveNoChild(t *testing.T) {
	se := serverEverything(t)
	wrap := wrapper(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			escaping, pidFile := escapingWrapper(t)
			c, th := startToolhost(t)
			direct := ensure(t, c, "direct", "node", se)
			wrapped := ensure(t, c, "wrapped", wrap, se)
			escaped := ensure(t, c, "escaping", escaping, se)
			echoVia(t, c, "direct", "a")
			echoVia(t, c, "wrapped", "b")
			echoVia(t, c, "escaping", "c")
			helper := helperPid(t, pidFile)
			pgids := []int{int(direct.GetPid()), int(wrapped.GetPid()), int(escaped.GetPid())}
			if n := len(inGroups(pgids)); n < 6 { // shim+node, shim+sh+node, shim+node
				t.Fatalf("expected the process trees to be running, found %d processes: %v", n, inGroups(pgids))
			}
			if err := th.signal(sig); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("tool host log:\n%s", th.logs)
				}
			})
			what := fmt.Sprintf("after %v to the tool host", sig)
			waitGone(t, what, pgids)
			waitNotRunning(t, what, helper)
		})
	}
}

// TestToolhostStopLeavesNoEscapedHelper: a helper a server started in a session of its own
// ends with the server, on Stop and when the server exits by itself.
func TestToolhostStopLeavesNoEscapedHelper(t *testing.T) {
	se := serverEverything(t)
	c, _ := startToolhost(t)
	t.Run("stop", func(t *testing.T) {
		escaping, pidFile := escapingWrapper(t)
		st := ensure(t, c, "escaping", escaping, se)
		helper := helperPid(t, pidFile)
		if _, err := c.Stop(t.Context(), &toolhostv1.StopRequest{Id: "escaping"}); err != nil {
			t.Fatal(err)
		}
		if running(helper) || len(inGroups([]int{int(st.GetPid())})) > 0 {
			t.Fatalf("after Stop returned: helper running %v, left in the group %v", running(helper), inGroups([]int{int(st.GetPid())}))
		}
	})
	t.Run("the server exits", func(t *testing.T) {
		escaping, pidFile := escapingWrapper(t)
		st := ensure(t, c, "escaping", escaping, se)
		helper := helperPid(t, pidFile)
		var server int
		for _, p := range inGroups([]int{int(st.GetPid())}) {
			if strings.Contains(p, "(node)") {
				fmt.Sscanf(p, "pid %d", &server)
			}
		}
		if server == 0 {
			t.Fatalf("no node in %v", inGroups([]int{int(st.GetPid())}))
		}
		syscall.Kill(server, syscall.SIGKILL)
		waitNotRunning(t, "after the server was killed", helper)
		waitGone(t, "after the server was killed", []int{int(st.GetPid())})
	})
}

func TestWrapperStartStopCyclesLeaveNothing(t *testing.T) {
	se := serverEverything(t)
	wrap := wrapper(t)
	c, _ := startToolhost(t)
	var pgids []int
	for i := range 50 {
		st := ensure(t, c, "cycle", wrap, se)
		pgids = append(pgids, int(st.GetPid()))
		if i%10 == 0 {
			echoVia(t, c, "cycle", fmt.Sprint(i))
		}
		if _, err := c.Stop(t.Context(), &toolhostv1.StopRequest{Id: "cycle"}); err != nil {
			t.Fatal(err)
		}
	}
	if left := inGroups(pgids); len(left) > 0 {
		t.Fatalf("after 50 start/stop cycles, processes left: %v", left)
	}
}

// rawServer writes a stdio MCP server in plain Node (no SDK) with tools the tests need:
// environ answers the names and values of its environment as a JSON object.
func rawServer(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "raw-server.js")
	src := `const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const answer = (id, text) => send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text }] } });
require("readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  if (m.method === "initialize") {
    send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "raw", version: "1" } } });
  } else if (m.method === "tools/list") {
    send({ jsonrpc: "2.0", id: m.id, result: { tools: [{ name: "environ", inputSchema: { type: "object" } }] } });
  } else if (m.method === "tools/call" && m.params.name === "environ") {
    answer(m.id, JSON.stringify(process.env));
  } else {
    send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "no " + m.method } });
  }
}).on("close", () => process.exit(0));
`
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestToolhostChildEnvironment: a server started by the binary (through its shim) gets its
// declared references and the allowed variables of the tool host, and none of the tool host's
// keys, settings or other variables.
func TestToolhostChildEnvironment(t *testing.T) {
	needNode(t)
	c, _ := startToolhost(t, "LEMONADE_ADMIN_API_KEY=admin-key-must-not-leak", "TOOLHOST_E2E_UNDECLARED=must-not-leak",
		"TOOLHOST_E2E_SECRET=declared-value", "ZEST_TOOLHOST_ENV_ALLOW=NODE_*,TOOLHOST_E2E_EXTRA", "TOOLHOST_E2E_EXTRA=allowed", "NODE_E2E=allowed")
	ensureSpec(t, c, &toolhostv1.ServerSpec{Id: "raw", Command: "node", Args: []string{rawServer(t)}, TimeoutMs: 30000,
		Env: map[string]string{"API_TOKEN": "${TOOLHOST_E2E_SECRET}"}})
	var env map[string]string
	if err := json.Unmarshal([]byte(callText(t, c, "raw", "environ")), &env); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"API_TOKEN": "declared-value", "TOOLHOST_E2E_EXTRA": "allowed", "NODE_E2E": "allowed", "PATH": os.Getenv("PATH")} {
		if env[k] != want {
			t.Errorf("server's %s = %q, want %q", k, env[k], want)
		}
	}
	fixed := map[string]bool{"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "LANG": true, "LANGUAGE": true, "TZ": true,
		"TMPDIR": true, "TEMP": true, "TMP": true, "TERM": true, "SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "NODE_EXTRA_CA_CERTS": true,
		"API_TOKEN": true, "TOOLHOST_E2E_EXTRA": true}
	for k, v := range env {
		if !fixed[k] && !strings.HasPrefix(k, "LC_") && !strings.HasPrefix(k, "NODE_") {
			t.Errorf("the server got %s, which is neither declared nor allowed", k)
		}
		if strings.HasPrefix(k, "ZEST_") || strings.HasPrefix(k, "LEMONADE_") || strings.Contains(v, "must-not-leak") || v == serviceKey {
			t.Errorf("the server got the tool host's %s", k)
		}
	}
}
