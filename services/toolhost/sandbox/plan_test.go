package sandbox

import (
	"slices"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/sandboxspec"
)

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
	p := &Plan{Network: sandboxspec.NetworkNone, Command: "/srv/mcp/bin/server", Exe: "/usr/bin/zest-toolhost", Home: "/root",
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
	p.Network = sandboxspec.NetworkHost
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
	st := (&Plan{Network: sandboxspec.NetworkHost, Landlock: 0}).Status()
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
