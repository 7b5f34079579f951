// Command conformanceclient makes Zest the client of the official conformance suite's auth/*
// client scenarios (@modelcontextprotocol/conformance 0.1.16): the suite starts a scenario's
// MCP server and authorization server and runs `conformanceclient <server URL>`, and this
// program does what an operator does with Zest: it registers the URL as a streamable-http
// server with the oauth block the scenario calls for, signs Zest in — by authorization code
// the way a person does from the console (POST /internal/mcp/servers/{id}/sign-in, then the
// browser follows the authorization URL to the edge's callback; the suite's authorization
// server approves at once) or, on a machine-to-machine scenario, by client credentials — and
// then lists and calls the server's tools through Zest's /mcp/servers/{id}.
//
// Its environment: ZEST_URL (the edge), ZEST_ADMIN_KEY (the admin key) and
// ZEST_CONFORMANCE_ID_PREFIX (the servers' ids: PREFIX-<scenario>), set by the test;
// MCP_CONFORMANCE_SCENARIO and MCP_CONFORMANCE_CONTEXT (JSON: client_id, client_secret…), set
// by the suite. A client secret is never given to Zest in the clear: the test puts it in
// mcpgateway's environment under one of the names ZEST_CONFORMANCE_SECRET_VARS lists (and
// here under the same name), and the oauth block names that variable as ${VAR}.
//
// It exits 0 when a tool was listed and called through Zest (and, on a DPoP scenario, the
// admin API says the server's tokens are DPoP-bound), else 1 with the reason on stderr.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Timeout bounds the whole run (the suite's own is 30 s).
const Timeout = 25 * time.Second

// callbackPath is the edge's OAuth callback (services/mcpgateway/oauthclient.CallbackPath).
const callbackPath = "/internal/mcp/oauth/callback"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: conformanceclient SERVER_URL (the conformance suite runs it)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	err := run(ctx, os.Args[1])
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient:", err)
		os.Exit(1)
	}
}

// scenarioContext is the part of MCP_CONFORMANCE_CONTEXT this client reads.
type scenarioContext struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

var notID = regexp.MustCompile(`[^a-z0-9-]+`)

// serverID is the id the scenario's server is registered under in Zest: PREFIX-<scenario>
// (ZEST_CONFORMANCE_ID_PREFIX, default conf: one per version of the suite run on one Zest).
func serverID(prefix, scenario string) string {
	if prefix == "" {
		prefix = "conf"
	}
	return prefix + "-" + strings.Trim(notID.ReplaceAllString(strings.ToLower(strings.TrimPrefix(scenario, "auth/")), "-"), "-")
}

// machineToMachine reports whether the scenario's client is a service, not a person: the
// suite's client-credentials scenarios.
func machineToMachine(scenario string) bool {
	return strings.HasPrefix(scenario, "auth/client-credentials-")
}

// oauthBlock is the server's oauth block for the scenario: the context's client when it gives
// one (its secret by the variable that holds it), else none (Zest registers itself, RFC 7591).
func oauthBlock(scenario string, sc scenarioContext, lookupEnv func(string) (string, bool)) (map[string]any, error) {
	o := map[string]any{}
	if machineToMachine(scenario) {
		o["grant"] = "client_credentials"
	}
	if sc.ClientID != "" {
		o["client_id"] = sc.ClientID
	}
	if sc.ClientSecret != "" {
		vars, _ := lookupEnv("ZEST_CONFORMANCE_SECRET_VARS")
		for _, name := range strings.Split(vars, ",") {
			if v, ok := lookupEnv(name); ok && name != "" && v == sc.ClientSecret {
				o["client_secret"] = "${" + name + "}"
			}
		}
		if o["client_secret"] == nil {
			return nil, fmt.Errorf("the scenario's client_secret is in none of the variables ZEST_CONFORMANCE_SECRET_VARS names (%q): add it to mcpgateway's environment and to that list", vars)
		}
	}
	return o, nil
}

func run(ctx context.Context, serverURL string) error {
	zest, key := os.Getenv("ZEST_URL"), os.Getenv("ZEST_ADMIN_KEY")
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	if zest == "" || key == "" || scenario == "" {
		return errors.New("ZEST_URL, ZEST_ADMIN_KEY and MCP_CONFORMANCE_SCENARIO must be set")
	}
	var sc scenarioContext
	if c := os.Getenv("MCP_CONFORMANCE_CONTEXT"); c != "" {
		if err := json.Unmarshal([]byte(c), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	o, err := oauthBlock(scenario, sc, os.LookupEnv)
	if err != nil {
		return err
	}
	id := serverID(os.Getenv("ZEST_CONFORMANCE_ID_PREFIX"), scenario)
	a := &adminAPI{base: zest + "/internal/mcp", key: key}
	if _, err := a.do(ctx, http.MethodPost, "/servers", map[string]any{"id": id, "transport": "streamable-http", "url": serverURL, "oauth": o}); err != nil {
		return fmt.Errorf("register %s: %w", id, err)
	}
	var again func() error
	if !machineToMachine(scenario) {
		again = func() error { return signIn(ctx, a, zest, id) }
		if err := again(); err != nil {
			return err
		}
	}
	if err := listAndCall(ctx, zest+"/mcp/servers/"+id, key, again); err != nil {
		return err
	}
	if dpop(scenario) {
		return checkBound(ctx, a, id)
	}
	return nil
}

// dpop reports whether the scenario's authorization server binds its tokens by DPoP (RFC
// 9449): auth/dpop, auth/dpop-nonce.
func dpop(scenario string) bool {
	return strings.HasPrefix(scenario, "auth/dpop")
}

// checkBound fails unless the admin API says server id's tokens are DPoP-bound
// (oauth_state.dpop), as an operator reads it.
func checkBound(ctx context.Context, a *adminAPI, id string) error {
	b, err := a.do(ctx, http.MethodGet, "/servers/"+id, nil)
	if err != nil {
		return err
	}
	var got struct {
		Server struct {
			OAuthState struct {
				Status string `json:"status"`
				DPoP   bool   `json:"dpop"`
			} `json:"oauth_state"`
		} `json:"server"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		return fmt.Errorf("GET /servers/%s: %w", id, err)
	}
	if st := got.Server.OAuthState; st.Status != "signed_in" || !st.DPoP {
		return fmt.Errorf("GET /servers/%s: oauth_state %+v: want signed_in with dpop true (the authorization server binds its tokens)", id, st)
	}
	fmt.Printf("%s's tokens are DPoP-bound\n", id)
	return nil
}

// signIn signs Zest in to server id as a person does from the console: the admin API gives
// the authorization URL, and a browser follows it to the edge's callback.
func signIn(ctx context.Context, a *adminAPI, zest, id string) error {
	b, err := a.do(ctx, http.MethodPost, "/servers/"+id+"/sign-in", map[string]string{"redirect_uri": zest + callbackPath})
	if err != nil {
		return fmt.Errorf("sign-in of %s: %w", id, err)
	}
	var started struct {
		AuthorizationURL string `json:"authorization_url"`
	}
	if err := json.Unmarshal(b, &started); err != nil || started.AuthorizationURL == "" {
		return fmt.Errorf("sign-in of %s: no authorization_url in %s", id, b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, started.AuthorizationURL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req) // the browser: redirects followed to the callback
	if err != nil {
		return fmt.Errorf("the browser's sign-in: %w", err)
	}
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(page, []byte("Zest is signed in to "+id)) {
		return fmt.Errorf("the sign-in ended at %s with HTTP %d: %s", resp.Request.URL.Redacted(), resp.StatusCode, page)
	}
	return nil
}

// listAndCall lists the tools of the server at url (Zest's /mcp/servers/{id}) and calls each.
// A session or a call refused because the server needs sign-in (it asked for more scopes, or
// names another authorization server) is tried once more after signIn, as a person would sign
// in again from the console.
func listAndCall(ctx context.Context, url, key string, signIn func() error) error {
	cl, tools, err := session(ctx, url, key)
	if err != nil && signIn != nil && needsSignIn(nil, err) {
		fmt.Printf("the server needs sign-in again: %v\n", err)
		if err := signIn(); err != nil {
			return err
		}
		cl, tools, err = session(ctx, url, key)
	}
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, tool := range tools {
		req := mcp.CallToolRequest{}
		req.Params.Name = tool.Name
		req.Params.Arguments = map[string]any{}
		res, err := cl.CallTool(ctx, req)
		if signIn != nil && needsSignIn(res, err) {
			fmt.Printf("tools/call %s: the server needs sign-in again: %s\n", tool.Name, callError(res, err))
			if err := signIn(); err != nil {
				return err
			}
			res, err = cl.CallTool(ctx, req)
		}
		if err != nil {
			return fmt.Errorf("tools/call %s at %s: %w", tool.Name, url, err)
		}
		if res.IsError {
			return fmt.Errorf("tools/call %s at %s: the tool answered an error: %v", tool.Name, url, res.Content)
		}
		fmt.Printf("called %s through Zest\n", tool.Name)
	}
	return nil
}

// session opens an MCP session of url and lists its tools (at least one).
func session(ctx context.Context, url, key string) (*mcpclient.Client, []mcp.Tool, error) {
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		return nil, nil, err
	}
	cl := mcpclient.NewClient(tr)
	fail := func(err error) (*mcpclient.Client, []mcp.Tool, error) {
		cl.Close()
		return nil, nil, err
	}
	if err := cl.Start(ctx); err != nil {
		return fail(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "zest-conformanceclient", Version: "1"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		return fail(fmt.Errorf("initialize %s: %w", url, err))
	}
	tools, err := cl.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return fail(fmt.Errorf("tools/list at %s: %w", url, err))
	}
	if len(tools.Tools) == 0 {
		return fail(fmt.Errorf("tools/list at %s: no tools", url))
	}
	return cl, tools.Tools, nil
}

// callError is the words of a failed call: its error, else its result's text.
func callError(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return err.Error()
	}
	if res == nil || !res.IsError {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// needsSignIn reports whether a call failed because Zest needs a new sign-in to the server.
func needsSignIn(res *mcp.CallToolResult, err error) bool {
	return strings.Contains(callError(res, err), "needs sign-in")
}

// adminAPI is Zest's admin API with the admin key.
type adminAPI struct{ base, key string }

func (a *adminAPI) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, out)
	}
	return out, nil
}
