// Package sandboxspec is the contract of a stdio server's sandbox beyond the fields of its
// message (toolhost.v1.Sandbox, which mcpgateway.v1.Sandbox mirrors): the values each field may
// take, and the allow_hosts patterns. mcpgateway checks a server's config with it when the
// config is saved, and the tool host before it confines a child, so that both refuse the same
// configs with the same words; the tool host's proxy matches hosts with its patterns (Allow).
// Services share it here, never through each other's packages.
package sandboxspec

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
)

// Network modes (sandbox.network).
const (
	NetworkNone  = "none"
	NetworkHost  = "host"
	NetworkProxy = "proxy"
)

// Bounds of the limits a config may set.
const (
	MinMemoryBytes = 64 << 20
	MaxMemoryBytes = 1 << 40
	MinPids        = 8
	MaxPids        = 1 << 16
	MaxCPUSeconds  = 1 << 30
	MinOpenFiles   = 16
	MaxOpenFiles   = 1 << 20
	// MaxPaths bounds writable_paths and readable_paths each.
	MaxPaths = 64
	// MaxPathBytes bounds one of their paths.
	MaxPathBytes = 4096
)

// ErrBadSandbox means a sandbox config is invalid; the message names the field and the fix.
var ErrBadSandbox = errors.New("invalid sandbox")

// FieldError is one refused field: its text leads with the field (as mcpgateway's config
// errors do, which name the field first for the admin form) and it is an ErrBadSandbox.
type FieldError string

func (e FieldError) Error() string { return string(e) }

// Is makes every FieldError an ErrBadSandbox for errors.Is.
func (e FieldError) Is(target error) bool { return target == ErrBadSandbox }

// Check validates the fields of sb whatever enabled says, so that a wrong config is refused
// when it is saved rather than when it is first sandboxed.
func Check(sb *toolhostv1.Sandbox) error {
	if sb == nil {
		return nil
	}
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, FieldError(fmt.Sprintf(format, a...)))
	}
	switch sb.GetNetwork() {
	case "", NetworkNone, NetworkHost:
		if len(sb.GetAllowHosts()) > 0 {
			bad("sandbox.allow_hosts is set but network is %q: allow_hosts only applies to network \"proxy\"", Network(sb))
		}
	case NetworkProxy:
		if len(sb.GetAllowHosts()) == 0 {
			bad("sandbox.network \"proxy\" needs sandbox.allow_hosts: list the hosts the server may reach (e.g. [\"api.example.com\", \"*.example.org:8443\"]), or use network \"none\"")
		}
		if _, err := ParseAllowList(sb.GetAllowHosts()); err != nil {
			errs = append(errs, err)
		}
	default:
		bad("sandbox.network %q: want \"none\" (default), \"host\" or \"proxy\"", sb.GetNetwork())
	}
	for _, l := range []struct {
		name  string
		paths []string
	}{{"writable_paths", sb.GetWritablePaths()}, {"readable_paths", sb.GetReadablePaths()}} {
		if len(l.paths) > MaxPaths {
			bad("sandbox.%s has %d paths: at most %d", l.name, len(l.paths), MaxPaths)
		}
		for i, p := range l.paths {
			if err := checkPath(p); err != nil {
				bad("sandbox.%s[%d] %q %v", l.name, i, p, err)
			}
		}
	}
	if sb.MemoryBytes != nil && (sb.GetMemoryBytes() < MinMemoryBytes || sb.GetMemoryBytes() > MaxMemoryBytes) {
		bad("sandbox.memory_bytes %d: want %d (64 MiB) to %d (1 TiB)", sb.GetMemoryBytes(), int64(MinMemoryBytes), int64(MaxMemoryBytes))
	}
	if sb.MaxPids != nil && (sb.GetMaxPids() < MinPids || sb.GetMaxPids() > MaxPids) {
		bad("sandbox.max_pids %d: want %d to %d", sb.GetMaxPids(), MinPids, MaxPids)
	}
	if sb.CpuSeconds != nil && (sb.GetCpuSeconds() < 1 || sb.GetCpuSeconds() > MaxCPUSeconds) {
		bad("sandbox.cpu_seconds %d: want 1 to %d", sb.GetCpuSeconds(), MaxCPUSeconds)
	}
	if sb.OpenFiles != nil && (sb.GetOpenFiles() < MinOpenFiles || sb.GetOpenFiles() > MaxOpenFiles) {
		bad("sandbox.open_files %d: want %d to %d", sb.GetOpenFiles(), MinOpenFiles, MaxOpenFiles)
	}
	return errors.Join(errs...)
}

func checkPath(p string) error {
	switch {
	case !filepath.IsAbs(p):
		return errors.New("is not absolute: give the full path, e.g. /var/lib/my-server")
	case filepath.Clean(p) != p:
		return fmt.Errorf("is not clean: write it as %q", filepath.Clean(p))
	case p == "/":
		return errors.New("is the whole file system: name the directories the server needs")
	case len(p) > MaxPathBytes:
		return fmt.Errorf("is longer than %d bytes", MaxPathBytes)
	case strings.ContainsAny(p, "\x00\n"):
		return errors.New("contains a NUL or newline")
	}
	return nil
}

// Network is sb's network mode, NetworkNone when it leaves network out.
func Network(sb *toolhostv1.Sandbox) string {
	if sb.GetNetwork() == "" {
		return NetworkNone
	}
	return sb.GetNetwork()
}
