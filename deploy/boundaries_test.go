package deploy

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
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
		for _, pkg := range listPackages(t, "../"+dir+"/...") {
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

// goPackage is what go list -json says of one package.
type goPackage struct {
	ImportPath, Name string
	Imports, Deps    []string
}

// listPackages lists the packages of pattern (non-test: what the binaries link) with their
// dependencies.
func listPackages(t *testing.T, pattern string) []goPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Name,Imports,Deps", pattern).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("go list %s: %v\n%s", pattern, err, exit.Stderr)
	}
	if err != nil {
		t.Fatalf("go list %s: %v (the test needs the go command on PATH)", pattern, err)
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
		t.Fatalf("go list %s: no packages", pattern)
	}
	return pkgs
}
