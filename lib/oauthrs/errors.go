package oauthrs

import "errors"

// The verifier's refusals. Each message says what was wrong with the token, never the token.
var (
	// ErrInvalidToken is every refusal of the token itself (a 401: the client gets another).
	ErrInvalidToken = errors.New("invalid access token")
	// ErrIssuerUnavailable is an issuer whose metadata or keys could not be fetched (a 503: the
	// token may be good, nothing here can tell).
	ErrIssuerUnavailable = errors.New("the OAuth issuer's keys could not be fetched")
	// ErrInsufficientScope is a good token without the scope required (a 403, RFC 6750 section
	// 3.1: the client may ask for the scope). It Is ErrInvalidToken too.
	ErrInsufficientScope = errors.New("insufficient scope")
)

// tokenError is a refusal of the token with its reason, Is ErrInvalidToken (and
// ErrInsufficientScope when scope).
type tokenError struct {
	reason string
	scope  bool
}

func (e *tokenError) Error() string { return "Invalid access token: " + e.reason }
func (e *tokenError) Is(target error) bool {
	return target == ErrInvalidToken || e.scope && target == ErrInsufficientScope
}

func invalid(reason string) error { return &tokenError{reason: reason} }
