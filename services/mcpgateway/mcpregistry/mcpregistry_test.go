package mcpregistry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/mcpregistry"
	"github.com/zestmcp/zest/services/mcpgateway/mcpregistry/mcpregistrytest"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func client(t *testing.T, url string, opts ...mcpregistry.Option) *mcpregistry.Client {
	t.Helper()
	c, err := mcpregistry.New(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewRefusesABadURL(t *testing.T) {
	for _, u := range []string{"ftp://x", "registry.example", "https://u:p@x", "https://x/?q=1", "https://x/#f"} {
		if _, err := mcpregistry.New(u); err == nil || !strings.Contains(err.Error(), mcpregistry.EnvURL) {
			t.Errorf("New(%q) = %v, want an error naming %s", u, err, mcpregistry.EnvURL)
		}
	}
	c, err := mcpregistry.New("")
	if err != nil || c.URL() != mcpregistry.DefaultURL {
		t.Fatalf("New(\"\") = %v, %v; want the official registry", c, err)
	}
}

func TestSearchPagesThroughTheRegistry(t *testing.T) {
	reg := mcpregistrytest.Start(t)
	c := client(t, reg.URL)
	var names []string
	cursor, pages := "", 0
	for {
		page, err := c.Search(t.Context(), "", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range page.Servers {
			names = append(names, e.Server.Name)
		}
		if cursor = page.Metadata.NextCursor; cursor == "" {
			break
		}
	}
	if len(names) != len(mcpregistrytest.Documents(t)) || pages != 3 {
		t.Fatalf("paged %d times through %q, want every document in 3 pages of 2", pages, names)
	}
	page, err := c.Search(t.Context(), "Server-", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Servers {
		got = append(got, e.Server.Name)
	}
	if strings.Join(got, ",") != "io.github.modelcontextprotocol/server-everything,io.github.modelcontextprotocol/server-memory" {
		t.Fatalf("search server- found %q", got)
	}
	for _, bad := range []int{-1, mcpregistry.MaxLimit + 1} {
		if _, err := c.Search(t.Context(), "", "", bad); !errors.Is(err, mcpregistry.ErrBadRequest) {
			t.Errorf("limit %d: %v, want ErrBadRequest", bad, err)
		}
	}
}

func TestGetByNameAndVersion(t *testing.T) {
	docs := mcpregistrytest.Documents(t)
	older := json.RawMessage(strings.ReplaceAll(string(docs["server-memory"]), "2026.8.31", "2025.1.1"))
	reg := mcpregistrytest.Start(t, older, docs["server-memory"])
	c := client(t, reg.URL)
	for version, want := range map[string]string{"": "2026.8.31", "latest": "2026.8.31", "2025.1.1": "2025.1.1"} {
		e, err := c.Get(t.Context(), "io.github.modelcontextprotocol/server-memory", version)
		if err != nil || e.Server.Version != want || e.Server.Packages[0].Version != want {
			t.Errorf("Get @%q = %+v, %v; want version %s", version, e.Server, err, want)
		}
	}
	if _, err := c.Get(t.Context(), "io.github.modelcontextprotocol/server-memory", "9.9.9"); !errors.Is(err, mcpregistry.ErrNotFound) {
		t.Errorf("an unknown version: %v, want ErrNotFound", err)
	}
	if _, err := c.Get(t.Context(), "", ""); !errors.Is(err, mcpregistry.ErrBadRequest) {
		t.Errorf("no name: %v, want ErrBadRequest", err)
	}
}

func TestAnswersAreBounded(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"servers":[],"metadata":{"nextCursor":"` + strings.Repeat("x", 2048) + `"}}`))
	}))
	t.Cleanup(big.Close)
	if _, err := client(t, big.URL, mcpregistry.WithMaxBody(1024)).Search(t.Context(), "", "", 0); !errors.Is(err, mcpregistry.ErrBadAnswer) || !strings.Contains(err.Error(), "1024") {
		t.Fatalf("an answer over the bound: %v, want ErrBadAnswer naming 1024 bytes", err)
	}
	// The default bound: an answer one byte over MaxBodyBytes.
	over := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte(" "), mcpregistry.MaxBodyBytes+1))
	}))
	t.Cleanup(over.Close)
	if _, err := client(t, over.URL).Search(t.Context(), "", "", 0); !errors.Is(err, mcpregistry.ErrBadAnswer) || !strings.Contains(err.Error(), strconv.Itoa(mcpregistry.MaxBodyBytes)) {
		t.Fatalf("an answer over MaxBodyBytes: %v", err)
	}
	long := strings.Repeat("x", mcpregistry.MaxNameBytes+1)
	if _, err := client(t, over.URL).Get(t.Context(), long, ""); !errors.Is(err, mcpregistry.ErrBadRequest) {
		t.Fatalf("a name over MaxNameBytes: %v, want ErrBadRequest", err)
	}
	if _, err := client(t, over.URL).Search(t.Context(), long, "", 0); !errors.Is(err, mcpregistry.ErrBadRequest) {
		t.Fatalf("a search over MaxNameBytes: %v, want ErrBadRequest", err)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	t.Cleanup(down.Close)
	if _, err := client(t, down.URL).Search(t.Context(), "", "", 0); !errors.Is(err, mcpregistry.ErrUnavailable) || !strings.Contains(err.Error(), "502") {
		t.Fatalf("a 502: %v, want ErrUnavailable naming it", err)
	}
	// A registry that never answers is given up after the client's timeout.
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); slow.Close() })
	start := time.Now()
	if _, err := client(t, slow.URL, mcpregistry.WithHTTPClient(&http.Client{Timeout: 100 * time.Millisecond})).Search(t.Context(), "", "", 0); !errors.Is(err, mcpregistry.ErrUnavailable) {
		t.Fatalf("a registry that hangs: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %v", d)
	}
}

func TestPlan(t *testing.T) {
	docs := mcpregistrytest.Documents(t)
	for _, tc := range []struct {
		doc     string
		want    *mcpgatewayv1.ServerConfig
		line    string
		vars    []string // name:required:secret:in_config
		refused string
	}{
		{doc: "server-everything", line: "npx -y @modelcontextprotocol/server-everything@2026.8.31",
			want: &mcpgatewayv1.ServerConfig{Id: "server-everything", Name: "io.github.modelcontextprotocol/server-everything", Transport: "stdio", Command: "npx",
				Args: []string{"-y", "@modelcontextprotocol/server-everything@2026.8.31"}}},
		{doc: "server-memory", line: "npx -y @modelcontextprotocol/server-memory@2026.8.31", vars: []string{"MEMORY_FILE_PATH:false:false:false"},
			want: &mcpgatewayv1.ServerConfig{Id: "server-memory", Name: "io.github.modelcontextprotocol/server-memory", Transport: "stdio", Command: "npx",
				Args: []string{"-y", "@modelcontextprotocol/server-memory@2026.8.31"}}},
		{doc: "mcp-server-fetch", line: "uvx mcp-server-fetch==2025.4.7",
			want: &mcpgatewayv1.ServerConfig{Id: "fetch", Name: "io.github.modelcontextprotocol/fetch", Transport: "stdio", Command: "uvx", Args: []string{"mcp-server-fetch==2025.4.7"}}},
		{doc: "brave-search", line: "npx -y @brave/brave-search-mcp-server@2.0.58 --transport stdio",
			vars: []string{"BRAVE_API_KEY:true:true:true", "BRAVE_MCP_LOG_LEVEL:false:false:false"},
			want: &mcpgatewayv1.ServerConfig{Id: "brave-search-mcp-server", Name: "io.github.brave/brave-search-mcp-server", Transport: "stdio", Command: "npx",
				Args: []string{"-y", "@brave/brave-search-mcp-server@2.0.58", "--transport", "stdio"}, Env: map[string]string{"BRAVE_API_KEY": "${BRAVE_API_KEY}"}}},
		{doc: "github", vars: []string{"GITHUB_PAT:true:true:true"},
			want: &mcpgatewayv1.ServerConfig{Id: "github-mcp-server", Name: "io.github.github/github-mcp-server", Transport: "streamable-http",
				Url: "https://api.githubcopilot.com/mcp/", BearerToken: "${GITHUB_PAT}"}},
		{doc: "sse-only", refused: "streamable-http only"},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			var s mcpregistry.ServerJSON
			if err := json.Unmarshal(docs[tc.doc], &s); err != nil {
				t.Fatal(err)
			}
			rs, err := mcpregistry.Plan(mcpregistry.Entry{Server: s})
			if tc.refused != "" {
				if !errors.Is(err, mcpregistry.ErrRefused) || !strings.Contains(err.Error(), tc.refused) || rs.GetPlan() != nil {
					t.Fatalf("Plan = %v, %v; want refused with %q", rs.GetPlan(), err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, err := serverconfig.Parse(tc.want, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := rs.GetPlan().GetConfig(); !proto.Equal(got, want) {
				t.Errorf("config\n got %v\nwant %v", got, want)
			}
			if rs.GetPlan().GetCommandLine() != tc.line {
				t.Errorf("command line %q, want %q", rs.GetPlan().GetCommandLine(), tc.line)
			}
			var vars []string
			for _, v := range rs.GetPlan().GetVariables() {
				vars = append(vars, strings.Join([]string{v.GetName(), fmtBool(v.GetRequired()), fmtBool(v.GetSecret()), fmtBool(v.GetInConfig())}, ":"))
			}
			if strings.Join(vars, " ") != strings.Join(tc.vars, " ") {
				t.Errorf("variables %q, want %q", vars, tc.vars)
			}
		})
	}
}

func fmtBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestPlanRefusals(t *testing.T) {
	pkg := func(p mcpregistry.Package) mcpregistry.Entry {
		if p.Transport.Type == "" {
			p.Transport.Type = "stdio"
		}
		return mcpregistry.Entry{Server: mcpregistry.ServerJSON{Name: "io.example/x", Version: "1", Packages: []mcpregistry.Package{p}}}
	}
	for name, tc := range map[string]struct {
		e    mcpregistry.Entry
		want string
	}{
		"oci only":                            {pkg(mcpregistry.Package{RegistryType: "oci", Identifier: "ghcr.io/x/y:1"}), "container runtime"},
		"nuget":                               {pkg(mcpregistry.Package{RegistryType: "nuget", Identifier: "X"}), "npm and pypi"},
		"a package on http":                   {pkg(mcpregistry.Package{RegistryType: "npm", Identifier: "x", Transport: mcpregistry.Transport{Type: "streamable-http", URL: "http://localhost:3000/mcp"}}), "over stdio only"},
		"a required argument without a value": {pkg(mcpregistry.Package{RegistryType: "npm", Identifier: "x", PackageArguments: []mcpregistry.Argument{{Type: "positional", ValueHint: "target_dir", Input: mcpregistry.Input{IsRequired: true}}}}), "target_dir is required"},
		"a secret argument":                   {pkg(mcpregistry.Package{RegistryType: "npm", Identifier: "x", PackageArguments: []mcpregistry.Argument{{Type: "named", Name: "--token", Input: mcpregistry.Input{IsSecret: true}}}}), "--token is secret"},
		"an unfilled placeholder":             {pkg(mcpregistry.Package{RegistryType: "npm", Identifier: "x", PackageArguments: []mcpregistry.Argument{{Type: "named", Name: "--dir", Input: mcpregistry.Input{Value: "{path}"}}}}), "needs {path}"},
		"a reserved variable":                 {pkg(mcpregistry.Package{RegistryType: "npm", Identifier: "x", EnvironmentVariables: []mcpregistry.KeyValueInput{{Name: "ZEST_ADMIN_KEY"}}}), "reserved"},
		"a bad variable name":                 {pkg(mcpregistry.Package{RegistryType: "npm", Identifier: "x", EnvironmentVariables: []mcpregistry.KeyValueInput{{Name: "A-B"}}}), "not a valid"},
		"a required custom header": {mcpregistry.Entry{Server: mcpregistry.ServerJSON{Name: "io.example/x", Remotes: []mcpregistry.Transport{{Type: "streamable-http", URL: "https://x.example/mcp",
			Headers: []mcpregistry.KeyValueInput{{Name: "X-API-Key", Input: mcpregistry.Input{IsRequired: true, IsSecret: true}}}}}}}, "X-API-Key"},
		"a plain-http remote": {mcpregistry.Entry{Server: mcpregistry.ServerJSON{Name: "io.example/x", Remotes: []mcpregistry.Transport{{Type: "streamable-http", URL: "http://x.example/mcp"}}}}, "does not pass Zest's checks"},
		"nothing":             {mcpregistry.Entry{Server: mcpregistry.ServerJSON{Name: "io.example/x"}}, "no package and no remote"},
		"another PyPI index":  {pkg(mcpregistry.Package{RegistryType: "pypi", Identifier: "x", RegistryBaseURL: "https://pypi.example.com/simple"}), "--index-url"},
		"npm over http":       {pkg(mcpregistry.Package{RegistryType: "npm", Identifier: "x", RegistryBaseURL: "http://npm.example.com"}), "https only"},
	} {
		t.Run(name, func(t *testing.T) {
			rs, err := mcpregistry.Plan(tc.e)
			if !errors.Is(err, mcpregistry.ErrRefused) || !strings.Contains(err.Error(), tc.want) || rs.GetPlan() != nil {
				t.Fatalf("Plan = %v, %v; want refused with %q", rs.GetPlan(), err, tc.want)
			}
		})
	}
	// An argument's placeholder is filled from its variable's default; a flag without a value
	// is given alone when required, left out when not.
	rs, err := mcpregistry.Plan(pkg(mcpregistry.Package{RegistryType: "npm", Identifier: "x", Version: "1.0.0", PackageArguments: []mcpregistry.Argument{
		{Type: "named", Name: "--dir", Input: mcpregistry.Input{Value: "/data/{sub}"}, Variables: map[string]mcpregistry.Input{"sub": {Default: "a b"}}},
		{Type: "named", Name: "--stdio", Input: mcpregistry.Input{IsRequired: true}},
		{Type: "named", Name: "--verbose"},
	}}))
	if err != nil || rs.GetPlan().GetCommandLine() != "npx -y x@1.0.0 --dir '/data/a b' --stdio" {
		t.Fatalf("Plan = %q, %v", rs.GetPlan().GetCommandLine(), err)
	}
	// A package of another npm registry is fetched from it.
	rs, err = mcpregistry.Plan(pkg(mcpregistry.Package{RegistryType: "npm", Identifier: "@corp/x", Version: "2.0.0", RegistryBaseURL: "https://npm.corp.example/"}))
	if err != nil || rs.GetPlan().GetCommandLine() != "npx -y --registry=https://npm.corp.example @corp/x@2.0.0" {
		t.Fatalf("Plan = %q, %v", rs.GetPlan().GetCommandLine(), err)
	}
}

func TestServiceMapsErrors(t *testing.T) {
	reg := mcpregistrytest.Start(t)
	svc := mcpregistry.NewService(client(t, reg.URL), nil)
	r, err := svc.PlanInstall(t.Context(), &mcpgatewayv1.PlanInstallRequest{Name: "io.github.modelcontextprotocol/server-everything"})
	if err != nil || r.GetServer().GetPlan().GetConfig().GetCommand() != "npx" {
		t.Fatalf("PlanInstall = %v, %v", r, err)
	}
	page, err := svc.SearchRegistry(t.Context(), &mcpgatewayv1.SearchRegistryRequest{Search: "sse"})
	if err != nil || len(page.GetServers()) != 1 || !strings.Contains(page.GetServers()[0].GetRefused(), "streamable-http only") || page.GetRegistryUrl() != reg.URL {
		t.Fatalf("SearchRegistry(sse) = %v, %v; want the refused server with its reason", page, err)
	}
	for _, tc := range []struct {
		req  *mcpgatewayv1.PlanInstallRequest
		code codes.Code
	}{
		{&mcpgatewayv1.PlanInstallRequest{}, codes.InvalidArgument},
		{&mcpgatewayv1.PlanInstallRequest{Name: "io.example/none"}, codes.NotFound},
	} {
		if _, err := svc.PlanInstall(t.Context(), tc.req); status.Code(err) != tc.code {
			t.Errorf("PlanInstall(%v) = %v, want %v", tc.req, err, tc.code)
		}
	}
	down := mcpregistry.NewService(client(t, "http://127.0.0.1:1"), nil)
	if _, err := down.SearchRegistry(t.Context(), &mcpgatewayv1.SearchRegistryRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("a registry down: %v, want Unavailable", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := svc.SearchRegistry(ctx, &mcpgatewayv1.SearchRegistryRequest{}); status.Code(err) != codes.Canceled {
		t.Errorf("a canceled search: %v, want Canceled", err)
	}
}
