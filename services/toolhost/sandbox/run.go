package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/zestmcp/zest/lib/sandboxspec"
)

// landlockABI is the kernel's Landlock ABI version, 0 when it has none.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// parseArgs splits "PLAN -- path args…".
func parseArgs(args []string) (*Plan, string, []string, error) {
	if len(args) < 3 || args[1] != "--" {
		return nil, "", nil, fmt.Errorf("usage: %s PLAN -- program [args…]", Flag)
	}
	var p Plan
	if err := json.Unmarshal([]byte(args[0]), &p); err != nil {
		return nil, "", nil, fmt.Errorf("plan: %w", err)
	}
	return &p, args[2], args[3:], nil
}

// Main is the outer step (Flag), run by the shim outside the sandbox: it writes the seccomp
// filter for bwrap, drops to the sandbox user and execs bwrap. It returns
// only on failure, with the exit code; the message on stderr reaches the server's status.
func Main(args []string) int {
	p, path, sargs, err := parseArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zest sandbox:", err)
		return 2
	}
	fd, err := seccompFD()
	if err != nil {
		fmt.Fprintln(os.Stderr, "zest sandbox: seccomp filter:", err)
		return 1
	}
	argv := append([]string{p.Bwrap}, BwrapArgs(p, fd, statPath)...)
	inner, _ := json.Marshal(p)
	argv = append(append(argv, "--", p.Exe, InnerFlag, string(inner), "--", path), sargs...)
	if p.UID > 0 {
		// Credentials last: an unprivileged bwrap makes an unprivileged user namespace, in which
		// the host's file permissions and RLIMIT_NPROC hold. Go applies these to every thread.
		if err := syscall.Setgroups([]int{}); err != nil {
			fmt.Fprintln(os.Stderr, "zest sandbox: setgroups:", err)
			return 1
		}
		if err := syscall.Setresgid(p.GID, p.GID, p.GID); err != nil {
			fmt.Fprintln(os.Stderr, "zest sandbox: setresgid:", err)
			return 1
		}
		if err := syscall.Setresuid(p.UID, p.UID, p.UID); err != nil {
			fmt.Fprintln(os.Stderr, "zest sandbox: setresuid:", err)
			return 1
		}
	}
	err = syscall.Exec(p.Bwrap, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "zest sandbox: exec %s: %v (install bubblewrap: apt-get install bubblewrap)\n", p.Bwrap, err)
	return 127
}

func setRlimits(p *Plan) error {
	set := func(name string, res int, soft, hard uint64) error {
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: soft, Max: hard}); err != nil {
			return fmt.Errorf("%s %d: %w", name, soft, err)
		}
		return nil
	}
	cpu := uint64(p.CPUSeconds)
	// CPU: SIGXCPU at the soft limit, SIGKILL one second of CPU later for a server that
	// ignores it (Go programs do, unless they ask os/signal for it).
	return firstErr(
		set("RLIMIT_AS", unix.RLIMIT_AS, uint64(p.MemoryBytes), uint64(p.MemoryBytes)),
		set("RLIMIT_NPROC", unix.RLIMIT_NPROC, uint64(p.MaxPids), uint64(p.MaxPids)),
		set("RLIMIT_CPU", unix.RLIMIT_CPU, cpu, cpu+1),
		set("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, uint64(p.OpenFiles), uint64(p.OpenFiles)),
	)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// DeniedSyscalls are refused (EPERM) inside the sandbox: what changes the kernel, mounts,
// namespaces, other processes' memory, keyrings, BPF, performance counters, and the like.
// Everything else is allowed: servers are ordinary programs (node, python, go) whose needs
// an allow-list would break on each runtime's next version.
var DeniedSyscalls = []string{
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "delete_module", "finit_module",
	"fsconfig", "fsmount", "fsopen", "fspick", "init_module", "iopl", "ioperm", "kexec_file_load",
	"kexec_load", "keyctl", "lookup_dcookie", "mount", "mount_setattr", "move_mount",
	"name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open",
	"pivot_root", "process_vm_readv", "process_vm_writev", "ptrace", "quotactl", "reboot",
	"request_key", "setns", "settimeofday", "swapoff", "swapon", "syslog", "umount2", "unshare",
	"userfaultfd", "uselib", "vhangup",
}

// Filter assembles the seccomp program bwrap loads (struct sock_filter, native byte order).
func Filter() ([]byte, error) {
	pol := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{{
		Action: seccomp.ActionErrno, Names: DeniedSyscalls,
	}}}
	insts, err := pol.Assemble()
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// seccompFD writes the filter to a memfd left open across exec for bwrap's --seccomp.
func seccompFD() (int, error) {
	prog, err := Filter()
	if err != nil {
		return 0, err
	}
	fd, err := unix.MemfdCreate("zest-seccomp", 0) // no CLOEXEC: bwrap reads it
	if err != nil {
		return 0, err
	}
	if _, err := unix.Write(fd, prog); err != nil {
		return 0, err
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return 0, err
	}
	return fd, nil
}

// statPath reports whether path exists on this machine, and whether it is a symbolic link
// (with its target) or a directory.
func statPath(path string) (exists, dir bool, link string) {
	fi, err := os.Lstat(path)
	if err != nil {
		return false, false, ""
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		l, _ := os.Readlink(path)
		return true, false, l
	}
	return true, fi.IsDir(), ""
}

// BwrapArgs are bubblewrap's options (--disable-userns: no user namespace inside, the kernel
// surface that nested namespaces open; clone(CLONE_NEWUSER) is not in the seccomp filter) for plan p (before "--"), with the seccomp filter on fd;
// stat tells what exists on this machine (statPath; a stub in tests).
func BwrapArgs(p *Plan, fd int, stat func(string) (bool, bool, string)) []string {
	a := []string{
		"--unshare-user", "--disable-userns", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
	}
	if p.Network != sandboxspec.NetworkHost {
		a = append(a, "--unshare-net") // a network namespace of its own: loopback only
	}
	var system []string
	for _, d := range SystemDirs {
		ok, _, link := stat(d)
		switch {
		case !ok:
		case link != "":
			a = append(a, "--symlink", link, d)
		default:
			a = append(a, "--ro-bind", d, d)
			system = append(system, d)
		}
	}
	// Memory file systems, each bounded (TmpfsBytes): /dev's own tmpfs (bwrap's, device nodes)
	// takes no new file (Landlock), /dev/shm, /tmp and the private home take what fits.
	size := strconv.FormatInt(p.TmpfsBytes(), 10)
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--size", size, "--tmpfs", "/tmp")
	declared := append(slices.Clone(p.Readable), p.Writable...)
	if p.Home != "" && !covered(p.Home, system, declared, []string{"/tmp"}) {
		a = append(a, "--size", size, "--tmpfs", p.Home) // a private, empty, writable home (npm's and uv's caches)
	}
	// Declared paths, parents before children so that a child's bind is not hidden.
	type bind struct {
		path string
		rw   bool
	}
	var binds []bind
	for _, r := range p.Readable {
		binds = append(binds, bind{r, false})
	}
	for _, w := range p.Writable {
		binds = append(binds, bind{w, true})
	}
	for _, f := range []string{p.Command, p.Exe, p.Dir} { // the program, the inner step, the working directory
		if f != "" && !covered(f, system, declared) {
			binds = append(binds, bind{f, false})
		}
	}
	slices.SortStableFunc(binds, func(x, y bind) int { return len(x.path) - len(y.path) })
	for _, b := range binds {
		switch {
		case b.rw:
			a = append(a, "--bind", b.path, b.path)
		default:
			a = append(a, "--ro-bind-try", b.path, b.path)
		}
	}
	if p.ProxySocket != "" { // the proxy's own directory, after /tmp's tmpfs that may hold it
		d := filepath.Dir(p.ProxySocket)
		a = append(a, "--ro-bind", d, d)
	}
	if p.Dir != "" {
		a = append(a, "--chdir", p.Dir)
	}
	return append(a, "--seccomp", strconv.Itoa(fd))
}

// InnerMain is the inner step (InnerFlag), run by bwrap inside the sandbox: it sets the
// rlimits, restricts itself with Landlock where the kernel has it and execs the server.
//
// The rlimits are set here, not before bwrap, for two reasons: RLIMIT_AS would bound the Go
// runtime of this step and bwrap too (a Go program reserves ~700 MiB of address space at
// start), and RLIMIT_NPROC counts per user namespace first: set inside bwrap's namespace it
// bounds this server's processes alone, where set outside it would bound every sandboxed
// server together (they share the sandbox uid). A process may always lower its limits; the
// server cannot raise them again (soft = hard, and it has no capabilities).
func InnerMain(args []string) int {
	p, path, sargs, err := parseArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zest sandbox:", err)
		return 2
	}
	env := os.Environ()
	if p.Network == sandboxspec.NetworkProxy {
		// Before the rlimits (a Go forwarder under a small RLIMIT_AS would not start) and
		// Landlock (it binds a port the server may not); bwrap's namespaces, seccomp and user
		// hold it all the same.
		if p.ProxySocket == "" {
			fmt.Fprintln(os.Stderr, "zest sandbox: network proxy without a proxy socket")
			return 2
		}
		if err := startForwarder(p); err != nil {
			fmt.Fprintln(os.Stderr, "zest sandbox:", err)
			return 1
		}
		env = proxyEnv(env)
	}
	if err := setRlimits(p); err != nil {
		fmt.Fprintln(os.Stderr, "zest sandbox: rlimits:", err)
		return 1
	}
	if p.Landlock > 0 {
		if err := restrictLandlock(p); err != nil {
			fmt.Fprintln(os.Stderr, "zest sandbox: landlock:", err)
			return 1
		}
	}
	err = syscall.Exec(path, append([]string{path}, sargs...), env)
	fmt.Fprintf(os.Stderr, "zest sandbox: exec %s: %v (is it inside the sandbox's view? add its directory to sandbox.readable_paths)\n", path, err)
	return 127
}

// restrictLandlock allows reading the system directories and declared paths, writing the
// writable ones, /tmp, /dev/shm and the private home, and the device nodes of /dev (no new file
// there: /dev is a tmpfs of no bound), and (network none) no TCP at all or (network proxy) a
// TCP connect to the forwarder's port alone; it also scopes signals and abstract unix sockets
// to the sandbox (ABI 6+).
func restrictLandlock(p *Plan) error {
	var ro, rw []string
	ro = append(ro, SystemDirs...)
	ro = append(ro, "/proc", "/dev")
	ro = append(ro, p.Readable...)
	if p.Dir != "" {
		ro = append(ro, p.Dir)
	}
	rw = append(rw, "/tmp", "/dev/shm")
	rw = append(rw, p.Writable...)
	if p.Home != "" {
		rw = append(rw, p.Home)
	}
	var rules []landlock.Rule
	for _, d := range ro {
		if fi, err := os.Stat(d); err == nil && !fi.IsDir() {
			rules = append(rules, landlock.ROFiles(d))
		} else {
			rules = append(rules, landlock.RODirs(d).IgnoreIfMissing())
		}
	}
	for _, d := range rw {
		if fi, err := os.Stat(d); err == nil && !fi.IsDir() {
			rules = append(rules, landlock.RWFiles(d))
		} else {
			rules = append(rules, landlock.RWDirs(d).WithRefer().IgnoreIfMissing())
		}
	}
	for _, f := range []string{p.Command, p.Exe} {
		if f != "" {
			rules = append(rules, landlock.ROFiles(f).IgnoreIfMissing())
		}
	}
	rules = append(rules, landlock.RWFiles("/dev")) // /dev/null, /dev/tty…: written, never created
	cfg := landlock.V7.BestEffort()
	if p.Network == sandboxspec.NetworkHost {
		if err := cfg.RestrictPaths(rules...); err != nil {
			return err
		}
		return cfg.RestrictScoped()
	}
	if p.Network == sandboxspec.NetworkProxy { // TCP connect to the forwarder alone, no bind
		return cfg.Restrict(append(rules, landlock.ConnectTCP(ProxyPort))...)
	}
	return cfg.Restrict(rules...) // file system, TCP (no rule: no bind or connect) and scopes
}
