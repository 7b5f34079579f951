package e2e

import (
	"bufio"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunScriptStopsEverythingOnCtrlC runs scripts/run.sh (what `make run` runs), waits for
// it to say the suite is up, sends SIGINT to its process group as a terminal's Ctrl-C does,
// and checks that the script exits and none of the four services is left.
func TestRunScriptStopsEverythingOnCtrlC(t *testing.T) {
	env, edge, dataDir := suiteEnv(t, "ZEST_BIN_DIR="+binDir)
	cmd := exec.Command(filepath.Join(repoRoot(), "scripts", "run.sh"))
	cmd.Env = env
	// The reserved sockets go to run.sh as fds 3–6, and from there each to its service.
	for i, name := range []string{"zest-gateway", "zest-inference", "zest-mcpgateway", "zest-toolhost"} {
		f := takeSocket(envOf(env, listenVars[name]))
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		cmd.Env = append(cmd.Env, "ZEST_LISTEN_FD_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+"="+strconv.Itoa(3+i))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	err = cmd.Start()
	for _, f := range cmd.ExtraFiles {
		f.Close() // the services own their sockets now
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })

	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen strings.Builder
	waitLine := func(substr string) string {
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("run.sh ended before %q; output:\n%s", substr, seen.String())
				}
				seen.WriteString(l + "\n")
				if strings.Contains(l, substr) {
					return l
				}
			case <-timeout:
				t.Fatalf("no %q within 20s; output:\n%s", substr, seen.String())
			}
		}
	}
	waitLine("Zest is up at http://" + edge)
	if r := do(t, "GET", "http://"+edge+"/live", ""); r.Status != 200 {
		t.Fatalf("/live: %d", r.Status)
	}
	// With no key set, the run makes an admin key and prints the console's link with it.
	link := regexp.MustCompile(`Console: (http://\S+/)#key=([0-9a-f]{32})`).FindStringSubmatch(waitLine("Console: "))
	if len(link) != 3 || link[1] != "http://"+edge+"/" {
		t.Fatalf("no console link with a key: %q", seen.String())
	}
	if r := do(t, "GET", link[1], ""); r.Status != 200 || !strings.Contains(string(r.Body), "Zest console") {
		t.Fatalf("the console: %d", r.Status)
	}
	if r := do(t, "GET", "http://"+edge+"/internal/mcp/servers", "", "Authorization: Bearer "+link[2]); r.Status != 200 {
		t.Fatalf("the printed key is not the admin key: %d %s", r.Status, r.Body)
	}
	if r := do(t, "GET", "http://"+edge+"/internal/mcp/servers", ""); r.Status != 401 {
		t.Fatalf("administration without the key: %d", r.Status)
	}
	if !strings.Contains(seen.String(), dataDir) {
		t.Errorf("run.sh did not report the data dir %s", dataDir)
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	stopping := waitLine("stopping Zest (pids")
	waitLine("stopped")
	go func() { _, _ = io.Copy(io.Discard, out) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("run.sh did not exit after Ctrl-C")
	}
	_, after, ok := strings.Cut(stopping, "pids")
	pids := regexp.MustCompile(`\d+`).FindAllString(after, -1)
	if !ok || len(pids) != 4 {
		t.Fatalf("want four service pids in %q", stopping)
	}
	for _, p := range pids {
		pid, _ := strconv.Atoi(p)
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("service pid %d still exists after Ctrl-C (kill -0: %v)", pid, err)
		}
	}
}
