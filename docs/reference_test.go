package docs

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/zestmcp/zest/gateway/edge"
	"github.com/zestmcp/zest/lib/envflag"
	"github.com/zestmcp/zest/lib/metrics"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/inference/node"
	"github.com/zestmcp/zest/services/mcpgateway/server"
	"github.com/zestmcp/zest/services/toolhost/host"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// root is the repository, seen from this package.
const root = ".."

// The documents whose tables these tests hold to the code, and the heading each table
// follows.
const (
	configDoc     = "operator/configuration.md"
	configHeading = "## Every variable"
	metricsDoc    = "operator/metrics.md"
	metricsHead   = "## Every metric"
	adminDoc      = "operator/admin-api.md"
	adminHeading  = "## Routes"
	layoutDoc     = "dev/layout.md"
)

// services are the four binaries, by the name docs use for them, with their settings.
func services() map[string]interface{ RegisterFlags(*flag.FlagSet) } {
	e, n, s, h := edge.DefaultConfig(), node.DefaultConfig(), server.DefaultConfig(), host.DefaultConfig()
	return map[string]interface{ RegisterFlags(*flag.FlagSet) }{"gateway": &e, "inference": &n, "mcpgateway": &s, "toolhost": &h}
}

// setting is one variable as the code reads it.
type setting struct {
	// defaults are the flag's default per service that registers it (none for a variable
	// read from the environment alone).
	defaults map[string]flag.Value
	defText  map[string]string
	// homes are the folders whose code names the variable (gateway, services/x, lib/x, cli).
	homes map[string]bool
}

// settingPattern is a variable of Zest's or Lemonade's.
var settingPattern = regexp.MustCompile(`\b(?:ZEST|LEMONADE)_[A-Z0-9_]*[A-Z0-9]\b`)

// notSettings are the names the services' code holds that are not settings an operator gives,
// each with the reason.
var notSettings = map[string]string{
	"ZEST_TOOLHOST_DROPPED_KEYS": "set by the tool host for the copy of itself it executes without Lemonade's keys (services/toolhost/host/secrets.go)",
	"LEMONADE_BASE_URL":          "lemond's variable, in the load command /internal/config shows for Lemonade's CLI (gateway/edge/lemond.go); Zest never reads it",
	"ZEST_HEALTHCHECK":           "named in a comment of lib/service/modes.go to say that no such variable exists: -healthcheck is command-line only",
}

// codeSettings collects every setting the product's code reads: each service's flags (with
// their defaults, as envflag names them) and every ZEST_*/LEMONADE_* name in a string
// literal of the services', lib's and zestctl's code (the variables read from the
// environment alone: keys, etcd's TLS, Lemonade's). Tests, test helpers and fixtures are not
// the product.
func codeSettings(t *testing.T) map[string]*setting {
	t.Helper()
	out := map[string]*setting{}
	get := func(name string) *setting {
		if out[name] == nil {
			out[name] = &setting{defaults: map[string]flag.Value{}, defText: map[string]string{}, homes: map[string]bool{}}
		}
		return out[name]
	}
	for svc, cfg := range services() {
		fs := flag.NewFlagSet(svc, flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			s := get(envflag.EnvName(f.Name))
			s.defaults[svc] = f.Value
			s.defText[svc] = f.DefValue
		})
	}
	consts := map[string]string{} // "keyauth.EnvAPIKey" → "LEMONADE_API_KEY"
	for _, dir := range []string{"gateway", "services", "lib"} {
		walkGo(t, filepath.Join(root, dir), func(path string, f *ast.File) {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					for i, id := range n.Names {
						if i < len(n.Values) {
							if v, ok := stringLit(n.Values[i]); ok {
								consts[f.Name.Name+"."+id.Name] = v
							}
						}
					}
				case *ast.BasicLit:
					v, _ := stringLit(n)
					for _, name := range settingPattern.FindAllString(v, -1) {
						if _, skip := notSettings[name]; !skip {
							get(name).homes[home(path)] = true
						}
					}
				}
				return true
			})
		})
	}
	// zestctl's messages name the services' variables; what it reads is what it passes to
	// its getenv (or envOr): a literal, or a constant of lib (keyauth.EnvAPIKey).
	walkGo(t, filepath.Join(root, "cli"), func(path string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !readsEnv(call.Fun) {
				return true
			}
			for _, a := range call.Args {
				v, ok := stringLit(a)
				if sel, isSel := a.(*ast.SelectorExpr); isSel {
					if x, isIdent := sel.X.(*ast.Ident); isIdent {
						v, ok = consts[x.Name+"."+sel.Sel.Name]
					}
				}
				if ok && settingPattern.FindString(v) == v {
					get(v).homes["zestctl"] = true
				}
			}
			return true
		})
	})
	return out
}

// stringLit is the value of a string literal expression.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}

// readsEnv reports whether a call's function reads the environment: os.Getenv,
// os.LookupEnv, or zestctl's getenv and envOr.
func readsEnv(fun ast.Expr) bool {
	name := ""
	switch f := fun.(type) {
	case *ast.Ident:
		name = f.Name
	case *ast.SelectorExpr:
		name = f.Sel.Name
	}
	return slices.Contains([]string{"getenv", "envOr", "Getenv", "LookupEnv"}, name)
}

// home names the folder a file belongs to for the "used by" column: gateway, inference,
// mcpgateway, toolhost, zestctl, or lib/<package>.
func home(path string) string {
	rel, _ := filepath.Rel(root, path)
	parts := strings.Split(filepath.ToSlash(rel), "/")
	switch {
	case parts[0] == "services":
		return parts[1]
	case parts[0] == "cli":
		return "zestctl"
	case parts[0] == "lib":
		return "lib/" + parts[1]
	}
	return parts[0]
}

// walkGo parses every product Go file under dir: not tests, test helpers (lib/*test,
// lib/testenv, lib/waitfor), fixtures
// (internal/), generated code's testdata or node_modules.
func walkGo(t *testing.T, dir string, fn func(path string, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case name == "testdata" || name == "node_modules" || name == "internal",
				filepath.Base(filepath.Dir(path)) == "lib" &&
					(strings.HasSuffix(name, "test") || name == "testenv" || name == "waitfor"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		fn(path, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// table returns the rows of the first Markdown table after heading in doc (under the docs
// folder), header row first, each cell trimmed; an escaped pipe (\|) stays in its cell.
func table(t *testing.T, doc, heading string) [][]string {
	t.Helper()
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := slices.Index(lines, heading)
	if start < 0 {
		t.Fatalf("%s has no line %q: the reference table follows that heading", doc, heading)
	}
	var rows [][]string
	for _, l := range lines[start+1:] {
		if !strings.HasPrefix(l, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		l = strings.ReplaceAll(strings.Trim(l, "|"), `\|`, "\x00")
		var cells []string
		for _, c := range strings.Split(l, "|") {
			cells = append(cells, strings.TrimSpace(strings.ReplaceAll(c, "\x00", "|")))
		}
		if strings.Trim(strings.Join(cells, ""), "-: ") == "" {
			continue // the separator row
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		t.Fatalf("%s: no table after %q", doc, heading)
	}
	return rows
}

// column is the index of the column named name in a table's header row.
func column(t *testing.T, doc string, header []string, name string) int {
	t.Helper()
	i := slices.Index(header, name)
	if i < 0 {
		t.Fatalf("%s: the table has no column %q (columns %q)", doc, name, header)
	}
	return i
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// spans are the code spans of a cell, in order.
func spans(cell string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// proseDefaults are the defaults a table says in words because the code computes them where
// it runs; each says how to compute the value the flag must have.
var proseDefaults = map[string]func() string{
	"the machine's host name": func() string { h, _ := os.Hostname(); return h },
}

// TestConfigurationTable holds docs/operator/configuration.md's table to the code: one row per
// variable; every variable the services and zestctl read has its row and every row's variable
// is read; a flag's default is the first thing its default cell says (a duration by value);
// "used by" names exactly the services that register the flag (zestctl besides, when zestctl
// reads it), or for a variable read from the environment alone, the service whose code reads
// it.
func TestConfigurationTable(t *testing.T) {
	code := codeSettings(t)
	rows := table(t, configDoc, configHeading)
	nameCol, defCol, usedCol := column(t, configDoc, rows[0], "variable"), column(t, configDoc, rows[0], "default"), column(t, configDoc, rows[0], "used by")
	documented := map[string]bool{}
	for _, r := range rows[1:] {
		names := spans(r[nameCol])
		if len(names) != 1 || !settingPattern.MatchString(names[0]) || settingPattern.FindString(names[0]) != names[0] {
			t.Errorf("%s: row %q: the variable cell must hold one variable in backticks", configDoc, r[nameCol])
			continue
		}
		name := names[0]
		if documented[name] {
			t.Errorf("%s: %s has two rows", configDoc, name)
		}
		documented[name] = true
		s := code[name]
		if s == nil {
			t.Errorf("%s lists %s, which no service or zestctl reads any more: remove its row", configDoc, name)
			continue
		}
		checkUsedBy(t, name, s, r[usedCol])
		for svc, v := range s.defaults {
			if err := checkDefault(v, s.defText[svc], r[defCol]); err != nil {
				t.Errorf("%s: %s's default in %s: %v", configDoc, name, svc, err)
			}
		}
	}
	for name := range code {
		if !documented[name] {
			t.Errorf("%s is read by %s but %s has no row for it: add one (variable, default, used by, meaning)", name, usedBy(code[name]), configDoc)
		}
	}
}

// usedBy lists where a setting is read, for messages.
func usedBy(s *setting) string {
	var where []string
	for svc := range s.defaults {
		where = append(where, svc)
	}
	for h := range s.homes {
		where = append(where, h)
	}
	slices.Sort(where)
	return strings.Join(slices.Compact(where), ", ")
}

var fourServices = []string{"gateway", "inference", "mcpgateway", "toolhost"}

func checkUsedBy(t *testing.T, name string, s *setting, cell string) {
	t.Helper()
	listed := map[string]bool{}
	for _, w := range strings.Split(cell, ",") {
		w = strings.TrimSpace(w)
		if w == "all" {
			for _, svc := range fourServices {
				listed[svc] = true
			}
			continue
		}
		if !slices.Contains(fourServices, w) && w != "zestctl" {
			t.Errorf("%s: %s: used by %q: name gateway, inference, mcpgateway, toolhost, zestctl or all", configDoc, name, w)
		}
		listed[w] = true
	}
	if len(s.defaults) > 0 { // a flag: exactly the services that register it
		for _, svc := range fourServices {
			if _, registers := s.defaults[svc]; registers != listed[svc] {
				t.Errorf("%s: %s: used by says %q, but the services that register it are %v", configDoc, name, cell, sortedKeys(s.defaults))
				break
			}
		}
	} else { // the environment alone: every service whose own code reads it
		for h := range s.homes {
			if slices.Contains(fourServices, h) && !listed[h] {
				t.Errorf("%s: %s: used by %q leaves out %s, whose code reads it", configDoc, name, cell, h)
			}
		}
		if len(listed) == 0 {
			t.Errorf("%s: %s: used by is empty", configDoc, name)
		}
	}
	if s.homes["zestctl"] != listed["zestctl"] {
		t.Errorf("%s: %s: used by %q; zestctl reads it: %v", configDoc, name, cell, s.homes["zestctl"])
	}
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := mapKeys(m)
	slices.Sort(out)
	return out
}

// checkDefault compares a flag's default with a table's default cell: "–" for an empty one,
// else the cell's first code span (durations compared as durations: `24h` is 24h0m0s), or a
// phrase of proseDefaults.
func checkDefault(v flag.Value, def, cell string) error {
	for phrase, value := range proseDefaults {
		if strings.HasPrefix(cell, phrase) {
			if def != value() {
				return fmt.Errorf("the table says %q, the flag's default is %q", phrase, def)
			}
			return nil
		}
	}
	if def == "" {
		if !strings.HasPrefix(cell, "–") {
			return fmt.Errorf("the flag has no default: the cell must start with –, not %q", cell)
		}
		return nil
	}
	s := spans(cell)
	if len(s) == 0 || !strings.HasPrefix(cell, "`") {
		return fmt.Errorf("the cell %q must start with the default in backticks, %q", cell, def)
	}
	if g, ok := v.(flag.Getter); ok {
		if want, ok := g.Get().(time.Duration); ok {
			got, err := time.ParseDuration(s[0])
			if err != nil || got != want {
				return fmt.Errorf("the table says %s, the flag's default is %v", s[0], want)
			}
			return nil
		}
	}
	if s[0] != def {
		return fmt.Errorf("the table says %s, the flag's default is %s", s[0], def)
	}
	return nil
}

// metricName is a metric in a table: a name, or a family as name_* (go_*, process_*).
var metricName = regexp.MustCompile(`^[a-z_:][a-z0-9_:]*\*?$`)

// registeredMetrics are the metrics every service registers, by name, with their labels
// (importing the four services registers them all in lib/metrics' registry).
func registeredMetrics() map[string][]string {
	descs := make(chan *prometheus.Desc)
	go func() { metrics.Registry.Describe(descs); close(descs) }()
	nameRE := regexp.MustCompile(`fqName: "([^"]+)"`)
	labelsRE := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	for d := range descs {
		s := d.String()
		name := nameRE.FindStringSubmatch(s)
		if name == nil {
			continue
		}
		var labels []string
		if l := labelsRE.FindStringSubmatch(s); len(l) > 1 && l[1] != "" {
			labels = strings.Split(l[1], ",")
		}
		out[name[1]] = labels
	}
	return out
}

// TestMetricsTable holds docs/operator/metrics.md's table to the metrics the services
// register: every metric has a row (go_* and process_* as families), every metric a row names
// is registered, and every label of a metric is named in its row's labels cell.
func TestMetricsTable(t *testing.T) {
	reg := registeredMetrics()
	if len(reg) < 20 {
		t.Fatalf("only %d metrics registered: %v", len(reg), mapKeys(reg))
	}
	rows := table(t, metricsDoc, metricsHead)
	nameCol, labelsCol := column(t, metricsDoc, rows[0], "metric"), column(t, metricsDoc, rows[0], "labels")
	covered := map[string]bool{}
	for _, r := range rows[1:] {
		names := spans(r[nameCol])
		if len(names) == 0 {
			t.Errorf("%s: row %q names no metric in backticks", metricsDoc, r[nameCol])
		}
		labels := spans(r[labelsCol])
		for _, n := range names {
			if !metricName.MatchString(n) {
				t.Errorf("%s: %q is not a metric name", metricsDoc, n)
				continue
			}
			if prefix, family := strings.CutSuffix(n, "*"); family {
				found := false
				for m := range reg {
					if strings.HasPrefix(m, prefix) {
						covered[m], found = true, true
					}
				}
				if !found {
					t.Errorf("%s lists %s, but no registered metric starts with %s", metricsDoc, n, prefix)
				}
				continue
			}
			want, ok := reg[n]
			if !ok {
				t.Errorf("%s lists %s, which no service registers: remove its row", metricsDoc, n)
				continue
			}
			covered[n] = true
			for _, l := range want {
				if !slices.Contains(labels, l) {
					t.Errorf("%s: %s has the label %s, which its row's labels cell %q does not name", metricsDoc, n, l, r[labelsCol])
				}
			}
		}
	}
	for m := range reg {
		if !covered[m] {
			t.Errorf("%s is registered but %s has no row for it: add one (metric, type, labels, service, meaning)", m, metricsDoc)
		}
	}
}

// edgeAdminRoutes are the admin routes the edge serves with a handler of its own rather than
// through grpc-gateway, each with the AdminService RPC behind it and the edge's file.
var edgeAdminRoutes = map[string]struct{ rpc, file string }{
	"GET /internal/mcp/audit/export":   {"ExportAudit", "gateway/edge/edge.go"},
	"GET /internal/mcp/oauth/callback": {"FinishSignIn", "lib/clientmetadata/clientmetadata.go"},
}

// pathParam is a path template's variable: {id}, or a field path such as {server.id}, which
// the table writes as its last part.
var pathParam = regexp.MustCompile(`\{(?:[a-z_]+\.)*([a-z_]+)\}`)

// TestAdminRoutesTable holds docs/operator/admin-api.md's routes to admin.proto's and
// registry.proto's HTTP annotations: every binding of every AdminService and RegistryService
// method has a row ("METHOD /path" in the
// first cell), and every row is a binding, or a route the edge serves itself
// (edgeAdminRoutes) that its code registers.
func TestAdminRoutesTable(t *testing.T) {
	annotated := map[string]string{} // "GET /internal/mcp/servers" → ListServers
	svc := mcpgatewayv1.File_zest_mcpgateway_v1_admin_proto.Services().ByName("AdminService")
	if svc == nil {
		t.Fatal("admin.proto has no AdminService")
	}
	methods := svc.Methods()
	// RegistryService (registry.proto) serves its routes under /internal/mcp too, behind the same key.
	registrySvc := mcpgatewayv1.File_zest_mcpgateway_v1_registry_proto.Services().ByName("RegistryService")
	if registrySvc == nil {
		t.Fatal("registry.proto has no RegistryService")
	}
	// UpstreamOAuthService (oauth.proto) too: sign-in to the upstream servers.
	oauthSvc := mcpgatewayv1.File_zest_mcpgateway_v1_oauth_proto.Services().ByName("UpstreamOAuthService")
	if oauthSvc == nil {
		t.Fatal("oauth.proto has no UpstreamOAuthService")
	}
	for _, ms := range []protoreflect.MethodDescriptors{methods, registrySvc.Methods(), oauthSvc.Methods()} {
		for i := range ms.Len() {
			m := ms.Get(i)
			rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
			if rule == nil {
				continue
			}
			for _, b := range append([]*annotations.HttpRule{rule}, rule.GetAdditionalBindings()...) {
				verb, path := binding(b)
				annotated[verb+" "+pathParam.ReplaceAllString(path, "{$1}")] = string(m.Name())
			}
		}
	}
	if len(annotated) < 15 {
		t.Fatalf("only %d annotated routes: %v", len(annotated), annotated)
	}
	rows := table(t, adminDoc, adminHeading)
	routeCol := column(t, adminDoc, rows[0], "route")
	documented := map[string]bool{}
	for _, r := range rows[1:] {
		s := spans(r[routeCol])
		if len(s) != 1 {
			t.Errorf("%s: row %q: the route cell must hold one `METHOD /path`", adminDoc, r[routeCol])
			continue
		}
		route := s[0]
		documented[route] = true
		if _, ok := annotated[route]; ok {
			continue
		}
		e, ok := edgeAdminRoutes[route]
		if !ok {
			t.Errorf("%s lists %s, which is neither an AdminService HTTP binding (admin.proto) nor a route the edge serves itself: remove its row, or add it", adminDoc, route)
			continue
		}
		if methods.ByName(protoreflect.Name(e.rpc)) == nil && oauthSvc.Methods().ByName(protoreflect.Name(e.rpc)) == nil {
			t.Errorf("%s is served from %s, which neither AdminService (admin.proto) nor UpstreamOAuthService (oauth.proto) has any more", route, e.rpc)
		}
		src, err := os.ReadFile(filepath.Join(root, e.file))
		if _, path, _ := strings.Cut(route, " "); err != nil || !strings.Contains(string(src), strconv.Quote(path)) {
			t.Errorf("%s is not registered in %s (%v)", route, e.file, err)
		}
	}
	for route, rpc := range annotated {
		if !documented[route] {
			t.Errorf("AdminService.%s is served at %s (admin.proto), but %s has no row for it", rpc, route, adminDoc)
		}
	}
	for route := range edgeAdminRoutes {
		if !documented[route] {
			t.Errorf("the edge serves %s, but %s has no row for it", route, adminDoc)
		}
	}
}

// binding is an HTTP rule's method and path.
func binding(b *annotations.HttpRule) (string, string) {
	switch p := b.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		return "GET", p.Get
	case *annotations.HttpRule_Post:
		return "POST", p.Post
	case *annotations.HttpRule_Put:
		return "PUT", p.Put
	case *annotations.HttpRule_Patch:
		return "PATCH", p.Patch
	case *annotations.HttpRule_Delete:
		return "DELETE", p.Delete
	case *annotations.HttpRule_Custom:
		return p.Custom.GetKind(), p.Custom.GetPath()
	}
	return "", ""
}

// TestLayoutMapsEveryPackage holds docs/dev/layout.md to the repository: every folder that
// holds Go code is a row of one of its tables (a table whose first column is "package"), and
// every row names such a folder.
func TestLayoutMapsEveryPackage(t *testing.T) {
	have := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			have[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(layoutDoc)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	inTable := false
	for _, l := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(l, "|") {
			inTable = false
			continue
		}
		first := strings.TrimSpace(strings.Split(strings.Trim(l, "|"), "|")[0])
		switch {
		case first == "package":
			inTable = true
		case !inTable || strings.Trim(first, "-: ") == "":
		default:
			s := spans(first)
			if len(s) != 1 {
				t.Errorf("%s: row %q: the package cell must hold one folder in backticks", layoutDoc, first)
				continue
			}
			p := strings.TrimSuffix(s[0], "/")
			if listed[p] {
				t.Errorf("%s lists %s twice", layoutDoc, p)
			}
			listed[p] = true
			if !have[p] {
				t.Errorf("%s lists %s, which holds no Go code: remove its row, or fix its path", layoutDoc, p)
			}
		}
	}
	for p := range have {
		if !listed[p] {
			t.Errorf("%s holds Go code but %s has no row for it: add one (package, what it does)", p, layoutDoc)
		}
	}
}

// The Markdown files of the documentation, from the repository's root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	// slugDrop is what GitHub leaves out of a heading's anchor.
	slugDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchors are the anchors GitHub gives the headings of a Markdown text.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		m := heading.FindStringSubmatch(l)
		if inFence || m == nil {
			continue
		}
		slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestDocLinksResolve checks every relative link of the README, CONTRIBUTING.md and docs/:
// the file exists, and an anchor into a Markdown file names one of its headings.
func TestDocLinksResolve(t *testing.T) {
	for _, f := range markdownFiles(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
			}
			text, err := os.ReadFile(path)
			if err != nil {
				if st, serr := os.Stat(path); serr == nil && st.IsDir() {
					continue
				}
				t.Errorf("%s links to %s, which does not exist", f, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(string(text))[anchor] {
				t.Errorf("%s links to %s: %s has no heading with the anchor #%s", f, target, path, anchor)
			}
		}
	}
}

// docPath is a path to a document of this repository as code and configuration name it.
var docPath = regexp.MustCompile(`\bdocs/[A-Za-z0-9_./-]+\.md\b`)

// foreignDocs are paths of other projects' docs that the code names, with whose they are.
var foreignDocs = map[string]string{
	"docs/api/lemonade.md": "lemonade-sdk's",
	"docs/api/mcp.md":      "lemonade-sdk's",
	"docs/api/openai.md":   "lemonade-sdk's",
}

// TestDocPathsExist checks that every docs/….md the repository's files name (code comments,
// error messages, tests, configuration, docs) exists, so that a moved document leaves no
// stale reference behind.
func TestDocPathsExist(t *testing.T) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "out" || n == "data" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".proto", ".md", ".yaml", ".yml", ".json", ".sh", ".js", ".mjs", ".html", ".css":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, p := range slices.Compact(docPath.FindAllString(string(raw), -1)) {
			if _, foreign := foreignDocs[p]; foreign {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fuzzTarget is a fuzz test's name at the start of its line.
var fuzzTarget = regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]*)\(`)

// TestFuzzTable holds docs/dev/testing.md's table of fuzz targets to the code: every fuzz
// target of every package has a row naming it and its package, and every row's target exists.
func TestFuzzTable(t *testing.T) {
	have := map[string]bool{} // "FuzzChatName services/mcpgateway/catalog"
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range fuzzTarget.FindAllStringSubmatch(string(raw), -1) {
			have[m[1]+" "+filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(have) < 20 {
		t.Fatalf("found %d fuzz targets", len(have))
	}
	const doc = "dev/testing.md"
	rows := table(t, doc, "## Fuzzing")
	nameCol, pkgCol := column(t, doc, rows[0], "fuzz target"), column(t, doc, rows[0], "package")
	listed := map[string]bool{}
	for _, r := range rows[1:] {
		pkgs := spans(r[pkgCol])
		if len(pkgs) != 1 {
			t.Errorf("%s: row %q: the package cell must hold one folder in backticks", doc, r[nameCol])
			continue
		}
		for _, name := range spans(r[nameCol]) {
			target := name + " " + pkgs[0]
			listed[target] = true
			if !have[target] {
				t.Errorf("%s lists %s in %s, which has no such fuzz target", doc, name, pkgs[0])
			}
		}
	}
	for target := range have {
		if !listed[target] {
			name, pkg, _ := strings.Cut(target, " ")
			t.Errorf("%s (%s) has no row in %s's fuzz table: add one (target, package, what it checks)", name, pkg, doc)
		}
	}
}
