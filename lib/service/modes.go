package service

import (
	"context"
	"runtime/debug"

	"github.com/zestmcp/zest/lib/healthcheck"
)

// Version is the build's version, stamped by the linker:
//
//	go build -ldflags "-X github.com/zestmcp/zest/lib/service.Version=v1.2.3" ...
//
// (`make images` stamps `git describe --tags --always --dirty`). -version prints it.
var Version = ""

// VersionString returns Version, else the VCS revision the go command recorded in the binary
// (a build inside a git checkout), else "dev".
func VersionString() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			if dirty {
				rev += "-dirty"
			}
			return "dev-" + rev
		}
	}
	return "dev"
}

// Option adds a behaviour to Main.
type Option func(*options)

type options struct {
	health func(ctx context.Context) error
}

// GRPCHealth gives the binary -healthcheck for a gRPC service: it asks the health service at
// *addr (read once the configuration is parsed, so flags and ZEST_* variables count).
func GRPCHealth(addr *string) Option {
	return func(o *options) {
		o.health = func(ctx context.Context) error { return healthcheck.GRPC(ctx, *addr) }
	}
}

// HTTPHealth gives the binary -healthcheck for an HTTP service: GET path at *addr.
func HTTPHealth(addr *string, path string) Option {
	return func(o *options) {
		o.health = func(ctx context.Context) error { return healthcheck.HTTP(ctx, *addr, path) }
	}
}

// Command-line-only switches: commands, not settings, so no ZEST_* variable sets them (a
// ZEST_HEALTHCHECK in a container's environment must not turn the service into its probe).
const (
	healthcheckFlag = "healthcheck"
	versionFlag     = "version"
	modesUsage      = "  -healthcheck  (command line only)\n      probe the service this configuration starts and exit 0 when healthy, 1 when not\n" +
		"  -version  (command line only)\n      print the version and exit\n"
)

// modes takes -healthcheck and -version (one or two dashes) out of args, up to a "--".
func modes(args []string) (rest []string, health, version bool) {
	rest = make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(rest, args[i:]...), health, version
		}
		switch a {
		case "-" + healthcheckFlag, "--" + healthcheckFlag:
			health = true
		case "-" + versionFlag, "--" + versionFlag:
			version = true
		default:
			rest = append(rest, a)
		}
	}
	return rest, health, version
}
