package host

import (
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDropLemonadeKeys: a tool host whose environment holds a Lemonade key executes itself
// again, same arguments, with an environment that keeps everything but the keys and names
// what it dropped; the new image logs the names (never the values). An empty variable holds
// nothing and costs no exec; a failed exec is an error that names the variables and the fix.
func TestDropLemonadeKeys(t *testing.T) {
	var gotArgv0 string
	var gotArgv, gotEnv []string
	execs := 0
	fake := func(argv0 string, argv, envv []string) error {
		execs++
		gotArgv0, gotArgv, gotEnv = argv0, argv, envv
		return nil
	}

	t.Setenv("LEMONADE_API_KEY", "")
	t.Setenv("LEMONADE_ADMIN_API_KEY", "")
	if err := DropLemonadeKeys(fake); err != nil || execs != 0 {
		t.Fatalf("empty keys: %v, %d execs", err, execs)
	}

	t.Setenv("LEMONADE_API_KEY", "api-xyzzy")
	t.Setenv("LEMONADE_ADMIN_API_KEY", "admin-xyzzy")
	t.Setenv("ZEST_SERVICE_KEY", "service-key-0123456789")
	t.Setenv("KEEP_ME", "1")
	if err := DropLemonadeKeys(fake); err != nil || execs != 1 {
		t.Fatalf("DropLemonadeKeys: %v, %d execs", err, execs)
	}
	if gotArgv0 != "/proc/self/exe" || !slices.Equal(gotArgv, os.Args) {
		t.Fatalf("exec %q %q, want /proc/self/exe with the same arguments", gotArgv0, gotArgv)
	}
	joined := strings.Join(gotEnv, "\n")
	if strings.Contains(joined, "xyzzy") || !slices.Contains(gotEnv, "KEEP_ME=1") || !slices.Contains(gotEnv, "ZEST_SERVICE_KEY=service-key-0123456789") ||
		!slices.Contains(gotEnv, envDropped+"=LEMONADE_ADMIN_API_KEY,LEMONADE_API_KEY") && !slices.Contains(gotEnv, envDropped+"=LEMONADE_API_KEY,LEMONADE_ADMIN_API_KEY") {
		t.Fatalf("the new environment:\n%s", joined)
	}

	// The new image: its log names the variables, and the marker is gone.
	for _, kv := range gotEnv {
		if k, v, _ := strings.Cut(kv, "="); k == envDropped {
			t.Setenv(envDropped, v)
		}
	}
	var logs strings.Builder
	logDroppedKeys(slog.New(slog.NewTextHandler(&logs, nil)))
	if !strings.Contains(logs.String(), "dropped Lemonade's keys") || !strings.Contains(logs.String(), "LEMONADE_API_KEY") || strings.Contains(logs.String(), "xyzzy") {
		t.Fatalf("log: %q", logs.String())
	}
	if _, set := os.LookupEnv(envDropped); set {
		t.Fatal("the marker is still set")
	}

	err := DropLemonadeKeys(func(string, []string, []string) error { return errors.New("exec format error") })
	if err == nil || !strings.Contains(err.Error(), "remove them from the tool host's environment") || strings.Contains(err.Error(), "xyzzy") {
		t.Fatalf("a failed exec: %v", err)
	}
}
