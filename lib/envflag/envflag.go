// Package envflag gives every flag of a service an environment variable of the same name:
// flag -edge-addr is ZEST_EDGE_ADDR. A flag on the command line wins over the environment,
// which wins over the default.
package envflag

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// Prefix is put in front of every environment variable name.
const Prefix = "ZEST_"

// EnvName returns the environment variable that sets flag name.
func EnvName(name string) string {
	return Prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse parses args into fs, then fills every flag not given on the command line from its
// environment variable, looked up with getenv (os.Getenv when nil).
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every setting is a -flag or a %s* variable", fs.Args(), Prefix)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := EnvName(f.Name)
		if v := getenv(env); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment variable %s=%q: %w", env, v, e)
			}
		}
	})
	return err
}

// Usage prints the flags with their environment variable names.
func Usage(fs *flag.FlagSet) func() {
	return func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage of %s (every flag can also be set by the environment variable shown):\n", fs.Name())
		fs.VisitAll(func(f *flag.Flag) {
			fmt.Fprintf(out, "  -%s  (%s, default %q)\n      %s\n", f.Name, EnvName(f.Name), f.DefValue, f.Usage)
		})
	}
}
