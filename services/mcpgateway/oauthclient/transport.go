package oauthclient

import (
	"net/http"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// Transport sends every request to cfg's server with the signer's access token, or, for a
// server called on behalf of each caller (grant token_exchange), with the token exchanged for
// the caller of the request's context (a request without one fails with OnBehalfError, and
// nothing is sent). A 401 to a request sent with a token gets one new token (refreshed,
// requested again by client credentials, or exchanged again) and the request once more, when
// its body can be sent again; a 403 insufficient_scope is a step-up (Signer.InsufficientScope):
// a client-credentials server's request is sent once more with a token for the scopes asked,
// and a server a person signs in to needs sign-in (a server called on behalf of its callers
// answers the caller the 403 as it came: the caller's token carries its scopes); a server
// that needs sign-in fails the request with ErrNeedsSignIn, naming how to sign in.
type Transport struct {
	Base   http.RoundTripper
	Signer *Signer
	Config *mcpgatewayv1.ServerConfig
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.token(req, false)
	if err != nil {
		return nil, err
	}
	resp, err := t.Base.RoundTrip(withToken(req, tok))
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) ||
		(req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
		return resp, err
	}
	if resp.StatusCode == http.StatusForbidden {
		challenge := resp.Header.Get("WWW-Authenticate")
		if OnBehalf(t.Config) || ChallengeError(challenge) != "insufficient_scope" {
			return resp, nil
		}
		var retry bool
		if retry, err = t.Signer.InsufficientScope(req.Context(), t.Config, ChallengeScopes(challenge)); err == nil && !retry {
			return resp, nil
		}
		if err == nil {
			tok, err = t.token(req, false)
		}
	} else {
		tok, err = t.token(req, true)
	}
	if err != nil {
		_ = resp.Body.Close()
		return nil, err
	}
	again := withToken(req, tok)
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			_ = resp.Body.Close()
			return nil, err
		}
	}
	_ = resp.Body.Close()
	return t.Base.RoundTrip(again)
}

// token is the token req goes with (see Transport).
func (t *Transport) token(req *http.Request, force bool) (string, error) {
	if OnBehalf(t.Config) {
		return t.Signer.ExchangedToken(req.Context(), t.Config, force)
	}
	return t.Signer.AccessToken(req.Context(), t.Config, force)
}

// withToken is a copy of req with its Authorization (the caller's request is not changed).
func withToken(req *http.Request, tok string) *http.Request {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}
