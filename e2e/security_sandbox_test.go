package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/testenv"
)

// sandboxWorkDir is a directory the sandbox user (nobody, the tool host's default) can reach:
// t.TempDir's parent is private to root, which the sandbox user could not even traverse. Its
// tests hand files and processes to another user, which needs root.
func sandboxWorkDir(t *testing.T) string {
	t.Helper()
	testenv.Need(t, testenv.Root, "it runs servers or services as another user")
	d, err := os.MkdirTemp("", "zest-e2e-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// traversableBy lets the sandbox user pass through every directory above path (o+x, not
// o+r: it may not list them), as a deployment must for the paths it declares; each mode is put
// back at cleanup. A clone in a private temporary directory (0700) would hide the tool host
// binary and the npm peers from bwrap, which opens them as that user.
func traversableBy(t *testing.T, path string) {
	t.Helper()
	for d := filepath.Dir(path); d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode&0o001 == 0 {
			if err := os.Chmod(d, mode|0o001); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: o+x for the sandbox user until the test ends", d)
			t.Cleanup(func() { os.Chmod(d, mode) })
		}
	}
}

// writableBy makes dir/name, owned by the sandbox user so that a sandboxed server may write it.
func writableBy(t *testing.T, dir, name string) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return d
}

// sandboxCall calls a tool through the admin API and returns its first text and isError.
func sandboxCall(t *testing.T, s *Suite, id, tool string, args map[string]any) (string, bool) {
	t.Helper()
	r := admin(t, s, "POST", "/servers/"+id+"/tools/call", jsonBody(t, map[string]any{"name": tool, "arguments": args}))
	if r.Status != 200 {
		t.Fatalf("%s %s: %d %s", id, tool, r.Status, r.Body)
	}
	res := r.JSON(t)["result"].(map[string]any)
	isErr, _ := res["isError"].(bool)
	content := asSlice(res["content"])
	if len(content) == 0 {
		return "", isErr
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text, isErr
}

// sandboxOf is the process.sandbox of a server's state (nil: unconfined).
func sandboxOf(t *testing.T, s *Suite, id string) map[string]any {
	t.Helper()
	r := admin(t, s, "GET", "/servers/"+id, "")
	if r.Status != 200 {
		t.Fatalf("GET /servers/%s: %d %s", id, r.Status, r.Body)
	}
	p, _ := r.JSON(t)["server"].(map[string]any)["process"].(map[string]any)
	if p["state"] != "ready" {
		t.Fatalf("%s is not ready: %s", id, r.Body)
	}
	sb, _ := p["sandbox"].(map[string]any)
	return sb
}

// TestSandboxedPeers runs server-everything, server-memory and server-filesystem inside the
// tool host's sandbox (ZEST_TOOLHOST_SANDBOX=on, bubblewrap) through the whole suite: each does
// its usual work, its state says which protections are active, and what lies outside its
// declared paths is out of its reach. A server that opts out runs unconfined beside them.
func TestSandboxedPeers(t *testing.T) {
	testenv.Need(t, testenv.Bubblewrap, "it confines the peers with bwrap")
	work := sandboxWorkDir(t)
	memDir, fsDir := writableBy(t, work, "memory"), writableBy(t, work, "files")
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_TOOLHOST_SANDBOX=on", "E2E_MEMORY_FILE="+filepath.Join(memDir, "memory.jsonl"))
	peers := filepath.Join(peersDir(t), "node_modules")
	mcp := filepath.Join(peers, "@modelcontextprotocol")
	realPeers, err := filepath.EvalSymlinks(peers) // a git worktree's node_modules may be a link
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{realPeers, peers, filepath.Join(binDir, "zest-toolhost")} {
		traversableBy(t, p)
	}
	wantActive := []string{"user_namespace", "mount_namespace", "pid_namespace", "network_none", "read_only_root", "private_tmp",
		"no_new_privs", "capabilities_dropped", "seccomp", "landlock", "rlimit_as", "rlimit_nproc", "rlimit_cpu", "rlimit_nofile"}
	connect := func(t *testing.T, cfg map[string]any) {
		t.Helper()
		registerServer(t, s, cfg)
		if r := admin(t, s, "POST", "/servers/"+cfg["id"].(string)+"/connect", ""); r.Status != 200 {
			t.Fatalf("connect %s: %d %s", cfg["id"], r.Status, r.Body)
		}
		got := sandboxOf(t, s, cfg["id"].(string))
		var active []string
		for _, a := range asSlice(got["active"]) {
			active = append(active, a.(string))
		}
		if !slices.Equal(active, wantActive) {
			t.Fatalf("%s: process.sandbox %v, want active %v", cfg["id"], got, wantActive)
		}
	}

	t.Run("server-everything", func(t *testing.T) {
		connect(t, map[string]any{"id": "everything", "command": "node", "args": []string{filepath.Join(mcp, "server-everything", "dist", "index.js")},
			"sandbox": map[string]any{"readable_paths": []string{peers}}})
		if text, _ := sandboxCall(t, s, "everything", "echo", map[string]any{"message": "hello-mcp"}); text != "Echo: hello-mcp" {
			t.Fatalf("echo: %q", text)
		}
		if text, _ := sandboxCall(t, s, "everything", "get-sum", map[string]any{"a": 2, "b": 3}); !strings.Contains(text, "5") {
			t.Fatalf("get-sum: %q", text)
		}
	})

	t.Run("server-everything with network proxy", func(t *testing.T) {
		// A bad pattern is refused with its field; a good config runs with the forwarder and
		// the proxy variables (server-everything's get-env shows them).
		bad := map[string]any{"id": "proxied", "command": "node", "args": []string{filepath.Join(mcp, "server-everything", "dist", "index.js")},
			"sandbox": map[string]any{"readable_paths": []string{peers}, "network": "proxy", "allow_hosts": []string{"https://api.example.com/"}}}
		if r := admin(t, s, "POST", "/servers", jsonBody(t, bad)); r.Status != 400 || !strings.Contains(string(r.Body), "sandbox.allow_hosts[0]") {
			t.Fatalf("a URL in allow_hosts: %d %s, want 400 naming sandbox.allow_hosts[0]", r.Status, r.Body)
		}
		cfg := map[string]any{"id": "proxied", "command": "node", "args": []string{filepath.Join(mcp, "server-everything", "dist", "index.js")},
			"sandbox": map[string]any{"readable_paths": []string{peers}, "network": "proxy", "allow_hosts": []string{"api.example.com"}}}
		registerServer(t, s, cfg)
		if r := admin(t, s, "POST", "/servers/proxied/connect", ""); r.Status != 200 {
			t.Fatalf("connect proxied: %d %s", r.Status, r.Body)
		}
		var active []string
		for _, a := range asSlice(sandboxOf(t, s, "proxied")["active"]) {
			active = append(active, a.(string))
		}
		want := slices.Clone(wantActive)
		want[slices.Index(want, "network_none")] = "network_proxy"
		if !slices.Equal(active, want) {
			t.Fatalf("process.sandbox.active %v, want %v", active, want)
		}
		text, _ := sandboxCall(t, s, "proxied", "get-env", map[string]any{})
		for _, v := range []string{`"HTTPS_PROXY": "http://127.0.0.1:3128"`, `"NODE_USE_ENV_PROXY": "1"`, `"NO_PROXY": "localhost,127.0.0.1"`} {
			if !strings.Contains(text, v) {
				t.Fatalf("get-env lacks %s: %.600s", v, text)
			}
		}
	})

	t.Run("server-everything through npx", func(t *testing.T) {
		// npx finds the package's bin in the working directory's node_modules (no network in the
		// sandbox) and writes its logs to the private $HOME. node_modules may be a symbolic link
		// (a git worktree's): its target must be in the view too.
		modules := realPeers
		connect(t, map[string]any{"id": "npx-everything", "command": "npx", "args": []string{"mcp-server-everything"}, "working_dir": peersDir(t),
			"sandbox": map[string]any{"readable_paths": []string{peersDir(t), modules}}})
		if text, _ := sandboxCall(t, s, "npx-everything", "echo", map[string]any{"message": "via npx"}); text != "Echo: via npx" {
			t.Fatalf("echo: %q", text)
		}
	})

	t.Run("server-memory", func(t *testing.T) {
		connect(t, map[string]any{"id": "memory", "command": "node", "args": []string{filepath.Join(mcp, "server-memory", "dist", "index.js")},
			"env":     map[string]string{"MEMORY_FILE_PATH": "${E2E_MEMORY_FILE}"},
			"sandbox": map[string]any{"readable_paths": []string{peers}, "writable_paths": []string{memDir}}})
		if text, isErr := sandboxCall(t, s, "memory", "create_entities", map[string]any{"entities": []map[string]any{
			{"name": "zest", "entityType": "gateway", "observations": []string{"runs sandboxed"}}}}); isErr {
			t.Fatalf("create_entities: %q", text)
		}
		if text, _ := sandboxCall(t, s, "memory", "read_graph", map[string]any{}); !strings.Contains(text, "runs sandboxed") {
			t.Fatalf("read_graph: %q", text)
		}
		if b, err := os.ReadFile(filepath.Join(memDir, "memory.jsonl")); err != nil || !strings.Contains(string(b), "runs sandboxed") {
			t.Fatalf("the memory file on the host: %q %v", b, err)
		}
	})

	t.Run("server-filesystem", func(t *testing.T) {
		connect(t, map[string]any{"id": "files", "command": "node", "args": []string{filepath.Join(mcp, "server-filesystem", "dist", "index.js"), fsDir},
			"sandbox": map[string]any{"readable_paths": []string{peers}, "writable_paths": []string{fsDir}}})
		note := filepath.Join(fsDir, "note.txt")
		if text, isErr := sandboxCall(t, s, "files", "write_file", map[string]any{"path": note, "content": "written in the sandbox"}); isErr {
			t.Fatalf("write_file: %q", text)
		}
		if text, _ := sandboxCall(t, s, "files", "read_text_file", map[string]any{"path": note}); text != "written in the sandbox" {
			t.Fatalf("read_text_file: %q", text)
		}
		if b, err := os.ReadFile(note); err != nil || string(b) != "written in the sandbox" {
			t.Fatalf("the file on the host: %q %v", b, err)
		}
		if text, _ := sandboxCall(t, s, "files", "list_allowed_directories", map[string]any{}); !strings.Contains(text, fsDir) {
			t.Fatalf("list_allowed_directories: %q", text)
		}
	})

	t.Run("sandbox false runs unconfined beside them", func(t *testing.T) {
		registerServer(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}, "sandbox": false})
		if r := admin(t, s, "POST", "/servers/echo/connect", ""); r.Status != 200 {
			t.Fatalf("connect echo: %d %s", r.Status, r.Body)
		}
		if sb := sandboxOf(t, s, "echo"); sb != nil {
			t.Fatalf("an opted-out server has process.sandbox %v", sb)
		}
		if text, _ := sandboxCall(t, s, "echo", "echo", map[string]any{"text": "unconfined"}); text != "unconfined" {
			t.Fatalf("echo: %q", text)
		}
	})

	t.Run("a server without bwrap's view of its files fails to start, not unconfined", func(t *testing.T) {
		// No readable_paths: the script is outside the sandbox's view, so node cannot load it.
		registerServer(t, s, map[string]any{"id": "blind", "command": "node", "args": []string{filepath.Join(mcp, "server-everything", "dist", "index.js")}})
		r := admin(t, s, "POST", "/servers/blind/connect", "")
		if r.Status != 502 || !strings.Contains(errMessage(t, r), "Cannot find module") {
			t.Fatalf("connect blind: %d %s", r.Status, r.Body)
		}
	})
}
