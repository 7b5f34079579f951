// Package testenv is the one policy for what a test needs beyond Go: a test that needs an
// optional dependency (etcd, the npm peers, Node, Chromium, bubblewrap, Prometheus, root)
// says so with Need, which returns where the dependency is, or skips the test with what is
// missing, why the test needs it and how to install it. `make test` sets ZEST_REQUIRE_ALL=1:
// there a missing dependency fails the test instead, so CI never passes by skipping.
//
// `go test ./...` in any package, as a user without root, npm or apt, runs everything else.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// EnvRequireAll is the variable that, when "1", turns every missing dependency into a failure
// (make test sets it).
const EnvRequireAll = "ZEST_REQUIRE_ALL"

// Variables that point a dependency somewhere else than its default place.
const (
	// EnvEtcdBin names the etcd binary (default <repo>/.bin/etcd, built by `make etcd`).
	EnvEtcdBin = "ZEST_ETCD_BIN"
	// EnvChromium names a Chromium or Chrome binary (default /usr/bin/chromium, else chromium
	// on PATH).
	EnvChromium = "ZEST_CHROMIUM"
)

// TB is what Need uses of a test: testing.TB has it, and a program that is not a test (the
// benchmarks) can give its own.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Dep is an optional dependency of a test.
type Dep struct {
	name    string
	install string                 // what makes it present
	find    func() (string, error) // where it is, or why it is missing
}

// String names the dependency.
func (d Dep) String() string { return d.name }

// The dependencies. Each is installed by one Makefile target (make test runs them all).
var (
	// Etcd is an etcd server binary, for tests that run a real cluster (lib/etcdtest).
	Etcd = Dep{"etcd", "run `make etcd`, or set " + EnvEtcdBin, findEtcd}
	// Peers is scripts/peers/node_modules, the npm MCP servers, clients and conformance
	// suites pinned by its lockfile; Need returns that directory.
	Peers = Dep{"the npm peers", "run `make peers`", findPeers}
	// Node is node on PATH, the runtime of the peers' servers.
	Node = Dep{"node", "install Node.js 20 or later (Debian: apt-get install nodejs)", lookPath("node")}
	// Chromium is a headless browser for the console's tests.
	Chromium = Dep{"Chromium", "run `make chromium`, or set " + EnvChromium, findChromium}
	// BrowserDeps is axe-core's browser build (scripts/browser); Need returns axe.min.js.
	BrowserDeps = Dep{"axe-core", "run `make browser-deps`", findAxe}
	// BrowserSDK is the MCP TypeScript SDK v2 client and esbuild (scripts/browser), which
	// bundle the client for a page; Need returns scripts/browser/node_modules.
	BrowserSDK = Dep{"the MCP TypeScript SDK v2 client and esbuild", "run `make browser-deps`", findBrowserSDK}
	// Bubblewrap is bwrap on PATH, the sandbox of untrusted stdio servers.
	Bubblewrap = Dep{"bubblewrap (bwrap)", "run `make bubblewrap`", lookPath("bwrap")}
	// Prometheus is the prometheus server on PATH.
	Prometheus = Dep{"Prometheus", "run `make prometheus`", lookPath("prometheus")}
	// Root is running as root, for tests of what only root can do (switching users, the
	// sandbox's mounts); Need returns "".
	Root = Dep{"root", "run the test as root (as make test does in CI)", findRoot}
)

// Need returns where dep is (a path; "" for Root). When dep is missing it skips the test,
// saying what is missing, why the test needs it and how to install it, or fails the test
// when ZEST_REQUIRE_ALL=1.
func Need(t TB, dep Dep, why string) string {
	t.Helper()
	p, err := dep.find()
	if err == nil {
		return p
	}
	if required() {
		t.Fatalf("%s=1 and this test needs %s (%s): %v; %s", EnvRequireAll, dep.name, why, err, dep.install)
		return ""
	}
	t.Skipf("skipped: needs %s (%s): %v; %s, or set %s=1 to make this a failure", dep.name, why, err, dep.install, EnvRequireAll)
	return ""
}

// required reports whether a missing dependency fails a test (ZEST_REQUIRE_ALL=1).
func required() bool { return os.Getenv(EnvRequireAll) == "1" }

// ModulePath is the product's module, declared by the go.mod at the repository's root.
const ModulePath = "github.com/zestmcp/zest"

// RepoRoot is the repository's root: the nearest directory at or above the working directory
// whose go.mod declares ModulePath (a test runs in its package's directory, somewhere below
// it; cli/ and deploy/ hold modules of their own, which this walk passes by).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isProductModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod declaring module %s at or above the working directory: run the test inside the repository", ModulePath)
		}
		dir = parent
	}
}

// isProductModule reports whether the go.mod at path declares ModulePath.
func isProductModule(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == ModulePath
		}
	}
	return false
}

func lookPath(name string) func() (string, error) {
	return func() (string, error) { return exec.LookPath(name) }
}

func findRoot() (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("running as uid %d", os.Geteuid())
	}
	return "", nil
}

func findEtcd() (string, error) {
	bin := os.Getenv(EnvEtcdBin)
	if bin == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", fmt.Errorf("%s is not set and %w", EnvEtcdBin, err)
		}
		bin = filepath.Join(root, ".bin", "etcd")
	}
	return executable(bin)
}

// peerMarker is a file `make peers` leaves in node_modules once npm ci has finished (a
// directory half-installed by an interrupted run has none).
const peerMarker = ".package-lock.json"

func findPeers() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "scripts", "peers", "node_modules")
	if _, err := os.Stat(filepath.Join(dir, peerMarker)); err != nil {
		return "", fmt.Errorf("%s is not installed: %w", dir, err)
	}
	return dir, nil
}

// chromiumPath is where Debian's chromium package puts its launcher.
const chromiumPath = "/usr/bin/chromium"

func findChromium() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w (unset it to use %s)", EnvChromium, p, err, chromiumPath)
		}
		return p, nil
	}
	if _, err := os.Stat(chromiumPath); err == nil {
		return chromiumPath, nil
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no Chromium at %s nor on PATH", chromiumPath)
}

func findAxe() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "scripts", "browser", "node_modules", "axe-core", "axe.min.js")
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

func findBrowserSDK() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "scripts", "browser", "node_modules")
	for _, p := range []string{"@modelcontextprotocol/client/package.json", "esbuild/lib/main.js"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// executable returns path when it is an executable file.
func executable(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", path)
	}
	return path, nil
}
