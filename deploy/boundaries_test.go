package deploy

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// deployables are the folders of the programs Zest ships, by import path: each is built, run
// and scaled on its own, and they meet in proto/ (gRPC), never in each other's Go packages.
// lib/ and proto/ are shared by all.
var deployables = map[string]string{
	"gateway":             "github.com/zestmcp/zest/gateway",
	"services/inference":  "github.com/zestmcp/zest/services/inference",
	"services/mcpgateway": "github.com/zestmcp/zest/services/mcpgateway",
	"services/toolhost":   "github.com/zestmcp/zest/services/toolhost",
	"cli":                 "github.com/zestmcp/zest/cli",
}

// TestServicesMeetInProto: no package of a service, nor of zestctl, imports a package of
// another, nor does lib/ import any of them; only test helpers (packages named …test, which run
// another service in the test's process as the e2e suite runs its binaries) may. A service
// that reaches another through a dependency is named too.
func TestServicesMeetInProto(t *testing.T) {
	owner := func(path string) string {
		for dir, p := range deployables {
			if path == p || strings.HasPrefix(path, p+"/") {
				return dir
			}
		}
		return ""
	}
	for _, dir := range append(slices.Sorted(maps.Keys(deployables)), "lib") {
		direct := false
		var through []string
		for _, pkg := range listPackages(t, packagesOf(dir)) {
			if strings.HasSuffix(pkg.Name, "test") {
				continue
			}
			for _, imp := range pkg.Imports {
				if o := owner(imp); o != "" && o != dir {
					t.Errorf("%s imports %s: %s is another deployable; share the type through proto/ or the code through lib/", pkg.ImportPath, imp, o)
					direct = true
				}
			}
			for _, dep := range pkg.Deps {
				if o := owner(dep); o != "" && o != dir {
					through = append(through, pkg.ImportPath+" → "+dep)
				}
			}
		}
		if !direct && len(through) > 0 {
			t.Errorf("%s reaches another deployable through a dependency: %s", dir, through[0])
		}
	}
}

// The repository's modules, seen from this one (a test runs in its package's directory).
const (
	productDir = ".." // github.com/zestmcp/zest: the services, lib, proto and their tests
	cliDir     = "../cli"
)

// commandLineOnly are the modules only zestctl may link: its command-line framework.
var commandLineOnly = []string{"github.com/spf13/cobra", "github.com/spf13/pflag"}

// notProduct are modules kept out of the product's module graph by a module of their own:
// etcd's server (scripts/etcd builds the tests' etcd) and this module's manifest validators
// (docs/decisions.md, "One module for the product").
var notProduct = []string{
	"go.etcd.io/etcd/server/", "go.etcd.io/raft/",
	"github.com/compose-spec/", "k8s.io/", "sigs.k8s.io/kustomize/",
}

// TestServicesLinkNoCommandLine: no service's binary links cobra or pflag — zestctl's module
// keeps them out of the product's go.mod, and this names the boundary the module protects.
func TestServicesLinkNoCommandLine(t *testing.T) {
	cmds := listPackages(t, packageSet{productDir, "./gateway/cmd/... ./services/.../cmd/..."})
	names := 0
	for _, cmd := range cmds {
		if cmd.Name != "main" {
			continue
		}
		names++
		for _, dep := range cmd.Deps {
			for _, m := range commandLineOnly {
				if dep == m || strings.HasPrefix(dep, m+"/") {
					t.Errorf("%s links %s: the command-line framework is zestctl's (cli/ is a module of its own); a service reads flags with the standard library", cmd.ImportPath, dep)
				}
			}
		}
	}
	if names < 4 {
		t.Fatalf("found %d service commands, want the four cmd/zest-*", names)
	}
}

// TestProductModuleGraph: the product's module graph, and so its go.sum, holds neither etcd's
// server nor the deployment tests' validators, and no go.work joins their modules to it.
func TestProductModuleGraph(t *testing.T) {
	out, err := exec.Command("go", "-C", productDir, "list", "-m", "all").Output()
	if err != nil {
		t.Fatalf("go list -m all at the repository's root: %v%s", err, stderr(err))
	}
	for line := range strings.Lines(string(out)) {
		for _, m := range notProduct {
			if strings.HasPrefix(line, m) {
				t.Errorf("the product's module graph holds %s: keep it in the module that needs it (scripts/etcd, deploy), out of the root go.mod", strings.TrimSpace(line))
			}
		}
	}
	if _, err := os.Stat(productDir + "/go.work"); err == nil {
		t.Errorf("go.work at the repository's root: the product is one module; cli/ reaches it by its replace, and scripts/etcd and deploy stay apart")
	}
}

// packageSet is a go list pattern and the module directory it is listed from.
type packageSet struct{ dir, patterns string }

// packagesOf is the pattern of a top folder's packages (cli/ is its own module).
func packagesOf(dir string) packageSet {
	if dir == "cli" {
		return packageSet{cliDir, "./..."}
	}
	return packageSet{productDir, "./" + dir + "/..."}
}

// goPackage is what go list -json says of one package.
type goPackage struct {
	ImportPath, Name string
	Imports, Deps    []string
}

// listPackages lists the packages of set (non-test: what the binaries link) with their
// dependencies.
func listPackages(t *testing.T, set packageSet) []goPackage {
	t.Helper()
	args := append([]string{"-C", set.dir, "list", "-json=ImportPath,Name,Imports,Deps"}, strings.Fields(set.patterns)...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list %s in %s: %v%s", set.patterns, set.dir, err, stderr(err))
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %s in %s: no packages", set.patterns, set.dir)
	}
	return pkgs
}

// stderr is what a failed go command said, or how to get one.
func stderr(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return "\n" + string(exit.Stderr)
	}
	return " (the test needs the go command on PATH)"
}
