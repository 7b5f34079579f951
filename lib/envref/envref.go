// Package envref handles secrets given as ${VAR} references: a config stores the reference,
// and only the process that needs the value resolves it from its own environment. Values are
// never stored, logged or returned.
package envref

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

var ref = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// Errors of references.
var (
	// ErrRawValue means a value is not a ${VAR} reference.
	ErrRawValue = errors.New("must be a ${VARIABLE} reference; raw values are rejected")
	// ErrNotSet means the referenced variable is not set where the reference is resolved.
	ErrNotSet = errors.New("Required MCP environment variable is not set")
	// ErrBadName means an env name is not a valid variable name.
	ErrBadName = errors.New("is not a valid environment variable name")
	// ErrReserved means a reference names a variable of Zest's own services (ReservedPrefixes).
	ErrReserved = errors.New("reserved for Zest's own services")
)

// ReservedPrefixes start the variables of Zest's own services (keys, addresses, settings): no
// MCP server gets one, whatever the tool host's allow-list says, and no config may refer to one
// (a reference would hand mcpgateway's or the tool host's keys to a server).
var ReservedPrefixes = []string{"ZEST_", "LEMONADE_"}

// Reserved says whether name is a variable of Zest's own services.
func Reserved(name string) bool {
	for _, p := range ReservedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// CheckNotReserved refuses value, the ${VAR} reference of field, when VAR is Reserved; any
// other value passes (Check and Variable judge its shape). The error names the field and the
// fix: put the value in another variable of where (the environment that resolves it), such
// as suggest (prefixed MCP_ if it is itself reserved), and refer to that.
func CheckNotReserved(field, value, suggest, where string) error {
	v, err := Variable(value)
	if err != nil || !Reserved(v) {
		return nil
	}
	if Reserved(suggest) {
		suggest = "MCP_" + suggest
	}
	return fmt.Errorf("%s refers to ${%s}, a variable %w; no MCP server gets a ZEST_* or LEMONADE_* variable: put the value in another variable of %s (e.g. %s) and write ${%s}",
		field, v, ErrReserved, where, suggest, suggest)
}

// CheckEnvNotReserved is CheckNotReserved for each entry of an env map (field "env NAME", the
// name suggested), in name order; the tool host resolves these.
func CheckEnvNotReserved(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if err := CheckNotReserved("env "+k, env[k], k, "the tool host's environment"); err != nil {
			return err
		}
	}
	return nil
}

var name = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Variable returns VAR of "${VAR}", or ErrRawValue.
func Variable(value string) (string, error) {
	m := ref.FindStringSubmatch(value)
	if m == nil {
		return "", ErrRawValue
	}
	return m[1], nil
}

// Check validates a map of NAME → "${VAR}" without resolving it; the error names the field.
func Check(field string, env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !name.MatchString(k) {
			return fmt.Errorf("%s name %q %w", field, k, ErrBadName)
		}
		if _, err := Variable(env[k]); err != nil {
			return fmt.Errorf("%s %s %w", field, k, err)
		}
	}
	return nil
}

// Resolve returns NAME=value pairs for env, reading each ${VAR} with lookup, once Check("env",
// env) has passed (callers need not run it first). The error names the missing variable,
// never a value.
func Resolve(env map[string]string, lookup func(string) (string, bool)) ([]string, error) {
	if err := Check("env", env); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v, _ := Variable(env[k])
		val, ok := lookup(v)
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrNotSet, v)
		}
		out = append(out, k+"="+val)
	}
	return out, nil
}
