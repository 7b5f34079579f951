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
// that needs sign-in fails the request with ErrNeedsSignIn, naming how to sign in. A
// DPoP-bound token (dpop.go) goes as "Authorization: DPoP" with a fresh proof of its key, and a
// request refused for want of the server's nonce (use_dpop_nonce) is sent once more with it.
type Transport struct {
	Base   http.RoundTripper
	Signer *Signer
	Config *mcpgatewayv1.ServerConfig
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c, err := t.credential(req, false)
	if err != nil {
		return nil, err
	}
	resp, err := t.send(req, c, false)
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) ||
		!replayable(req) {
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
			c, err = t.credential(req, false)
		}
	} else {
		c, err = t.credential(req, true)
	}
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	return t.send(req, c, true)
}

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// credential is what req goes with (see Transport).
func (t *Transport) credential(req *http.Request, force bool) (credential, error) {
	if OnBehalf(t.Config) {
		tok, err := t.Signer.ExchangedToken(req.Context(), t.Config, force)
		return credential{token: tok}, err
	}
	return t.Signer.credential(req.Context(), t.Config, force)
}

// send sends a copy of req with c (the caller's request is not changed; again: its body was
// sent already); a DPoP-bound token's
// request the server refuses for want of its nonce (use_dpop_nonce) is sent once more with it.
func (t *Transport) send(req *http.Request, c credential, again bool) (*http.Response, error) {
	id := t.Config.GetId()
	r, err := t.withCredential(req, c, again)
	if err != nil {
		return nil, err
	}
	resp, err := t.Base.RoundTrip(r)
	if err != nil || !t.Signer.nonceRetry(id, req, c, resp) || !replayable(req) {
		return resp, err
	}
	_ = resp.Body.Close()
	if r, err = t.withCredential(req, c, true); err != nil {
		return nil, err
	}
	resp, err = t.Base.RoundTrip(r)
	if err == nil {
		t.Signer.nonceRetry(id, req, c, resp) // keep a newer nonce
	}
	return resp, err
}

// withCredential is a copy of req with its Authorization (and DPoP proof) for c, and its body
// anew when it was sent already (again).
func (t *Transport) withCredential(req *http.Request, c credential, again bool) (*http.Request, error) {
	r := req.Clone(req.Context())
	if err := t.Signer.authorize(r, t.Config.GetId(), c); err != nil {
		return nil, err
	}
	if again && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}
