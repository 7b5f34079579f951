package host

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/zestmcp/zest/lib/keyauth"
)

// LemonadeKeys are the variables of Lemonade's keys. The tool host checks only the service key
// and calls no other service, so it needs neither; and a process holds its environment for
// life where /proc/<pid>/environ shows it (os.Unsetenv changes a copy, not that), so it must not
// start with them either.
var LemonadeKeys = []string{keyauth.EnvAPIKey, keyauth.EnvAdminKey}

// envDropped tells the tool host, re-executed by DropLemonadeKeys, which variables it dropped
// (their names, never their values), so that its log says so.
const envDropped = "ZEST_TOOLHOST_DROPPED_KEYS"

// withoutLemonadeKeys returns environ without the LemonadeKeys that have a value, and their
// names; kept is nil when there was none.
func withoutLemonadeKeys(environ []string) (kept, dropped []string) {
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if slices.Contains(LemonadeKeys, k) && v != "" {
			if !slices.Contains(dropped, k) {
				dropped = append(dropped, k)
			}
			continue
		}
		kept = append(kept, kv)
	}
	if dropped == nil {
		return nil, nil
	}
	return append(kept, envDropped+"="+strings.Join(dropped, ",")), dropped
}

// DropLemonadeKeys is the first thing the tool host's main does: when its environment holds
// one of LemonadeKeys, it executes its own binary again (exec: syscall.Exec; same pid, same
// arguments and descriptors) with an environment without them, so that no server it runs can
// find them in its ancestors' /proc entries or memory. It returns only when there is nothing
// to drop, or when the exec failed (then the tool host must not start).
func DropLemonadeKeys(exec func(argv0 string, argv, envv []string) error) error {
	env, dropped := withoutLemonadeKeys(os.Environ())
	if dropped == nil {
		return nil
	}
	// /proc/self/exe is this very binary, whatever path or PATH lookup started it.
	if err := exec("/proc/self/exe", os.Args, env); err != nil {
		return fmt.Errorf("the tool host's environment holds %s, which it must not hold (a server it runs could read them), and it could not start again without them (%w): remove them from the tool host's environment",
			strings.Join(dropped, " and "), err)
	}
	return nil // not reached: exec replaced the process
}

// logDroppedKeys logs what DropLemonadeKeys dropped before this process image started.
func logDroppedKeys(log *slog.Logger) {
	names := os.Getenv(envDropped)
	if names == "" {
		return
	}
	os.Unsetenv(envDropped)
	log.Warn("the tool host dropped Lemonade's keys from its environment at start: it needs neither, and the servers it runs must not be able to read them; leave them out of its environment",
		"variables", names)
}
