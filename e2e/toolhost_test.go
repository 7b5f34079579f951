package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
)

func serverEverything(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(filepath.Dir(file)), "scripts", "peers", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("npm peers are not installed (%v): run `make peers`", err)
	}
	return p
}

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

// startToolhost runs the zest-toolhost binary alone and returns its client and process.
func startToolhost(t *testing.T) (toolhostv1.ToolHostServiceClient, *exec.Cmd, *bytes.Buffer) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(filepath.Join(binDir, "zest-toolhost"), "-toolhost-stop-grace", "1s")
	cmd.Env = append(os.Environ(), "ZEST_TOOLHOST_ADDR="+addr, "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=", "ZEST_SERVICE_KEY="+serviceKey)
	started := handOver(cmd, "zest-toolhost")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	err := cmd.Start()
	started()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	cc, err := grpcdial.Dial(addr, serviceKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c := toolhostv1.NewToolHostServiceClient(cc)
	waitFor(t, 10*time.Second, func() error {
		_, err := c.ListServers(t.Context(), &toolhostv1.ListServersRequest{})
		return err
	})
	return c, cmd, &logs
}

func ensure(t *testing.T, c toolhostv1.ToolHostServiceClient, id, command string, args ...string) *toolhostv1.ServerStatus {
	t.Helper()
	r, err := c.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: &toolhostv1.ServerSpec{Id: id, Command: command, Args: args, TimeoutMs: 30000}})
	if err != nil {
		t.Fatalf("EnsureStarted %s: %v", id, err)
	}
	return r.GetStatus()
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
	deadline := time.Now().Add(10 * time.Second)
	var left []string
	for time.Now().Before(deadline) {
		if left = inGroups(pgids); len(left) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: processes left: %v", what, left)
}

func TestToolhostSignalsLeaveNoChild(t *testing.T) {
	se := serverEverything(t)
	wrap := wrapper(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			c, cmd, logs := startToolhost(t)
			direct := ensure(t, c, "direct", "node", se)
			wrapped := ensure(t, c, "wrapped", wrap, se)
			echoVia(t, c, "direct", "a")
			echoVia(t, c, "wrapped", "b")
			pgids := []int{int(direct.GetPid()), int(wrapped.GetPid())}
			if n := len(inGroups(pgids)); n < 4 { // shim+node, shim+sh+node
				t.Fatalf("expected the process trees to be running, found %d processes: %v", n, inGroups(pgids))
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitGone(t, fmt.Sprintf("after %v to the tool host (logs:\n%s)", sig, logs), pgids)
		})
	}
}

func TestWrapperStartStopCyclesLeaveNothing(t *testing.T) {
	se := serverEverything(t)
	wrap := wrapper(t)
	c, _, _ := startToolhost(t)
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
