// Package shim is a tiny process the tool host puts between itself and each MCP server so
// that no descendant of a server outlives it, even when the tool host is SIGKILLed and the
// server was started through a wrapper (npx, a shell script) or started helpers of its own in
// another session or process group (setsid, a daemon's double fork).
//
// The tool host starts the shim as the leader of a new process group, with a parent-death
// signal of SIGTERM. The shim makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so that
// every orphaned descendant is reparented to it rather than to init, and starts the server in
// its group with a parent-death signal of SIGKILL, sharing its stdin, stdout and stderr. Its
// descendants are then exactly the processes reached from it through /proc's parent links.
//
// Every way a server ends, ends with the shim killing every descendant it can find (SIGKILL,
// reap, look again, until none is left or CleanupTimeout has passed) before it exits:
//
//   - the server exits (its stdin was closed, it crashed): the shim cleans up and exits with
//     the server's status (dying of the same signal when the server died of one);
//   - the tool host stops it: the tool host sends the shim SIGTERM; the shim passes SIGTERM to
//     every descendant, gives them -stop-grace to exit, then SIGKILLs them all, cleans up and
//     exits. Only when the shim itself does not exit in time does the tool host SIGKILL the
//     process group, as a last resort;
//   - the tool host dies: the shim gets SIGTERM from its parent-death signal, sees that its
//     parent is gone, and SIGKILLs every descendant at once.
//
// SIGINT and SIGHUP are passed on to the server. The shim waits for any child (wait4(-1)):
// orphans reparented to it are reaped as they exit, and the server's status is kept when it
// exits.
package shim

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Flag is the first argument that runs the tool host binary as a shim: zest-toolhost
// --zest-shim [-stop-grace D] [-uid U -gid G] -- <command> <args…>.
const Flag = "--zest-shim"

// RunAs is the shim's arguments that run the server as uid:gid (with no supplementary group)
// while the shim itself stays as it was started (root): the server can then neither read nor
// signal its shim, which still kills every descendant in the end.
func RunAs(uid, gid int) []string {
	return []string{"-uid=" + strconv.Itoa(uid), "-gid=" + strconv.Itoa(gid)}
}

// CleanupTimeout bounds the shim's final kill-and-reap rounds; the tool host waits at least
// this long (after the stop grace) before it SIGKILLs the process group itself.
const CleanupTimeout = time.Second

// Main runs the shim with args (after Flag) and returns the exit code.
func Main(args []string) int {
	fs := flag.NewFlagSet("zest-shim", flag.ContinueOnError)
	grace := fs.Duration("stop-grace", 2*time.Second, "after passing SIGTERM on, how long the server and its descendants have to exit before they are SIGKILLed")
	uid := fs.Int("uid", -1, "run the server as this uid (with -gid); -1: as the shim runs")
	gid := fs.Int("gid", -1, "the server's gid, with -uid")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// Like the tool host, the shim may not be read by what it runs: its /proc entries (environ,
	// mem, fd/) are then closed to the server when both run as the same user, and only root
	// with CAP_SYS_PTRACE reads them (which is why the tool host runs servers as another user
	// when it is root).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "zest shim: cannot make itself non-dumpable (the server may read its /proc entries): %v\n", err)
	}
	args = fs.Args()
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "zest shim: no command given")
		return 2
	}
	parent := os.Getppid()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "zest shim: cannot become a child subreaper (descendants in other sessions may outlive the server): %v\n", err)
	}

	runtime.LockOSThread() // the server's parent-death signal is tied to this thread
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if *uid >= 0 {
		if *gid < 0 {
			*gid = *uid
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(*uid), Gid: uint32(*gid), Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "zest shim: start %s: %v\n", args[0], err)
		return 127
	}
	server := cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		var kill <-chan time.Time // set once SIGTERM was passed on
		for {
			select {
			case <-exited:
				return
			case <-kill:
				signalDescendants(syscall.SIGKILL)
				kill = nil
			case sig := <-sigs:
				switch {
				case os.Getppid() != parent: // the tool host is gone: take everything down now
					signalDescendants(syscall.SIGKILL)
				case sig == syscall.SIGTERM:
					signalDescendants(syscall.SIGTERM)
					if kill == nil {
						kill = time.After(*grace)
					}
				default:
					_ = cmd.Process.Signal(sig)
				}
			}
		}
	}()
	ws, ok := reap(server, 0) // instead of cmd.Wait, which would not reap the orphans
	close(exited)
	if left := cleanUp(CleanupTimeout); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "zest shim: %d descendants of the server could not be killed within %v: %v\n", len(left), CleanupTimeout, left)
	}
	switch {
	case !ok: // no child left to wait for: cannot happen while the server runs
		return 1
	case ws.Signaled():
		// Die of the same signal so that the tool host reports it faithfully: sent to this
		// thread, it is handled before the call returns.
		signal.Reset(ws.Signal())
		_ = unix.Tgkill(unix.Getpid(), unix.Gettid(), ws.Signal())
		return 128 + int(ws.Signal())
	case ws.Exited():
		return ws.ExitStatus()
	}
	return 1
}

// reap reaps exited children of the shim (wait4(-1); flags 0 waits for one to exit, WNOHANG
// takes only those already gone) until it reaps the server, whose status it returns with
// true, or none is left to reap. Every other child is an orphan reparented to the shim.
func reap(server, flags int) (syscall.WaitStatus, bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, flags, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil || pid <= 0:
			return 0, false
		case pid == server:
			return ws, true
		}
	}
}
