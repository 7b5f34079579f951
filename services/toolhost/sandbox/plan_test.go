package sandbox

import (
	"slices"
	"strings"
	"testing"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/protobuf/proto"
)

func TestCheckNamesTheFieldAndTheFix(t *testing.T) {
	for _, c := range []struct {
		sb   *toolhostv1.Sandbox
		want string
	}{
		{&toolhostv1.Sandbox{WritablePaths: []string{"tmp"}}, `sandbox.writable_paths[0] "tmp" is not absolute`},
		{&toolhostv1.Sandbox{ReadablePaths: []string{"/a", "/b/../c"}}, `sandbox.readable_paths[1] "/b/../c" is not clean: write it as "/c"`},
		{&toolhostv1.Sandbox{WritablePaths: []string{"/"}}, `sandbox.writable_paths[0] "/" is the whole file system`},
		{&toolhostv1.Sandbox{Network: proto.String("proxy")}, `sandbox.network "proxy" needs sandbox.allow_hosts: list the hosts`},
		{&toolhostv1.Sandbox{Network: proto.String("proxy"), AllowHosts: []string{"a.example.com", "*.com"}}, `sandbox.allow_hosts[1] "*.com" wildcard "*.com" is too wide`},
		{&toolhostv1.Sandbox{Network: proto.String("proxy"), AllowHosts: []string{"a.example.com:0"}}, `sandbox.allow_hosts[0] "a.example.com:0" port "0": want 1 to 65535`},
		{&toolhostv1.Sandbox{Network: proto.String("lan")}, `sandbox.network "lan": want "none" (default), "host" or "proxy"`},
		{&toolhostv1.Sandbox{AllowHosts: []string{"example.com"}}, `sandbox.allow_hosts is set but network is "none"`},
		{&toolhostv1.Sandbox{MemoryBytes: proto.Int64(1 << 20)}, "sandbox.memory_bytes 1048576: want 67108864 (64 MiB)"},
		{&toolhostv1.Sandbox{MaxPids: proto.Int32(1)}, "sandbox.max_pids 1: want 8 to 65536"},
		{&toolhostv1.Sandbox{CpuSeconds: proto.Int32(0)}, "sandbox.cpu_seconds 0: want 1 to"},
		{&toolhostv1.Sandbox{OpenFiles: proto.Int32(3)}, "sandbox.open_files 3: want 16 to 1048576"},
	} {
		err := Check(c.sb)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%v) = %v, want %q", c.sb, err, c.want)
		}
	}
	if err := Check(&toolhostv1.Sandbox{Enabled: proto.Bool(true), Network: proto.String("host"), WritablePaths: []string{"/var/lib/x"},
		MemoryBytes: proto.Int64(1 << 30), MaxPids: proto.Int32(64), CpuSeconds: proto.Int32(60), OpenFiles: proto.Int32(256)}); err != nil {
		t.Fatalf("a valid sandbox: %v", err)
	}
}

func TestParseModeAndUID(t *testing.T) {
	for in, want := range map[string]bool{"": false, "off": false, "on": true} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseMode("yes"); err == nil {
		t.Error("ParseMode(yes) accepted")
	}
	for in, want := range map[string][2]int{"65534": {65534, 65534}, "1000:2000": {1000, 2000}} {
		u, g, err := ParseUID(in)
		if err != nil || u != want[0] || g != want[1] {
			t.Errorf("ParseUID(%q) = %d, %d, %v", in, u, g, err)
		}
	}
	for _, bad := range []string{"0", "root", "-1", "1000:0", "1000:x", ""} {
		if _, _, err := ParseUID(bad); err == nil {
			t.Errorf("ParseUID(%q) accepted", bad)
		}
	}
}

func FuzzParseUID(f *testing.F) {
	for _, s := range []string{"65534", "1:2", "0", ":", "1000:", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, g, err := ParseUID(s)
		if err == nil && (u <= 0 || g <= 0) {
			t.Fatalf("ParseUID(%q) = %d:%d, root allowed", s, u, g)
		}
	})
}

func TestBwrapArgs(t *testing.T) {
	stat := func(p string) (bool, bool, string) {
		switch p {
		case "/usr", "/etc":
			return true, true, ""
		case "/bin":
			return true, false, "usr/bin"
		}
		return false, false, ""
	}
	p := &Plan{Network: NetworkNone, Command: "/srv/mcp/bin/server", Exe: "/usr/bin/zest-toolhost", Home: "/root",
		Writable: []string{"/srv/mcp/data"}, Readable: []string{"/srv/mcp"}, Dir: "/srv/mcp", MemoryBytes: 2 << 30}
	got := strings.Join(BwrapArgs(p, 5, stat), " ")
	for _, want := range []string{
		"--unshare-user --disable-userns --unshare-ipc --unshare-pid --unshare-uts --unshare-cgroup-try --die-with-parent --new-session --cap-drop ALL --unshare-net",
		// each memory file system a quarter of memory_bytes (512 MiB)
		"--ro-bind /usr /usr --symlink usr/bin /bin --ro-bind /etc /etc --proc /proc --dev /dev --size 536870912 --tmpfs /dev/shm --size 536870912 --tmpfs /tmp --size 536870912 --tmpfs /root",
		// parents before children; the program is covered by /srv/mcp, the tool host by /usr
		"--ro-bind-try /srv/mcp /srv/mcp --bind /srv/mcp/data /srv/mcp/data --chdir /srv/mcp --seccomp 5",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("bwrap args\n%s\nlack\n%s", got, want)
		}
	}
	p.Network = NetworkHost
	if slices.Contains(BwrapArgs(p, 5, stat), "--unshare-net") {
		t.Error("network host still unshares the network")
	}
}

func TestFilterAssembles(t *testing.T) {
	prog, err := Filter()
	if err != nil || len(prog) == 0 || len(prog)%8 != 0 {
		t.Fatalf("Filter: %d bytes, %v", len(prog), err)
	}
}

func TestStatusNamesEveryProtection(t *testing.T) {
	st := (&Plan{Network: NetworkHost, Landlock: 0}).Status()
	if slices.Contains(st.GetActive(), "network_none") || slices.Contains(st.GetActive(), "landlock") {
		t.Fatalf("active %v: network host and no Landlock claimed", st.GetActive())
	}
	if !strings.HasPrefix(st.GetMissing()[0], "landlock: ") {
		t.Fatalf("missing %v", st.GetMissing())
	}
}

// TestHidden names the absolute paths under /tmp or $HOME that no declared path covers.
func TestHidden(t *testing.T) {
	p := &Plan{Home: "/root", Readable: []string{"/tmp/ok"}, Writable: []string{"/root/data"}}
	got := p.Hidden([]string{"", "-y", "/tmp/app/server.js", "/tmp", "/root", "/root/x.py", "/tmp/ok/a.js", "/root/data/db", "/usr/lib/x", "rel/tmp/x", "/tmp/app/server.js"})
	want := []string{`"/tmp/app/server.js"`, `"/root/x.py"`}
	if !slices.Equal(got, want) {
		t.Fatalf("Hidden = %v, want %v", got, want)
	}
}
