package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTB records what Need did instead of ending the test.
type fakeTB struct{ skipped, failed string }

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Skipf(format string, args ...any)  { f.skipped = fmt.Sprintf(format, args...) }
func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

var missing = Dep{"the widget", "run `make widget`", func() (string, error) { return "", errors.New("no widget on PATH") }}

// TestMissingSkipsSayingWhatWhyAndHow: without ZEST_REQUIRE_ALL a missing dependency skips,
// and the reason names it, the test's reason, the error and the fix.
func TestMissingSkipsSayingWhatWhyAndHow(t *testing.T) {
	t.Setenv(EnvRequireAll, "")
	var f fakeTB
	Need(&f, missing, "it drives widgets")
	for _, want := range []string{"the widget", "it drives widgets", "no widget on PATH", "make widget", EnvRequireAll + "=1"} {
		if !strings.Contains(f.skipped, want) {
			t.Errorf("skip %q lacks %q", f.skipped, want)
		}
	}
	if f.failed != "" {
		t.Errorf("failed: %s", f.failed)
	}
}

// TestMissingFailsWhenAllAreRequired: with ZEST_REQUIRE_ALL=1 (make test) it fails instead.
func TestMissingFailsWhenAllAreRequired(t *testing.T) {
	t.Setenv(EnvRequireAll, "1")
	var f fakeTB
	Need(&f, missing, "it drives widgets")
	if f.skipped != "" || !strings.Contains(f.failed, "the widget") || !strings.Contains(f.failed, "make widget") {
		t.Fatalf("skipped %q, failed %q", f.skipped, f.failed)
	}
}

// TestPresentReturnsWhere: a dependency found is returned, with no skip even when required.
func TestPresentReturnsWhere(t *testing.T) {
	t.Setenv(EnvRequireAll, "1")
	var f fakeTB
	here := Dep{"x", "", func() (string, error) { return "/opt/x", nil }}
	if p := Need(&f, here, "why"); p != "/opt/x" || f.skipped != "" || f.failed != "" {
		t.Fatalf("Need = %q, skipped %q, failed %q", p, f.skipped, f.failed)
	}
}

// TestEtcdBin: ZEST_ETCD_BIN names the binary; a missing or non-executable one is missing.
func TestEtcdBin(t *testing.T) {
	dir := t.TempDir()
	exe, plain := filepath.Join(dir, "etcd"), filepath.Join(dir, "etcd.txt")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, ok := range map[string]bool{exe: true, plain: false, filepath.Join(dir, "none"): false, dir: false} {
		t.Setenv(EnvEtcdBin, path)
		if got, err := Etcd.find(); (err == nil) != ok || (ok && got != path) {
			t.Errorf("%s: %q %v, want found %v", path, got, err, ok)
		}
	}
}

// TestRepoRoot: the root holds the product's go.mod and this package lies below it.
func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if !isProductModule(filepath.Join(root, "go.mod")) || !strings.HasPrefix(wd, root+string(filepath.Separator)) {
		t.Fatalf("root %s for %s: want the directory of %s's go.mod above it", root, wd, ModulePath)
	}
	if isProductModule(filepath.Join(root, "cli", "go.mod")) {
		t.Fatalf("cli/go.mod taken for %s's", ModulePath)
	}
}

// TestRoot: Root is present exactly when the test runs as root.
func TestRoot(t *testing.T) {
	_, err := Root.find()
	if (err == nil) != (os.Geteuid() == 0) {
		t.Fatalf("euid %d: %v", os.Geteuid(), err)
	}
}
