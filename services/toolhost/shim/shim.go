// Package shim is a tiny process the tool host puts between itself and each MCP server so
// that no descendant outlives the tool host, even when the tool host is SIGKILLed and the
// server was started through a wrapper (npx, a shell script) that forks the real server.
//
// The tool host starts the shim as the leader of a new process group, with a parent-death
// signal of SIGTERM. The shim starts the server in that same group with a parent-death
// signal of SIGKILL, sharing its stdin, stdout and stderr. When the tool host dies, the shim
// gets SIGTERM, sees that its parent is gone, and SIGKILLs the whole group. While the tool
// host lives, signals are passed on to the server, and the shim exits with the server's
// status.
package shim

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
)

// Flag is the first argument that runs the tool host binary as a shim: zest-toolhost
// --zest-shim -- <command> <args…>.
const Flag = "--zest-shim"

// Main runs the shim with args (after Flag) and returns the exit code.
func Main(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "zest shim: no command given")
		return 2
	}
	parent := os.Getppid()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	runtime.LockOSThread() // the child's parent-death signal is tied to this thread
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "zest shim: start %s: %v\n", args[0], err)
		return 127
	}
	go func() {
		for sig := range sigs {
			if os.Getppid() != parent { // the tool host is gone: take the whole group down
				_ = syscall.Kill(0, syscall.SIGKILL)
				return
			}
			_ = cmd.Process.Signal(sig)
		}
	}()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			// Die of the same signal so that the tool host reports it faithfully.
			signal.Reset(ws.Signal())
			_ = syscall.Kill(os.Getpid(), ws.Signal())
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}
