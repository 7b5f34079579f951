package zestctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/zestmcp/zest/lib/keyauth"
)

// idPattern is the id rule of servers and presets (docs/dev/contracts.md).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,96}$`)

// ClientConfig is the configuration of MCP client for url, in the same shapes as the web
// console's (gateway/console/static/ui/views/dashboard.js, configs()): Claude Desktop through
// `npx -y mcp-remote URL`; a key, when one is needed, only as a placeholder.
func ClientConfig(client, url string, keyRequired bool) (string, error) {
	const name = "zest"
	const placeholder = "Bearer <your LEMONADE_API_KEY>"
	var v any
	switch client {
	case "claude":
		// A struct keeps the console's key order: command, args, env.
		type stdio struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env,omitempty"`
		}
		srv := stdio{Command: "npx", Args: []string{"-y", "mcp-remote", url}}
		if keyRequired {
			srv.Args = append(srv.Args, "--header", "Authorization:${AUTH_HEADER}")
			srv.Env = map[string]string{"AUTH_HEADER": placeholder}
		}
		v = map[string]any{"mcpServers": map[string]any{name: srv}}
	case "cursor":
		srv := map[string]any{"url": url}
		if keyRequired {
			srv["headers"] = map[string]any{"Authorization": placeholder}
		}
		v = map[string]any{"mcpServers": map[string]any{name: srv}}
	case "vscode":
		srv := map[string]any{"type": "http", "url": url}
		cfg := map[string]any{"servers": map[string]any{name: srv}}
		if keyRequired {
			srv["headers"] = map[string]any{"Authorization": "Bearer ${input:zest-key}"}
			cfg["inputs"] = []any{map[string]any{"type": "promptString", "id": "zest-key", "description": "Zest API key (LEMONADE_API_KEY)", "password": true}}
		}
		v = cfg
	case "inspector":
		s := "npx @modelcontextprotocol/inspector --cli " + url + " --transport http --method tools/list"
		if keyRequired {
			s += " --header 'Authorization: Bearer <your LEMONADE_API_KEY>'"
		}
		return s + "\n", nil
	default:
		return "", usagef("client %q: want claude, cursor, vscode or inspector", client)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep <your LEMONADE_API_KEY> readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// configFiles says where each client's configuration goes.
var configFiles = map[string]string{
	"claude": "claude_desktop_config.json (through mcp-remote)", "cursor": "~/.cursor/mcp.json",
	"vscode": ".vscode/mcp.json", "inspector": "a terminal",
}

func (a *app) configCmd() *cobra.Command {
	var server, preset, base, keyReq string
	c := &cobra.Command{
		Use:       "config claude|cursor|vscode|inspector",
		Short:     "Print a ready MCP client configuration for /mcp, /mcp/servers/{id} or /mcp/presets/{id}",
		ValidArgs: []string{"claude", "cursor", "vscode", "inspector"},
		Long: `config prints the configuration of an MCP client for Zest's endpoint: /mcp, or
/mcp/servers/{id} with --server, or /mcp/presets/{id} with --preset, under --url (default
http:// + ZEST_EDGE_ADDR). With --key-required auto (the default) the endpoint is probed
once without a key: when it answers 401 the configuration carries a placeholder for the key,
never the key itself. When --url is the configured edge (ZEST_EDGE_ADDR) and LEMONADE_API_KEY
is set, a second probe with that key tells an unknown server or preset (404, exit 3); the
admin key is never sent, nor any key to another URL, and no redirect is followed. The output is
the file's content (json and yaml output do not apply); where it goes is printed on stderr.`,
		Args: args(1, "claude|cursor|vscode|inspector"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if _, ok := configFiles[argv[0]]; !ok {
				return usagef("client %q: want claude, cursor, vscode or inspector", argv[0])
			}
			if server != "" && preset != "" {
				return usagef("--server and --preset: give one")
			}
			u, err := url.Parse(base)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("--url %q: want the edge's base URL, e.g. http://127.0.0.1:13305", base)
			}
			endpoint := strings.TrimRight(base, "/") + "/mcp"
			for _, x := range []struct{ flag, id, path string }{{"server", server, "/servers/"}, {"preset", preset, "/presets/"}} {
				if x.id == "" {
					continue
				}
				if !idPattern.MatchString(x.id) {
					return usagef("--%s %q: an id matches [A-Za-z0-9_.-]{1,96}", x.flag, x.id)
				}
				endpoint += x.path + x.id
			}
			var required bool
			switch keyReq {
			case "true":
				required = true
			case "false":
			case "auto":
				edge := envOr(a.getenv, "ZEST_EDGE_ADDR", defaultEdgeAddr)
				key := ""
				if u.Host == edge {
					key = a.getenv(keyauth.EnvAPIKey)
				}
				var probed bool
				required, probed, err = probeKeyRequired(endpoint, key, a.timeout)
				if err != nil {
					return err
				}
				if required && !probed && a.getenv(keyauth.EnvAPIKey) != "" {
					fmt.Fprintf(a.stderr, "# not probed with %s: --url is not ZEST_EDGE_ADDR (%s), and a key goes to the configured edge only; an unknown server or preset is not detected\n", keyauth.EnvAPIKey, edge)
				}
			default:
				return usagef("--key-required %q: want auto, true or false", keyReq)
			}
			text, err := ClientConfig(argv[0], endpoint, required)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "# %s: paste into %s\n", argv[0], configFiles[argv[0]])
			_, err = fmt.Fprint(a.stdout, text)
			return err
		},
	}
	def := "http://" + envOr(a.getenv, "ZEST_EDGE_ADDR", defaultEdgeAddr)
	c.Flags().StringVar(&server, "server", "", "the endpoint of this registered server, /mcp/servers/{id}")
	c.Flags().StringVar(&preset, "preset", "", "the endpoint of this preset, /mcp/presets/{id}")
	c.Flags().StringVar(&base, "url", def, "the edge's base URL as clients reach it (default from ZEST_EDGE_ADDR)")
	c.Flags().StringVar(&keyReq, "key-required", "auto", "auto (probe the endpoint), true or false: whether the config carries a key placeholder")
	return c
}

// probeKeyRequired asks the endpoint a ping without a key: 401 means clients need one. When
// it does and key is set (the API key, and only for the configured edge: the caller decides),
// a second ping with the key tells an unknown server or preset (404, exit 3); probed says
// whether it was sent. An endpoint that cannot be reached is an error (exit 5): the
// configuration would be a guess.
func probeKeyRequired(endpoint, key string, timeout time.Duration) (required, probed bool, err error) {
	code, err := ping(endpoint, "", timeout)
	if err != nil {
		return false, false, err
	}
	required = code == http.StatusUnauthorized || code == http.StatusForbidden
	if required && key != "" {
		if code, err = ping(endpoint, key, timeout); err != nil {
			return false, false, err
		}
		probed = true
	}
	if code == http.StatusNotFound {
		return false, probed, exitError{code: ExitNotFound, msg: fmt.Sprintf("%s answered 404: no such server or preset (or it is not exposed)", endpoint)}
	}
	return required, probed, nil
}

// ping posts a JSON-RPC ping to endpoint and returns the HTTP status. It follows no
// redirect: a key goes to the URL it was meant for or nowhere.
func ping(endpoint, key string, timeout time.Duration) (int, error) {
	req, err := http.NewRequest("POST", endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		return 0, usagef("--url: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	cl := &http.Client{Timeout: min(timeout, 30*time.Second), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, exitError{code: ExitUnavailable, msg: fmt.Sprintf("probing %s: %v (give --key-required true or false to skip the probe)", endpoint, err)}
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return 0, exitError{code: ExitUnavailable, msg: fmt.Sprintf("probing %s: it answered %d, a redirect to %q, which zestctl does not follow: give --url the address MCP clients use, or --key-required true or false", endpoint, resp.StatusCode, resp.Header.Get("Location"))}
	}
	return resp.StatusCode, nil
}
