package shim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
	"golang.org/x/sys/unix"
)

// The test binary is also the shim (as zest-toolhost is), and the tool host in
// TestParentDeath: "--test-parent <args…>" starts the shim as the tool host does and copies
// its stdout, after a first line with the shim's pid.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case Flag:
			os.Exit(Main(os.Args[2:]))
		case "--test-parent":
			os.Exit(parent(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

func parent(args []string) int {
	runtime.LockOSThread()
	cmd := exec.Command(os.Args[0], append([]string{Flag}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	io.Copy(os.Stdout, out)
	cmd.Wait()
	for { // until killed
		_ = unix.Pause()
	}
}

// escaping is a server (a shell) that starts `sleep 300` in a session of its own, prints its
// pid, then runs then.
func escaping(then string) []string {
	return []string{"/bin/sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; " + then}
}

// runShim starts the shim as the tool host does and returns it with a reader of its stdout
// and a writer to its stdin.
func runShim(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{Flag}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return cmd, bufio.NewReader(out), in
}

func readPid(t *testing.T, r *bufio.Reader) int {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading a pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if !alive(pid) {
		t.Fatalf("pid %d is not running", pid)
	}
	return pid
}

// alive says whether pid runs (a zombie does not).
func alive(pid int) bool {
	p, ok := readStat(pid, make([]byte, 512))
	return ok && p.state != 'Z'
}

// present says whether pid exists at all, zombie or not.
func present(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

func killOnCleanup(t *testing.T, pids ...int) {
	t.Cleanup(func() {
		for _, pid := range pids {
			if alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// TestServerExitTakesEscapedDescendantsAlong: when the server exits, the helper it started in
// another session is killed and reaped before the shim exits with the server's status.
func TestServerExitTakesEscapedDescendantsAlong(t *testing.T) {
	cmd, out, in := runShim(t, escaping("read x; exit 3")...) // exits once the test has seen the helper run
	helper := readPid(t, out)
	killOnCleanup(t, helper)
	in.Close()
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("shim exit: %v, want the server's status 3", err)
	}
	if present(helper) {
		t.Fatalf("the server's helper %d outlived the shim", helper)
	}
}

// TestSIGTERMThenGraceThenSIGKILL: the shim passes SIGTERM to the server and its
// descendants; those that ignore it are SIGKILLed after the grace, and all are gone when the
// shim exits.
func TestSIGTERMThenGraceThenSIGKILL(t *testing.T) {
	t.Run("the server exits on SIGTERM", func(t *testing.T) {
		cmd, out, _ := runShim(t, escaping("exec sleep 300")...)
		helper := readPid(t, out)
		killOnCleanup(t, helper)
		began := time.Now()
		syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		err := cmd.Wait()
		if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Fatalf("shim exit: %v, want death by SIGTERM as the server's", err)
		}
		if present(helper) {
			t.Fatalf("helper %d outlived the shim", helper)
		}
		if d := time.Since(began); d > 2*time.Second {
			t.Fatalf("stopping took %v, want no wait for the grace", d)
		}
	})
	t.Run("everything ignores SIGTERM", func(t *testing.T) {
		const grace = 300 * time.Millisecond
		cmd, out, _ := runShim(t, "-stop-grace="+grace.String(), "--", "/bin/sh", "-c",
			`trap "" TERM; setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; exec sleep 300`)
		helper := readPid(t, out)
		killOnCleanup(t, helper)
		began := time.Now()
		syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
		d := time.Since(began)
		if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("shim exit: %v, want death by SIGKILL as the server's", cmd.ProcessState)
		}
		if present(helper) {
			t.Fatalf("helper %d outlived the shim", helper)
		}
		if d < grace || d > grace+CleanupTimeout+2*time.Second {
			t.Fatalf("stopped after %v, want the grace of %v and then SIGKILL", d, grace)
		}
	})
}

// TestParentDeath: when the shim's parent (the tool host) is SIGKILLed, the server and the
// helper it started in another session are killed too.
func TestParentDeath(t *testing.T) {
	// Become a subreaper, so that the orphaned shim comes to this test, which can wait for it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	p := exec.Command(os.Args[0], append([]string{"--test-parent", "--"}, escaping("exec sleep 300")...)...)
	p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := p.StdoutPipe()
	p.Stderr = os.Stderr
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	shimPid, helper := readPid(t, out), readPid(t, out)
	killOnCleanup(t, shimPid, helper)
	server := 0
	for _, d := range descendants(shimPid) {
		if d.ppid == shimPid {
			server = d.pid
		}
	}
	if server == 0 {
		t.Fatal("no server under the shim")
	}
	p.Process.Kill()
	p.Wait()

	exited := make(chan error, 1)
	go func() {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(shimPid, &ws, 0, nil) // the orphaned shim is this process's child now
		exited <- err
	}()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("waiting for the orphaned shim: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the shim did not exit within 10s of its parent's death")
	}
	for _, pid := range []int{server, helper} {
		if present(pid) {
			t.Errorf("pid %d outlived the tool host", pid)
		}
	}
}

// TestOrphansAreReapedWhileTheServerRuns: a helper the server orphaned (double fork, new
// session) comes to the shim, and is reaped by it when it exits while the server still runs:
// no zombie piles up under a long-lived server.
func TestOrphansAreReapedWhileTheServerRuns(t *testing.T) {
	cmd, out, _ := runShim(t, "/bin/sh", "-c", `(setsid sh -c 'echo $$; exec sleep 300' </dev/null 2>/dev/null &); exec sleep 300`)
	orphan := readPid(t, out)
	killOnCleanup(t, orphan)
	shimPid := cmd.Process.Pid
	waitfor.True(t, 10*time.Second, "the orphan to come to the shim", func() bool {
		p, ok := readStat(orphan, make([]byte, 512))
		return ok && p.ppid == shimPid
	})
	syscall.Kill(orphan, syscall.SIGKILL)
	waitfor.True(t, 10*time.Second, "the orphan to be reaped", func() bool { return !present(orphan) })
	if !alive(shimPid) {
		t.Fatal("the shim exited with its server still running")
	}
}

// TestRunAsAnotherUser: with RunAs the server runs as that user with no supplementary group,
// while the shim stays root and non-dumpable: the server can neither read its shim's
// environment and descriptors nor signal it. Without RunAs the server runs as the shim does.
func TestRunAsAnotherUser(t *testing.T) {
	testenv.Need(t, testenv.Root, "the shim drops to another user only from root")
	probe := `id -u; id -G; cat /proc/$PPID/environ >/dev/null 2>&1 && echo environ-read || echo environ-refused; ` +
		`ls /proc/$PPID/fd >/dev/null 2>&1 && echo fd-read || echo fd-refused; kill -0 $PPID 2>/dev/null && echo signalled || echo signal-refused`
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"as nobody", append(RunAs(65534, 65534), "--", "/bin/sh", "-c", probe), []string{"65534", "65534", "environ-refused", "fd-refused", "signal-refused"}},
		{"as the shim runs (root)", []string{"--", "/bin/sh", "-c", probe}, []string{"0", "0", "environ-read", "fd-read", "signalled"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd, out, in := runShim(t, c.args...)
			in.Close()
			for _, want := range c.want {
				line, err := out.ReadString('\n')
				if got := strings.TrimSpace(line); err != nil || got != want {
					t.Fatalf("got %q (%v), want %q", got, err, want)
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("the shim: %v", err)
			}
		})
	}
}
