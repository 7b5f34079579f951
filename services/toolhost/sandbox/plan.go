// Package sandbox confines a stdio MCP server's process with maintained tools: bubblewrap
// (Debian's bwrap) for namespaces, the file system view, dropped capabilities and
// no_new_privs; a seccomp filter built by go-seccomp-bpf and loaded by bwrap; Landlock through
// go-landlock where the kernel has it; rlimits for memory, processes, CPU time and open files.
// Nothing here confines by itself: it only decides the rules and hands them to those tools.
//
// The chain of processes, each exec'ing the next where it can:
//
//	tool host → shim → zest-toolhost --zest-sandbox PLAN -- server…      (outside, as root)
//	             sets the rlimits, writes the seccomp filter to a memfd, drops to the sandbox
//	             uid/gid, execs bwrap (same pid)
//	           → bwrap … -- zest-toolhost --zest-landlock PLAN -- server… (namespaces, mounts)
//	           → Landlock restricts itself, execs the server (same pid)
//
// Landlock must come last: a Landlock-restricted process may not mount, and bwrap mounts.
// Running bwrap as an unprivileged uid outside (not root mapped to nobody) is what makes file
// permissions hold (root outside would still read /etc/shadow) and RLIMIT_NPROC count (it
// counts per real uid; root's count is the whole machine's).
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/zestmcp/zest/lib/sandboxspec"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
)

// Flag runs the tool host binary as the sandbox's outer step (Main); InnerFlag as its inner
// step inside bwrap (InnerMain).
const (
	Flag      = "--zest-sandbox"
	InnerFlag = "--zest-landlock"
)

// Defaults of a sandboxed server whose config leaves a limit out.
const (
	DefaultMemoryBytes = 2 << 30 // RLIMIT_AS: node reserves ~1 GiB of address space at start
	DefaultMaxPids     = 256     // RLIMIT_NPROC: node runs ~11 threads; counted per sandbox uid
	DefaultCPUSeconds  = 3600    // RLIMIT_CPU, per process: an hour of CPU, then SIGXCPU
	DefaultOpenFiles   = 1024    // RLIMIT_NOFILE
)

// TmpfsShare is the part of memory_bytes each of a sandbox's memory file systems may hold:
// its private /tmp, $HOME and /dev/shm are tmpfs, whose files take the machine's memory outside
// the server's address space (RLIMIT_AS does not count them) and would otherwise grow to half
// of it each. With a quarter each, a server holds at most memory_bytes of address space and
// ¾ of memory_bytes in files.
const TmpfsShare = 4

// SystemDirs are the system's own directories a sandboxed server sees, read-only, when they
// exist (a symbolic link among them, such as /bin → usr/bin, is recreated as the same link).
var SystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// ErrUnavailable means a sandbox was asked for and this machine cannot run one: the server
// does not start (never unconfined in its place).
var ErrUnavailable = errors.New("sandbox unavailable")

// Settings are the operator's: the default and who sandboxed servers run as.
type Settings struct {
	// Default sandboxes servers whose spec leaves sandbox.enabled out (ZEST_TOOLHOST_SANDBOX).
	Default bool
	// UID and GID run bwrap and the server when the tool host is root
	// (ZEST_TOOLHOST_SANDBOX_UID, "uid[:gid]"; default 65534, nobody).
	UID, GID int
	// Exe is the tool host's own executable (run with Flag and InnerFlag).
	Exe string
	// Bwrap is bubblewrap's path ("" looks up bwrap on PATH when a sandbox is needed).
	Bwrap string
}

// DefaultUID is the sandbox user when the operator sets none: nobody.
const DefaultUID = 65534

// ParseUID parses ZEST_TOOLHOST_SANDBOX_UID: "uid" or "uid:gid" (gid defaults to uid).
func ParseUID(s string) (uid, gid int, err error) {
	u, g, hasG := strings.Cut(s, ":")
	uid, err = strconv.Atoi(u)
	if err != nil || uid <= 0 || uid > 1<<31-2 {
		return 0, 0, fmt.Errorf("%q: want a uid above 0 (not root), optionally :gid, e.g. 65534 or 65534:65534", s)
	}
	gid = uid
	if hasG {
		gid, err = strconv.Atoi(g)
		if err != nil || gid <= 0 || gid > 1<<31-2 {
			return 0, 0, fmt.Errorf("%q: the gid after ':' must be a number above 0 (not root's group)", s)
		}
	}
	return uid, gid, nil
}

// ParseMode parses ZEST_TOOLHOST_SANDBOX: "off" (default) or "on".
func ParseMode(s string) (bool, error) {
	switch s {
	case "", "off":
		return false, nil
	case "on":
		return true, nil
	}
	return false, fmt.Errorf("%q: want off (servers run unconfined unless their config asks for a sandbox) or on (every stdio server is sandboxed unless its config says sandbox: false)", s)
}

// Enabled says whether a server with spec sb runs sandboxed under the default def.
func Enabled(sb *toolhostv1.Sandbox, def bool) bool {
	if sb != nil && sb.Enabled != nil {
		return sb.GetEnabled()
	}
	return def
}

// Plan is everything the outer and inner steps need, passed to them as JSON in argv (no
// secrets: the server's environment travels as the environment).
type Plan struct {
	Bwrap string `json:"bwrap"`
	Exe   string `json:"exe"`
	// UID and GID are set (> 0) when the outer step must drop to them (the tool host is root).
	UID         int      `json:"uid,omitempty"`
	GID         int      `json:"gid,omitempty"`
	Network     string   `json:"network"`
	Writable    []string `json:"writable,omitempty"`
	Readable    []string `json:"readable,omitempty"`
	MemoryBytes int64    `json:"memory_bytes"`
	MaxPids     int      `json:"max_pids"`
	CPUSeconds  int      `json:"cpu_seconds"`
	OpenFiles   int      `json:"open_files"`
	// Command is the server's resolved program, Dir its working directory, Home its $HOME
	// (a private tmpfs unless a declared path covers it).
	Command string `json:"command"`
	Dir     string `json:"dir,omitempty"`
	Home    string `json:"home,omitempty"`
	// Landlock is the kernel's Landlock ABI version (0: none, the inner step skips it).
	Landlock int `json:"landlock"`
	// ProxySocket is the unix socket of the server's filtering proxy (network "proxy"), set by
	// the supervisor per start (StartProxy); its directory is bound read-only into the sandbox.
	ProxySocket string `json:"proxy_socket,omitempty"`
}

// NewPlan resolves a sandbox for a server whose program is command (resolved), run in dir
// with environment env. It fails when the sandbox cannot run here (ErrUnavailable) or sb is
// invalid (sandboxspec.ErrBadSandbox).
func NewPlan(sb *toolhostv1.Sandbox, st Settings, command, dir string, env []string) (*Plan, error) {
	if err := sandboxspec.Check(sb); err != nil {
		return nil, err
	}
	if sb == nil { // the operator's default sandboxes a server whose spec says nothing
		sb = &toolhostv1.Sandbox{}
	}
	bwrap := st.Bwrap
	if bwrap == "" {
		var err error
		if bwrap, err = lookBwrap(); err != nil {
			return nil, err
		}
	}
	if st.Exe == "" {
		return nil, fmt.Errorf("%w: the tool host does not know its own executable (needed to run the sandbox's steps)", ErrUnavailable)
	}
	for i, p := range sb.GetWritablePaths() {
		if _, err := os.Stat(p); err != nil {
			return nil, sandboxspec.FieldError(fmt.Sprintf("sandbox.writable_paths[%d] %q does not exist on this tool host: create it, writable by the sandbox user (uid %d)", i, p, st.UID))
		}
	}
	p := &Plan{
		Bwrap: bwrap, Exe: st.Exe, Network: sandboxspec.Network(sb),
		Writable: slices.Clone(sb.GetWritablePaths()), Readable: slices.Clone(sb.GetReadablePaths()),
		MemoryBytes: DefaultMemoryBytes, MaxPids: DefaultMaxPids, CPUSeconds: DefaultCPUSeconds, OpenFiles: DefaultOpenFiles,
		Command: command, Dir: dir, Landlock: landlockABI(),
	}
	if os.Getuid() == 0 {
		p.UID, p.GID = st.UID, st.GID
		if p.UID <= 0 {
			p.UID, p.GID = DefaultUID, DefaultUID
		}
	}
	if sb.MemoryBytes != nil {
		p.MemoryBytes = sb.GetMemoryBytes()
	}
	if sb.MaxPids != nil {
		p.MaxPids = int(sb.GetMaxPids())
	}
	if sb.CpuSeconds != nil {
		p.CPUSeconds = int(sb.GetCpuSeconds())
	}
	if sb.OpenFiles != nil {
		p.OpenFiles = int(sb.GetOpenFiles())
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok && filepath.IsAbs(v) && filepath.Clean(v) != "/" {
			p.Home = filepath.Clean(v)
		}
	}
	return p, nil
}

// TmpfsBytes is the size of each of the sandbox's memory file systems (/tmp, a private
// $HOME, /dev/shm): MemoryBytes / TmpfsShare.
func (p *Plan) TmpfsBytes() int64 { return p.MemoryBytes / TmpfsShare }

// lookBwrap finds bubblewrap or says how to install it.
func lookBwrap() (string, error) {
	if path, err := exec.LookPath("bwrap"); err == nil {
		return path, nil
	}
	return "", fmt.Errorf("%w: bubblewrap (bwrap) is not installed on this tool host, and the server asks for a sandbox: install it (Debian/Ubuntu: apt-get install bubblewrap), or set sandbox false for this server to run it unconfined", ErrUnavailable)
}

// Argv is the program and arguments the shim runs for the sandboxed server path args.
func (p *Plan) Argv(path string, args []string) (string, []string) {
	js, _ := json.Marshal(p)
	return p.Exe, append([]string{Flag, string(js), "--", path}, args...)
}

// Status names the protections the plan applies, and those it cannot, with why.
func (p *Plan) Status() *toolhostv1.SandboxStatus {
	st := &toolhostv1.SandboxStatus{Active: []string{"user_namespace", "mount_namespace", "pid_namespace"}}
	switch p.Network {
	case sandboxspec.NetworkNone:
		st.Active = append(st.Active, "network_none")
	case sandboxspec.NetworkProxy:
		st.Active = append(st.Active, "network_proxy")
	}
	st.Active = append(st.Active, "read_only_root", "private_tmp", "no_new_privs", "capabilities_dropped", "seccomp")
	if p.Landlock > 0 {
		st.Active = append(st.Active, "landlock")
	} else {
		st.Missing = append(st.Missing, "landlock: this kernel has no Landlock (needs Linux 5.13 or later with landlock in the lsm= list)")
	}
	why := "the tool host does not place servers in cgroups v2 yet (and a machine with cgroups v1, like a hybrid hierarchy, has no v2 controllers to use); the rlimits apply instead"
	st.Missing = append(st.Missing, "cgroup_memory: "+why, "cgroup_pids: "+why)
	st.Active = append(st.Active, "rlimit_as", "rlimit_nproc", "rlimit_cpu", "rlimit_nofile")
	return st
}

// Hidden are the absolute paths among paths (a server's working directory and arguments) that
// the sandbox replaces with its own empty ones: under /tmp or the server's $HOME, and in no
// declared path. A start that failed gets them named, since "no such file" from inside does not
// say why.
func (p *Plan) Hidden(paths []string) []string {
	var out []string
	for _, a := range paths {
		if !filepath.IsAbs(a) {
			continue
		}
		a = filepath.Clean(a)
		private := a == "/tmp" || strings.HasPrefix(a, "/tmp/") || (p.Home != "" && (a == p.Home || strings.HasPrefix(a, p.Home+"/")))
		if q := strconv.Quote(a); private && a != "/tmp" && a != p.Home && !covered(a, p.Writable, p.Readable) && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// covered says whether path p lies in one of dirs (or is one).
func covered(p string, dirs ...[]string) bool {
	for _, l := range dirs {
		for _, d := range l {
			if p == d || strings.HasPrefix(p, d+"/") {
				return true
			}
		}
	}
	return false
}
