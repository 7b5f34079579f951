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
)

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
