package sandbox_test

// These tests run real processes: the test binary plays zest-toolhost (the shim and the
// sandbox's two steps), bwrap confines, and the hostile fixture attacks. They need root (the
// sandbox user is nobody) and, those that confine, bubblewrap (`make bubblewrap`): without
// them they skip, and fail under make test (testenv's ZEST_REQUIRE_ALL=1), so that `make test`
// shows a sandbox that does not hold.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/sandbox"
	"github.com/zestmcp/zest/services/toolhost/shim"
	"github.com/zestmcp/zest/services/toolhost/supervisor"
	"google.golang.org/protobuf/proto"
)

// dir holds the copied test binary and the hostile fixture, readable by the sandbox user.
var dir, exe, hostile string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case shim.Flag:
			os.Exit(shim.Main(os.Args[2:]))
		case sandbox.Flag:
			os.Exit(sandbox.Main(os.Args[2:]))
		case sandbox.InnerFlag:
			os.Exit(sandbox.InnerMain(os.Args[2:]))
		case sandbox.ForwardFlag:
			os.Exit(sandbox.ForwardMain(os.Args[2:]))
		}
	}
	if _, err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func setup() (int, error) {
	var err error
	if dir, err = os.MkdirTemp("", "zest-sandbox-test"); err != nil {
		return 1, err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // MkdirTemp's 0700 would hide it from nobody
		return 1, err
	}
	self, err := os.Executable()
	if err != nil {
		return 1, err
	}
	exe = filepath.Join(dir, "zest-toolhost")
	if err := copyFile(self, exe); err != nil {
		return 1, err
	}
	_, file, _, _ := runtime.Caller(0)
	hostile = filepath.Join(dir, "hostile")
	if out, err := exec.Command("go", "build", "-o", hostile, filepath.Join(filepath.Dir(file), "..", "internal", "hostile")).CombinedOutput(); err != nil {
		return 1, fmt.Errorf("build hostile: %w\n%s", err, out)
	}
	return 0, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	return out.Close()
}

func newSup(t *testing.T, mod func(*supervisor.Config)) *supervisor.Supervisor {
	t.Helper()
	testenv.Need(t, testenv.Root, "its servers run as nobody, and only root can switch to another user")
	cfg := supervisor.DefaultConfig()
	cfg.StopGrace = time.Second
	cfg.BackoffBase = 10 * time.Millisecond
	cfg.Shim = []string{exe, shim.Flag, "-stop-grace=1s"}
	cfg.Sandbox = sandbox.Settings{UID: sandbox.DefaultUID, GID: sandbox.DefaultUID, Exe: exe}
	// As the tool host by default (ZEST_TOOLHOST_SERVER_UID): a server without a sandbox runs
	// as nobody too, since root could read the tool host's memory and environment.
	cfg.ServerUID, cfg.ServerGID = sandbox.DefaultUID, sandbox.DefaultUID
	if mod != nil {
		mod(&cfg)
	}
	s := supervisor.New(cfg)
	t.Cleanup(s.Close)
	return s
}

// needBwrap skips a test that confines a server without bubblewrap (fails under make test).
func needBwrap(t *testing.T) {
	t.Helper()
	testenv.Need(t, testenv.Bubblewrap, "it confines a server with bwrap")
}

// callTool calls a tool; it returns the text and whether the tool said isError. A call that
// fails outright (the server died) is an error.
func callTool(t *testing.T, s *supervisor.Supervisor, id, name string, args map[string]any) (string, bool, error) {
	t.Helper()
	p, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	res, err := s.Call(t.Context(), id, "tools/call", p, 60000, nil) // bounds a hang only
	if err != nil {
		return "", false, err
	}
	var r struct {
		IsError bool `json:"isError"`
		Content []struct{ Text string }
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		return "", false, fmt.Errorf("result %s", res)
	}
	return r.Content[0].Text, r.IsError, nil
}

// writableDir makes a directory the sandbox user may write.
func writableDir(t *testing.T, name string) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, sandbox.DefaultUID, sandbox.DefaultUID); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestHostileServerIsConfinedAndTheSameServerUnconfinedIsNot(t *testing.T) {
	needBwrap(t)
	s := newSup(t, nil)
	work := writableDir(t, "work")
	outside := filepath.Join(dir, "outside")
	if err := os.Mkdir(outside, 0o777); err != nil { // even nobody's permissions would let it write here
		t.Fatal(err)
	}
	os.Chmod(outside, 0o777)
	t.Cleanup(func() { os.RemoveAll(outside) })
	// memory_bytes bounds the address space (RLIMIT_AS). A Go server's start reserves a varying
	// part of it: under 1.5 GiB this fixture failed to start 1 time in 30 (and once in CI, on
	// the restart after its CPU-time kill), under 2 and 3 GiB 0 times in 150. So the confined
	// one gets 3 GiB; its 4 GB allocation fails at once, while the unconfined one's succeeds
	// (it touches 1 GiB of it).
	boxed := &toolhostv1.ServerSpec{Id: "boxed", Command: hostile, Args: []string{"-max-alloc-mb=1024"}, TimeoutMs: 20000, Sandbox: &toolhostv1.Sandbox{
		Enabled: proto.Bool(true), WritablePaths: []string{work},
		MemoryBytes: proto.Int64(3 << 30), MaxPids: proto.Int32(64), OpenFiles: proto.Int32(256), CpuSeconds: proto.Int32(1),
	}}
	plain := &toolhostv1.ServerSpec{Id: "plain", Command: hostile, Args: []string{"-max-alloc-mb=1024"}, TimeoutMs: 20000}
	st, err := s.EnsureStarted(t.Context(), boxed, false)
	if err != nil {
		t.Fatalf("sandboxed start: %v", err)
	}
	want := []string{"user_namespace", "mount_namespace", "pid_namespace", "network_none", "read_only_root", "private_tmp",
		"no_new_privs", "capabilities_dropped", "seccomp", "landlock", "rlimit_as", "rlimit_nproc", "rlimit_cpu", "rlimit_nofile"}
	if got := st.GetSandbox().GetActive(); !slices.Equal(got, want) {
		t.Fatalf("sandbox.active = %v, want %v", got, want)
	}
	pst, err := s.EnsureStarted(t.Context(), plain, false)
	if err != nil {
		t.Fatal(err)
	}
	if pst.GetSandbox() != nil {
		t.Fatalf("unconfined server has sandbox status %v", pst.GetSandbox())
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()

	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	var udpGot atomic.Int32
	go func() {
		b := make([]byte, 64)
		for {
			_, from, err := udp.ReadFrom(b)
			if err != nil {
				return
			}
			udpGot.Add(1)
			udp.WriteTo([]byte("ack"), from)
		}
	}()

	tmpName := fmt.Sprintf("/tmp/zest-sandbox-private-%d", time.Now().UnixNano())
	t.Cleanup(func() { os.Remove(tmpName) })
	outsideFile := filepath.Join(outside, "readable")
	if err := os.WriteFile(outsideFile, []byte("anyone may read this"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, tool string
		args       map[string]any
		boxedErr   string // what the sandboxed call's error says
		plainOK    string // what the unconfined call's text says
		// plainErr, when set, is what the unconfined call's error says instead: it runs as
		// nobody (not as the tool host's root), which stops it too
		plainErr string
		after    func(t *testing.T, boxed bool)
	}{
		{name: "read /etc/shadow", tool: "read", args: map[string]any{"path": "/etc/shadow"}, boxedErr: "permission denied", plainErr: "permission denied"},
		{name: "read a file outside its paths", tool: "read", args: map[string]any{"path": outsideFile}, boxedErr: "no such file or directory", plainOK: "read 20 bytes"},
		{name: "write outside its paths", tool: "write", args: map[string]any{"path": filepath.Join(outside, "x"), "text": "pwned"},
			boxedErr: "no such file or directory", plainOK: "written",
			after: func(t *testing.T, boxed bool) {
				_, err := os.Stat(filepath.Join(outside, "x"))
				if boxed != errors.Is(err, os.ErrNotExist) {
					t.Errorf("boxed=%v: file outside: %v", boxed, err)
				}
			}},
		{name: "write a system file", tool: "write", args: map[string]any{"path": "/etc/zest-sandbox-test"}, boxedErr: "read-only file system", plainErr: "permission denied",
			after: func(t *testing.T, boxed bool) {
				if _, err := os.Stat("/etc/zest-sandbox-test"); !errors.Is(err, os.ErrNotExist) {
					os.Remove("/etc/zest-sandbox-test")
					t.Errorf("boxed=%v: /etc/zest-sandbox-test was written", boxed)
				}
			}},
		{name: "connect out", tool: "connect", args: map[string]any{"addr": ln.Addr().String()}, boxedErr: "connect", plainOK: "connected",
			after: func(t *testing.T, boxed bool) {
				want := int32(1)
				if boxed {
					want = 0
				}
				// The client may be connected before Accept returns.
				if _, err := waitfor.Poll(2*time.Second, func() error {
					if n := accepted.Load(); n != want {
						return fmt.Errorf("listener accepted %d connections", n)
					}
					return nil
				}); err != nil {
					t.Errorf("boxed=%v: %v", boxed, err)
				}
			}},
		// Landlock refuses TCP connect above (EACCES) before the network namespace could; UDP,
		// which Landlock does not cover, shows the namespace: the datagram never leaves it.
		{name: "send a datagram out (network namespace)", tool: "udp", args: map[string]any{"addr": udp.LocalAddr().String()}, boxedErr: "no answer", plainOK: "answered ack",
			after: func(t *testing.T, boxed bool) {
				if n := udpGot.Load(); (boxed && n != 0) || (!boxed && n != 1) {
					t.Errorf("boxed=%v: the listener got %d datagrams", boxed, n)
				}
			}},
		{name: "signal the tool host's processes", tool: "signal", args: map[string]any{"pid": os.Getpid()}, boxedErr: "no such process", plainErr: "operation not permitted"},
		{name: "forbidden system call (seccomp)", tool: "unshare", boxedErr: "operation not permitted", plainOK: "unshare allowed"},
		{name: "nested user namespace (bwrap --disable-userns)", tool: "userns", boxedErr: "new user namespace", plainOK: "user namespace made"},
		{name: "write /proc/self/comm (landlock)", tool: "write", args: map[string]any{"path": "/proc/self/comm", "text": "x"}, boxedErr: "permission denied", plainOK: "written"},
		{name: "fork bomb", tool: "fork", boxedErr: "resource temporarily unavailable", plainOK: "started 300 children"},
		{name: "allocate 4 GB", tool: "alloc", args: map[string]any{"mb": 4096}, boxedErr: "cannot allocate memory", plainOK: "touched 1024 MiB"},
		{name: "open many files", tool: "files", args: map[string]any{"n": 400}, boxedErr: "too many open files", plainOK: "opened 400 files"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, id := range []string{"boxed", "plain"} {
				text, isErr, err := callTool(t, s, id, c.tool, c.args)
				t.Logf("%s: %q (isError %v)", id, text, isErr)
				switch {
				case err != nil:
					t.Fatalf("%s: call failed outright: %v", id, err)
				case id == "boxed" && (!isErr || !strings.Contains(text, c.boxedErr)):
					t.Errorf("sandboxed %s: %q (isError %v), want an error saying %q", c.tool, text, isErr, c.boxedErr)
				case id == "plain" && c.plainErr != "" && (!isErr || !strings.Contains(text, c.plainErr)):
					t.Errorf("unconfined %s: %q (isError %v), want an error saying %q", c.tool, text, isErr, c.plainErr)
				case id == "plain" && c.plainErr == "" && (isErr || !strings.Contains(text, c.plainOK)):
					t.Errorf("unconfined %s: %q (isError %v), want %q", c.tool, text, isErr, c.plainOK)
				}
				if c.after != nil {
					c.after(t, id == "boxed")
				}
				// Both servers (and so the tool host) still answer.
				for _, other := range []string{"plain", "boxed"} {
					if _, isErr, err := callTool(t, s, other, "status", nil); err != nil || isErr {
						t.Fatalf("after %s on %s, %s does not answer: %v", c.tool, id, other, err)
					}
				}
			}
		})
	}

	t.Run("declared writable path and private /tmp", func(t *testing.T) {
		if text, isErr, err := callTool(t, s, "boxed", "write", map[string]any{"path": filepath.Join(work, "ok"), "text": "fine"}); err != nil || isErr {
			t.Fatalf("write to writable path: %q %v", text, err)
		}
		if b, err := os.ReadFile(filepath.Join(work, "ok")); err != nil || string(b) != "fine" {
			t.Fatalf("the file written in the sandbox: %q %v", b, err)
		}
		if text, isErr, err := callTool(t, s, "boxed", "write", map[string]any{"path": tmpName, "text": "private"}); err != nil || isErr {
			t.Fatalf("write to /tmp: %q %v", text, err)
		}
		if _, err := os.Stat(tmpName); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the sandbox's /tmp file is visible outside: %v", err)
		}
		if text, isErr, err := callTool(t, s, "plain", "write", map[string]any{"path": tmpName, "text": "shared"}); err != nil || isErr {
			t.Fatalf("unconfined write to /tmp: %q %v", text, err)
		}
		if _, err := os.Stat(tmpName); err != nil {
			t.Fatalf("the unconfined /tmp file: %v", err)
		}
	})

	// Files in the sandbox's memory file systems take the machine's memory outside the
	// server's address space: each is a quarter of memory_bytes (3 GiB here), where a tmpfs
	// would otherwise take up to half of the machine's; /dev (bwrap's tmpfs of device nodes)
	// takes no new file at all.
	t.Run("memory file systems bounded by memory_bytes", func(t *testing.T) {
		want := fmt.Sprintf("size %d bytes", int64(3<<30)/sandbox.TmpfsShare)
		home, _ := os.UserHomeDir()
		for _, dir := range []string{"/tmp", home, "/dev/shm"} {
			if text, isErr, err := callTool(t, s, "boxed", "statfs", map[string]any{"path": dir}); err != nil || isErr || text != want {
				t.Errorf("sandboxed %s: %q (isError %v, %v), want %q", dir, text, isErr, err, want)
			}
		}
		if text, isErr, err := callTool(t, s, "boxed", "write", map[string]any{"path": "/dev/shm/zest-test", "text": "shared memory"}); err != nil || isErr {
			t.Errorf("sandboxed write to /dev/shm: %q %v", text, err)
		}
		if text, isErr, err := callTool(t, s, "boxed", "write", map[string]any{"path": "/dev/zest-test", "text": "x"}); err != nil || !isErr || !strings.Contains(text, "permission denied") {
			t.Errorf("sandboxed file created in /dev: %q (isError %v, %v), want permission denied", text, isErr, err)
		}
		if text, isErr, err := callTool(t, s, "boxed", "write", map[string]any{"path": "/dev/null", "text": "x"}); err != nil || isErr {
			t.Errorf("sandboxed write to /dev/null: %q %v", text, err)
		}
	})

	t.Run("no_new_privs, seccomp, capabilities and uid", func(t *testing.T) {
		text, _, err := callTool(t, s, "boxed", "status", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"Uid: 65534 65534 65534 65534", "NoNewPrivs: 1", "Seccomp: 2", "CapEff: 0000000000000000", "CapBnd: 0000000000000000"} {
			if !strings.Contains(text, w) {
				t.Errorf("sandboxed status %q lacks %q", text, w)
			}
		}
		text, _, _ = callTool(t, s, "plain", "status", nil)
		if !strings.Contains(text, "NoNewPrivs: 0") || !strings.Contains(text, "Uid: 65534 65534 65534 65534") {
			t.Errorf("unconfined status %q: want nobody (not the tool host's root) without no_new_privs", text)
		}
	})

	// The tool host's environment holds its keys (ZEST_SERVICE_KEY, and whatever else it was
	// given): no server may read it, nor the shim's, through /proc. The unconfined server walks
	// up to them and is refused everything but cmdline (which holds no secret: the tool host
	// takes none in its arguments); the sandboxed one does not see them at all.
	t.Run("read the ancestors' /proc entries (the tool host's environment)", func(t *testing.T) {
		text, isErr, err := callTool(t, s, "plain", "ancestors", nil)
		if err != nil || isErr {
			t.Fatalf("unconfined ancestors: %q %v", text, err)
		}
		t.Logf("the unconfined server's ancestors: %s", text)
		var got []struct {
			Pid                       int
			Environ, Cmdline, Fd, Mem string
		}
		if err := json.Unmarshal([]byte(text), &got); err != nil {
			t.Fatal(err)
		}
		st, _ := s.Status("plain")
		shimPid, hostPid := int(st.GetPid()), os.Getpid()
		seen := map[int]bool{}
		for _, a := range got {
			seen[a.Pid] = true
			if a.Pid != shimPid && a.Pid != hostPid {
				continue
			}
			for what, v := range map[string]string{"environ": a.Environ, "fd/": a.Fd, "mem": a.Mem} {
				if !strings.Contains(v, "permission denied") {
					t.Errorf("the unconfined server read /proc/%d/%s (the shim is %d, the tool host %d): %s", a.Pid, what, shimPid, hostPid, v)
				}
			}
			if !strings.HasSuffix(a.Cmdline, " bytes") {
				t.Errorf("/proc/%d/cmdline: %s, want it readable (as for anyone)", a.Pid, a.Cmdline)
			}
		}
		if !seen[shimPid] || !seen[hostPid] {
			t.Fatalf("the unconfined server's ancestors %s miss its shim (%d) or the tool host (%d)", text, shimPid, hostPid)
		}
		if text, _, err := callTool(t, s, "boxed", "ancestors", nil); err != nil || text != "[]" {
			t.Errorf("sandboxed ancestors: %q %v, want none (its parent is its pid namespace's init)", text, err)
		}
	})

	t.Run("CPU time", func(t *testing.T) {
		// cpu_seconds 1: the sandboxed server gets SIGXCPU after 1 s of CPU (which Go ignores)
		// and SIGKILL after 2 s (bwrap exits 128+9); the call fails, the supervisor restarts the server, and the
		// other server never noticed.
		_, _, err := callTool(t, s, "boxed", "spin", map[string]any{"seconds": 5})
		if err == nil || !strings.Contains(err.Error(), "exit status 137") {
			t.Fatalf("sandboxed spin of 5 s of CPU: %v, want the child killed at its CPU limit (2 s of CPU)", err)
		}
		if text, isErr, err := callTool(t, s, "plain", "spin", map[string]any{"seconds": 0.5}); err != nil || isErr {
			t.Fatalf("unconfined spin: %q %v", text, err)
		}
		if _, _, err := callTool(t, s, "boxed", "status", nil); err != nil {
			t.Fatalf("sandboxed server after its restart: %v", err)
		}
	})
}

// A sandbox that is asked for and cannot run fails the start with the cause and the fix; the
// server never runs unconfined in its place.
func TestSandboxFailsClosed(t *testing.T) {
	t.Run("bwrap missing", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir()) // no bwrap on PATH
		s := newSup(t, nil)
		spec := &toolhostv1.ServerSpec{Id: "nobwrap", Command: hostile, TimeoutMs: 5000, Sandbox: &toolhostv1.Sandbox{Enabled: proto.Bool(true)}}
		st, err := s.EnsureStarted(t.Context(), spec, false)
		if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
			t.Fatalf("EnsureStarted without bwrap: %v, want ErrUnavailable naming apt-get install bubblewrap", err)
		}
		if st.GetPid() != 0 {
			t.Fatalf("a server started anyway: %v", st)
		}
	})
	t.Run("operator default on, bwrap cannot start", func(t *testing.T) {
		s := newSup(t, func(c *supervisor.Config) { c.Sandbox.Default, c.Sandbox.Bwrap = true, "/bin/false" })
		spec := &toolhostv1.ServerSpec{Id: "badbwrap", Command: hostile, TimeoutMs: 5000}
		_, err := s.EnsureStarted(t.Context(), spec, false)
		if !errors.Is(err, supervisor.ErrHandshake) {
			t.Fatalf("EnsureStarted with a bwrap that fails: %v, want the handshake to fail", err)
		}
		if _, _, err := callTool(t, s, "badbwrap", "status", nil); err == nil {
			t.Fatal("a call reached a server whose sandbox could not start")
		}
	})
	t.Run("a path the sandbox hides is named", func(t *testing.T) {
		needBwrap(t)
		script := filepath.Join(dir, "server.sh") // under /tmp, which the sandbox replaces
		if err := os.WriteFile(script, []byte("exit 3\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		s := newSup(t, nil)
		spec := &toolhostv1.ServerSpec{Id: "hidden", Command: "/bin/sh", Args: []string{script}, TimeoutMs: 5000, Sandbox: &toolhostv1.Sandbox{Enabled: proto.Bool(true)}}
		_, err := s.EnsureStarted(t.Context(), spec, false)
		if !errors.Is(err, supervisor.ErrHandshake) || !strings.Contains(err.Error(), "the sandbox hides "+strconv.Quote(script)) || !strings.Contains(err.Error(), "sandbox.readable_paths") {
			t.Fatalf("EnsureStarted of a script under /tmp: %v, want the handshake to fail naming the hidden path and readable_paths", err)
		}
		spec.Sandbox.ReadablePaths = []string{dir}
		if _, err := s.EnsureStarted(t.Context(), spec, false); err == nil || strings.Contains(err.Error(), "the sandbox hides") {
			t.Fatalf("with the directory readable the script runs (and fails as it says, with no hint): %v", err)
		}
	})
	t.Run("sandbox false overrides the default", func(t *testing.T) {
		s := newSup(t, func(c *supervisor.Config) { c.Sandbox.Default, c.Sandbox.Bwrap = true, "/bin/false" })
		spec := &toolhostv1.ServerSpec{Id: "optout", Command: hostile, TimeoutMs: 5000, Sandbox: &toolhostv1.Sandbox{Enabled: proto.Bool(false)}}
		st, err := s.EnsureStarted(t.Context(), spec, false)
		if err != nil || st.GetSandbox() != nil {
			t.Fatalf("sandbox false: %v, sandbox status %v", err, st.GetSandbox())
		}
	})
}

// The operator's default sandboxes a server whose spec says nothing of a sandbox.
func TestOperatorDefaultSandboxesASpecThatSaysNothing(t *testing.T) {
	needBwrap(t)
	s := newSup(t, func(c *supervisor.Config) { c.Sandbox.Default = true })
	st, err := s.EnsureStarted(t.Context(), &toolhostv1.ServerSpec{Id: "bydefault", Command: hostile, TimeoutMs: 20000}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(st.GetSandbox().GetActive(), "seccomp") {
		t.Fatalf("sandbox status %v", st.GetSandbox())
	}
	if text, _, err := callTool(t, s, "bydefault", "status", nil); err != nil || !strings.Contains(text, "Uid: 65534") || !strings.Contains(text, "Seccomp: 2") {
		t.Fatalf("status inside: %q %v", text, err)
	}
}
