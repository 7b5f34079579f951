package oauthclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/zestmcp/zest/lib/clientmetadata"
)

// registered is a client a dynamic registration gave.
type registered struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	// TokenEndpointAuthMethod is how the registered client authenticates at the token
	// endpoint, as the server registered it (it may give a secret where Zest asked for none).
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method,omitempty"`
}

// applicationType is the application_type of a registration for redirectURI (OpenID Connect
// Dynamic Client Registration, which MCP authorization requires a client to give, SEP-837):
// "web" for Zest's callback on a host, "native" for one on a loopback address (OpenID's web
// clients may not use localhost).
func applicationType(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return "web"
	}
	h := u.Hostname()
	if ip, err := netip.ParseAddr(h); (err == nil && ip.IsLoopback()) || strings.EqualFold(h, "localhost") {
		return "native"
	}
	return "web"
}

// register registers Zest as a client of d's authorization server (RFC 7591) for a sign-in
// coming back to redirectURI: a public client (PKCE), unless the server insists on a secret.
func (s *Signer) register(ctx context.Context, id string, d *Discovery, redirectURI string) (*registered, error) {
	body, _ := json.Marshal(map[string]any{
		"client_name": clientmetadata.ClientName, "redirect_uris": []string{redirectURI}, "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"}, "token_endpoint_auth_method": "none", "application_type": applicationType(redirectURI),
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: server %q: client registration at %s: %w", ErrSignIn, id, d.Server.RegistrationEndpoint, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxMetadataBytes))
	if err != nil {
		return nil, err
	}
	var r registered
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.ClientID == "" {
		if d.Legacy != "" {
			return nil, fmt.Errorf("%w: server %q publishes no OAuth metadata, and registering Zest at %s, %s, failed (HTTP %d): set oauth.authorization_server to its authorization server's issuer URL, or register a client for Zest there (redirect URI %s) and set oauth.client_id",
				ErrSignIn, id, d.Server.RegistrationEndpoint, d.Legacy, resp.StatusCode, redirectURI)
		}
		return nil, fmt.Errorf("%w: server %q: the authorization server refused to register Zest (HTTP %d at %s): register a client for Zest there (redirect URI %s) and set oauth.client_id",
			ErrSignIn, id, resp.StatusCode, d.Server.RegistrationEndpoint, redirectURI)
	}
	s.log.Info("Zest registered itself with an upstream's authorization server", "server", id, "issuer", d.Server.Issuer, "client_id", r.ClientID)
	return &r, nil
}
