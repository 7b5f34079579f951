package shim

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// proc is one process as /proc/<pid>/stat shows it.
type proc struct {
	pid, ppid int
	state     byte // R, S, D, Z, …
}

// procs lists every process of the system (those that vanish while being read are skipped).
func procs() []proc {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]proc, 0, len(names))
	buf := make([]byte, 512)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if p, ok := readStat(pid, buf); ok {
			out = append(out, p)
		}
	}
	return out
}

// readStat parses "pid (comm) state ppid …"; comm may hold spaces and parentheses.
func readStat(pid int, buf []byte) (proc, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	n, _ := f.Read(buf)
	f.Close()
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+4 > len(b) {
		return proc{}, false
	}
	fields := bytes.Fields(b[i+2:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return proc{}, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, state: fields[0][0]}, true
}

// descendants returns every process below root, following parent links.
func descendants(root int) []proc {
	all := procs()
	children := make(map[int][]proc, len(all))
	for _, p := range all {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if c.pid == root { // cannot happen in a tree; guards a /proc read mid-change
				continue
			}
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// signalDescendants sends sig to every live descendant of the shim.
func signalDescendants(sig syscall.Signal) {
	for _, p := range descendants(os.Getpid()) {
		if p.state != 'Z' {
			_ = syscall.Kill(p.pid, sig)
		}
	}
}

// cleanUp kills every descendant of the shim and reaps them, round after round (a dying
// process may have forked, and its children come to the shim), until none is left or timeout
// has passed. It returns the pids still there. The server must have been waited for.
func cleanUp(timeout time.Duration) []int {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		reap(-1, syscall.WNOHANG) // the server was reaped: every child is an orphan
		left := descendants(os.Getpid())
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			pids := make([]int, len(left))
			for i, p := range left {
				pids[i] = p.pid
			}
			return pids
		}
		for _, p := range left {
			if p.state != 'Z' {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
		// Killed processes die, and their orphans come to the shim, asynchronously; nothing
		// signals a descendant's death to the shim but its children's, so look again shortly.
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}
