// Package mcpregistry reads the MCP Registry (its API /v0.1 and server.json documents) and
// maps a server.json to a Zest server config: the one home of both, for `zestctl servers
// install` and the console's install search (through RegistryService).
package mcpregistry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	// EnvURL names the setting of the registry's base URL.
	EnvURL = "ZEST_MCP_REGISTRY_URL"
	// DefaultURL is the official MCP Registry.
	DefaultURL = "https://registry.modelcontextprotocol.io"
	// MaxBodyBytes bounds one answer of the registry: a page of MaxLimit servers is far less.
	MaxBodyBytes = 4 << 20
	// Timeout bounds one request to the registry, connection and body included.
	Timeout = 15 * time.Second
	// DefaultLimit is a search's page size when the caller names none.
	DefaultLimit = 30
	// MaxLimit is the largest page size a search may ask for (the registry's own cap is 100).
	MaxLimit = 100
	// MaxNameBytes bounds a server name, version, search or cursor in a request.
	MaxNameBytes = 400
)

// Client reads one registry.
type Client struct {
	base    *url.URL
	http    *http.Client
	maxBody int64
}

// Option changes a Client.
type Option func(*Client)

// WithHTTPClient sends the requests through hc (its Timeout, when zero, becomes Timeout).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// WithMaxBody bounds an answer at n bytes (MaxBodyBytes by default).
func WithMaxBody(n int64) Option {
	return func(c *Client) { c.maxBody = n }
}

// New reads the registry at base (DefaultURL when empty): an http or https URL without query
// or fragment.
func New(base string, opts ...Option) (*Client, error) {
	if base == "" {
		base = DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		shown := strconv.Quote(base)
		if err != nil || u.User != nil {
			shown = "(not repeated: it may hold a credential)" // a user or password is never logged
		}
		return nil, fmt.Errorf("%s %s is not a registry URL: want http(s)://host[/path] without credentials, query or fragment, e.g. %s", EnvURL, shown, DefaultURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{base: u, http: &http.Client{}, maxBody: MaxBodyBytes}
	for _, o := range opts {
		o(c)
	}
	if c.http.Timeout == 0 {
		hc := *c.http
		hc.Timeout = Timeout
		c.http = &hc
	}
	return c, nil
}

// URL is the registry's base URL.
func (c *Client) URL() string { return c.base.String() }

// Search lists the latest version of the servers whose name matches search, one page from
// cursor ("" for the first); limit 0 is DefaultLimit.
func (c *Client) Search(ctx context.Context, search, cursor string, limit int) (Page, error) {
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 1 || limit > MaxLimit {
		return Page{}, fmt.Errorf("%w: limit %d is out of range: use 1 to %d (or 0 for %d)", ErrBadRequest, limit, MaxLimit, DefaultLimit)
	}
	if len(search) > MaxNameBytes || len(cursor) > MaxNameBytes {
		return Page{}, fmt.Errorf("%w: search and cursor are at most %d bytes", ErrBadRequest, MaxNameBytes)
	}
	q := url.Values{"version": {"latest"}, "limit": {strconv.Itoa(limit)}}
	if search != "" {
		q.Set("search", search)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	body, err := c.get(ctx, "/v0.1/servers", q)
	if err != nil {
		return Page{}, err
	}
	return ParsePage(body)
}

// Get reads one version of a server; version "" is "latest".
func (c *Client) Get(ctx context.Context, name, version string) (Entry, error) {
	if name == "" {
		return Entry{}, fmt.Errorf("%w: name the server, e.g. io.github.modelcontextprotocol/server-everything", ErrBadRequest)
	}
	if version == "" {
		version = "latest"
	}
	if len(name) > MaxNameBytes || len(version) > MaxNameBytes {
		return Entry{}, fmt.Errorf("%w: a name and a version are at most %d bytes", ErrBadRequest, MaxNameBytes)
	}
	body, err := c.get(ctx, "/v0.1/servers/"+url.PathEscape(name)+"/versions/"+url.PathEscape(version), nil)
	if err != nil {
		return Entry{}, err
	}
	e, err := ParseEntry(body)
	if err != nil {
		return Entry{}, err
	}
	if e.Server.Name != name {
		return Entry{}, fmt.Errorf("%w: asked for %q, it answered %q", ErrBadAnswer, name, e.Server.Name)
	}
	return e, nil
}

// get sends GET path?q (path escaped) and returns the body of a 200, at most maxBody bytes.
func (c *Client) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	// path is escaped: a name's "/" stays %2F, as the API wants.
	u := *c.base
	unescaped, err := url.PathUnescape(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	u.Path = c.base.Path + unescaped
	u.RawPath = c.base.EscapedPath() + path
	if q != nil {
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("%w at %s (%s): %w", ErrUnavailable, c.base, EnvURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%w at %s: reading its answer: %w", ErrUnavailable, c.base, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, ErrNotFound
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w at %s: it answered %s", ErrUnavailable, c.base, resp.Status)
	case int64(len(body)) > c.maxBody:
		return nil, fmt.Errorf("%w: the answer is over %d bytes", ErrBadAnswer, c.maxBody)
	}
	return body, nil
}
