// Package fixturebin builds the mcpfixture test server for the tool host's tests.
package fixturebin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Build compiles mcpfixture into a new temporary directory and returns the binary's path and
// a function that removes the directory.
func Build() (string, func(), error) {
	dir, err := os.MkdirTemp("", "mcpfixture")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "mcpfixture")
	bin := filepath.Join(dir, "mcpfixture")
	if out, err := exec.Command("go", "build", "-o", bin, src).CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("build mcpfixture: %w\n%s", err, out)
	}
	return bin, cleanup, nil
}
