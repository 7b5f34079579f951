package mcpregistry

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/zestmcp/zest/lib/envref"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

// How each registry type runs (docs/user/installing-servers.md).
const (
	// RegistryNPM packages run as `npx -y <identifier>@<version> <arguments>`.
	RegistryNPM = "npm"
	// RegistryPyPI packages run as `uvx <identifier>==<version> <arguments>`.
	RegistryPyPI = "pypi"
	// RegistryOCI packages are container images: refused (the tool host's sandbox runs processes, not images).
	RegistryOCI = "oci"
)

// The package registries npx and uvx fetch from by default.
const (
	defaultNPM  = "https://registry.npmjs.org"
	defaultPyPI = "https://pypi.org"
)

// placeholder is a {name} of a value, filled from the input's variables.
var placeholder = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// bearer is an Authorization header's value that Zest's bearer_token can carry.
var bearer = regexp.MustCompile(`^Bearer \{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// Plan maps a registry's server to what Zest would save and run: the first npm or PyPI package
// that speaks stdio, else the first streamable-http remote. It returns an error wrapping
// ErrRefused, saying why and what to do, when nothing of the server.json can be installed;
// the plan's config passes serverconfig.Parse.
func Plan(e Entry) (*mcpgatewayv1.RegistryServer, error) {
	s := e.Server
	out := &mcpgatewayv1.RegistryServer{Name: s.Name, Version: s.Version, Title: s.Title, Description: s.Description, WebsiteUrl: s.WebsiteURL}
	if s.Repository != nil {
		out.RepositoryUrl = s.Repository.URL
	}
	if e.Status() == "deleted" {
		return out, refuse("version %s of %s was deleted from the registry: install another version", s.Version, s.Name)
	}
	var why []string
	for _, p := range s.Packages {
		plan, err := packagePlan(p)
		if err == nil {
			out.Plan = plan
			break
		}
		why = append(why, err.Error())
	}
	if out.Plan == nil {
		for _, r := range s.Remotes {
			plan, err := remotePlan(r)
			if err == nil {
				out.Plan = plan
				break
			}
			why = append(why, err.Error())
		}
	}
	if out.Plan == nil {
		if len(why) == 0 {
			why = append(why, "the server.json lists no package and no remote")
		}
		return out, refuse("%s", strings.Join(why, "; "))
	}
	cfg := out.Plan.GetConfig()
	cfg.Name = s.Name
	cfg.Id = serverconfig.DeriveID(&mcpgatewayv1.ServerConfig{Name: path.Base(s.Name)}, nil)
	parsed, err := serverconfig.Parse(cfg, nil)
	if err != nil {
		out.Plan = nil
		return out, refuse("its config does not pass Zest's checks: %v", err)
	}
	out.Plan.Config = parsed
	return out, nil
}

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
}

// packagePlan maps one package; its error says why the package cannot run under Zest.
func packagePlan(p Package) (*mcpgatewayv1.InstallPlan, error) {
	kind := strings.ToLower(p.RegistryType)
	if p.Transport.Type != "" && p.Transport.Type != "stdio" {
		return nil, fmt.Errorf("the %s package %s serves %s itself: Zest runs a package over stdio only (run it yourself and register its URL)", kind, p.Identifier, p.Transport.Type)
	}
	if p.Identifier == "" || strings.HasPrefix(p.Identifier, "-") {
		return nil, fmt.Errorf("a %s package without a usable identifier (%q)", kind, p.Identifier)
	}
	runtime, err := arguments(p.RuntimeArguments, "runtimeArguments")
	if err != nil {
		return nil, err
	}
	pkgArgs, err := arguments(p.PackageArguments, "packageArguments")
	if err != nil {
		return nil, err
	}
	var command, source string
	var args []string
	switch kind {
	case RegistryNPM:
		spec := p.Identifier
		if p.Version != "" {
			spec += "@" + p.Version
		}
		command, source = "npx", "npm "+spec
		if !slices.Contains(runtime, "-y") && !slices.Contains(runtime, "--yes") {
			args = append(args, "-y")
		}
		// A package of another npm registry is fetched from it, not from npm's default.
		if b := strings.TrimSuffix(p.RegistryBaseURL, "/"); b != "" && b != defaultNPM {
			if !strings.HasPrefix(b, "https://") {
				return nil, fmt.Errorf("the npm package %s is on %q: Zest fetches packages over https only", p.Identifier, p.RegistryBaseURL)
			}
			args = append(args, "--registry="+b)
			source += " from " + b
		}
		args = append(append(append(args, runtime...), spec), pkgArgs...)
	case RegistryPyPI:
		if b := strings.TrimSuffix(p.RegistryBaseURL, "/"); b != "" && b != defaultPyPI {
			return nil, fmt.Errorf("the PyPI package %s is on %s, not %s: register it by hand with uvx's --index-url for that index", p.Identifier, p.RegistryBaseURL, defaultPyPI)
		}
		spec := p.Identifier
		if p.Version != "" {
			spec += "==" + p.Version
		}
		command, source = "uvx", "pypi "+spec
		args = append(append(append(args, runtime...), spec), pkgArgs...)
	case RegistryOCI:
		return nil, fmt.Errorf("the OCI image %s needs a container runtime, which Zest's tool host does not run (its sandbox confines processes, not images): run the image yourself and register its URL, or choose a version with an npm or PyPI package", p.Identifier)
	default:
		return nil, fmt.Errorf("a %q package (%s): Zest installs npm and pypi packages", p.RegistryType, p.Identifier)
	}
	env, vars, err := variables(p.EnvironmentVariables)
	if err != nil {
		return nil, err
	}
	return &mcpgatewayv1.InstallPlan{
		Config:      &mcpgatewayv1.ServerConfig{Transport: serverconfig.TransportStdio, Command: command, Args: args, Env: env},
		Source:      source,
		CommandLine: CommandLine(command, args),
		Variables:   vars,
	}, nil
}

// remotePlan maps a remote; its error says why Zest cannot connect to it.
func remotePlan(r Transport) (*mcpgatewayv1.InstallPlan, error) {
	if r.Type != serverconfig.TransportHTTP {
		return nil, fmt.Errorf("the remote %s speaks %s: Zest connects to remote servers over streamable-http only", r.URL, r.Type)
	}
	u, err := fill(r.URL, r.Variables, "the remote's url")
	if err != nil {
		return nil, err
	}
	plan := &mcpgatewayv1.InstallPlan{
		Config: &mcpgatewayv1.ServerConfig{Transport: serverconfig.TransportHTTP, Url: u},
		Source: "remote " + r.Type, Url: u,
	}
	for _, h := range r.Headers {
		m := bearer.FindStringSubmatch(h.Value)
		switch {
		case strings.EqualFold(h.Name, "Authorization") && m != nil:
			name := envName(m[1])
			in := h.Variables[m[1]]
			plan.Config.BearerToken = "${" + name + "}"
			plan.Variables = append(plan.Variables, &mcpgatewayv1.PlanVariable{Name: name, Description: firstOf(in.Description, h.Description),
				Required: true, Secret: true, InConfig: true})
		case h.IsRequired:
			return nil, fmt.Errorf("the remote %s requires the header %s, and a Zest server config sends no header but Authorization: Bearer ${VAR} (bearer_token)", u, h.Name)
		}
	}
	if err := envref.CheckNotReserved("bearer_token", plan.Config.GetBearerToken(), "MCP_BEARER_TOKEN", "mcpgateway's environment"); err != nil {
		return nil, err
	}
	return plan, nil
}

// arguments turns a package's or runtime's arguments into a command line's words: a
// positional's value (or default), a named one's name then its value. Placeholders are filled
// from the argument's variables' values or defaults. A required argument without a value, or
// a secret one (a config's args are not references), refuses the package.
func arguments(in []Argument, field string) ([]string, error) {
	var out []string
	for _, a := range in {
		what := firstOf(a.Name, a.ValueHint, a.Description, "an argument")
		if a.IsSecret {
			return nil, fmt.Errorf("%s: %s is secret, and a Zest server config keeps no secret in args (only env holds ${VAR} references)", field, what)
		}
		v, err := fill(firstOf(a.Value, a.Default), a.Variables, field+" "+what)
		if err != nil {
			return nil, err
		}
		switch a.Type {
		case "named":
			if a.Name == "" {
				return nil, fmt.Errorf("%s: a named argument without a name", field)
			}
			switch {
			case v != "":
				out = append(out, a.Name, v)
			case a.IsRequired:
				out = append(out, a.Name) // a flag
			}
		case "positional", "":
			switch {
			case v != "":
				out = append(out, v)
			case a.IsRequired:
				return nil, fmt.Errorf("%s: %s is required and the server.json gives it no value or default: register the server by hand with its value", field, what)
			}
		default:
			return nil, fmt.Errorf("%s: argument type %q (want positional or named)", field, a.Type)
		}
	}
	return out, nil
}

// fill replaces the {placeholders} of v by their variables' values or defaults; an unknown
// placeholder, or one without either, is an error naming what.
func fill(v string, vars map[string]Input, what string) (string, error) {
	var missing []string
	out := placeholder.ReplaceAllStringFunc(v, func(m string) string {
		name := m[1 : len(m)-1]
		in, ok := vars[name]
		if !ok || in.IsSecret || firstOf(in.Value, in.Default) == "" {
			missing = append(missing, name)
			return m
		}
		return firstOf(in.Value, in.Default)
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%s needs {%s}, which the server.json gives no value or default", what, strings.Join(missing, "}, {"))
	}
	return out, nil
}

// variables maps a package's environment variables: each required one becomes a ${NAME}
// reference in the config (resolved on the tool host, never a value), the others are listed
// and left out (an unset reference would fail the start).
func variables(in []KeyValueInput) (map[string]string, []*mcpgatewayv1.PlanVariable, error) {
	env := map[string]string{}
	var vars []*mcpgatewayv1.PlanVariable
	for _, kv := range in {
		if _, err := envref.Variable("${" + kv.Name + "}"); err != nil {
			return nil, nil, fmt.Errorf("environmentVariables: %q %w", kv.Name, envref.ErrBadName)
		}
		if envref.Reserved(kv.Name) {
			return nil, nil, fmt.Errorf("environmentVariables: %s is a variable %w", kv.Name, envref.ErrReserved)
		}
		v := &mcpgatewayv1.PlanVariable{Name: kv.Name, Description: kv.Description, Required: kv.IsRequired, Secret: kv.IsSecret, InConfig: kv.IsRequired}
		if !kv.IsSecret {
			v.DefaultValue = firstOf(kv.Value, kv.Default)
		}
		if v.InConfig {
			env[kv.Name] = "${" + kv.Name + "}"
		}
		vars = append(vars, v)
	}
	return env, vars, nil
}

var nonEnvRun = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// envName is a variable's name for a placeholder: upper case, other runs as "_".
func envName(s string) string {
	n := strings.ToUpper(nonEnvRun.ReplaceAllString(s, "_"))
	if envref.Reserved(n) {
		n = "MCP_" + n
	}
	return n
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// CommandLine is command and args as one line a shell would read back the same.
func CommandLine(command string, args []string) string {
	words := make([]string, 0, len(args)+1)
	for _, w := range append([]string{command}, args...) {
		words = append(words, shellQuote(w))
	}
	return strings.Join(words, " ")
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`)

func shellQuote(w string) string {
	if shellSafe.MatchString(w) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
