package oauthclient

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

// Limits of private_key_jwt client authentication (RFC 7523 section 2.2; SEP-1046).
const (
	// ClientAssertionLifetime is how long a client assertion is valid after it is signed: it
	// is signed for one token request, sent at once.
	ClientAssertionLifetime = time.Minute
	// MaxClientKeyFileBytes bounds the file oauth.client_key_file names (a PEM private key is
	// a few KiB at most).
	MaxClientKeyFileBytes = 64 << 10
	// MinClientRSABits is the smallest RSA key Zest signs with (RFC 7518 section 3.3).
	MinClientRSABits = 2048
)

const (
	// methodPrivateKeyJWT is the token endpoint authentication method of a client that signs
	// a JWT assertion with its private key (OpenID Connect Core section 9, RFC 7523).
	methodPrivateKeyJWT = "private_key_jwt"
	// ClientAssertionType is the client_assertion_type of a JWT client assertion.
	ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
)

// clientKey is a client's private key and the algorithm Zest signs with it.
type clientKey struct {
	key crypto.Signer
	alg jose.SignatureAlgorithm
}

// hasClientKey reports whether cfg's client authenticates by its private key.
func hasClientKey(cfg *mcpgatewayv1.ServerConfig) bool {
	return cfg.GetOauth().GetClientKeyFile() != ""
}

// CheckClientKey reads the private key cfg's oauth.client_key_file names, as mcpgateway will
// at each token request, and refuses the config (serverconfig.ErrInvalid, naming the field)
// when the file cannot be read or holds no private key Zest signs with. The key is neither
// kept nor logged. A config without client_key_file passes.
func CheckClientKey(cfg *mcpgatewayv1.ServerConfig) error {
	if !hasClientKey(cfg) {
		return nil
	}
	if _, err := loadClientKey(cfg.GetOauth().GetClientKeyFile()); err != nil {
		return fmt.Errorf("%w: %w", serverconfig.ErrInvalid, err)
	}
	return nil
}

// loadClientKey reads and parses the PEM private key at path: PKCS #8, PKCS #1 (RSA) or SEC 1
// (EC); RSA of at least MinClientRSABits signs RS256, EC P-256, P-384 and P-521 ES256, ES384
// and ES512. Its errors name oauth.client_key_file and never quote the file.
func loadClientKey(path string) (*clientKey, error) {
	const field = "oauth.client_key_file"
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s %q cannot be read by mcpgateway (%w): give the path of the client's PEM private key, readable by mcpgateway's user", field, path, errors.Unwrap(err))
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxClientKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %q cannot be read by mcpgateway (%w): give the path of the client's PEM private key, readable by mcpgateway's user", field, path, errors.Unwrap(err))
	}
	if len(raw) > MaxClientKeyFileBytes {
		return nil, fmt.Errorf("%s %q is larger than %d bytes: it must hold the client's PEM private key (RSA or EC) only", field, path, MaxClientKeyFileBytes)
	}
	notAKey := fmt.Errorf("%s %q holds no PEM private key: give an unencrypted RSA or EC key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY; e.g. openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256)", field, path)
	for rest := raw; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, notAKey
		}
		var key any
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, fmt.Errorf("%s %q holds an encrypted private key: mcpgateway reads it without a passphrase (openssl pkey -in KEY -out PLAIN), so keep the file readable by mcpgateway only", field, path)
		default:
			continue // EC PARAMETERS before the key, a certificate beside it
		}
		if err != nil {
			return nil, notAKey
		}
		return signingKey(field, path, key)
	}
}

// signingKey is key with its algorithm, or why Zest does not sign with it.
func signingKey(field, path string, key any) (*clientKey, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < MinClientRSABits {
			return nil, fmt.Errorf("%s %q holds a %d-bit RSA key: use one of at least %d bits", field, path, k.N.BitLen(), MinClientRSABits)
		}
		return &clientKey{key: k, alg: jose.RS256}, nil
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return &clientKey{key: k, alg: jose.ES256}, nil
		case elliptic.P384():
			return &clientKey{key: k, alg: jose.ES384}, nil
		case elliptic.P521():
			return &clientKey{key: k, alg: jose.ES512}, nil
		}
	}
	return nil, fmt.Errorf("%s %q holds a %T: give an RSA key or an EC key on P-256, P-384 or P-521", field, path, key)
}

// clientMethod is how cfg's client authenticates at d's token endpoint: private_key_jwt with
// a key, else as authMethod says.
func clientMethod(cfg *mcpgatewayv1.ServerConfig, registered string, d *Discovery) string {
	if hasClientKey(cfg) {
		return methodPrivateKeyJWT
	}
	return authMethod(registered, d)
}

// checkKeyMethod refuses a client key that m's authorization server says it does not take:
// its token_endpoint_auth_methods_supported without private_key_jwt, or its
// token_endpoint_auth_signing_alg_values_supported without the key's algorithm. Metadata that
// lists none says nothing against it.
func checkKeyMethod(cfg *mcpgatewayv1.ServerConfig, m *ServerMetadata) error {
	if !hasClientKey(cfg) {
		return nil
	}
	id := cfg.GetId()
	if ms := m.TokenEndpointAuthMethodsSupported; len(ms) > 0 && !slices.Contains(ms, methodPrivateKeyJWT) {
		return fmt.Errorf("server %q: oauth.client_key_file: its authorization server %s lists token_endpoint_auth_methods_supported %q, without %s: it takes no client key — register the client with a secret there and set oauth.client_secret instead",
			id, m.Issuer, strings.Join(ms, " "), methodPrivateKeyJWT)
	}
	if algs := m.TokenEndpointAuthSigningAlgValuesSupported; len(algs) > 0 {
		k, err := loadClientKey(cfg.GetOauth().GetClientKeyFile())
		if err != nil {
			return fmt.Errorf("server %q: %w", id, err)
		}
		if !slices.Contains(algs, string(k.alg)) {
			return fmt.Errorf("server %q: oauth.client_key_file: the key signs %s, and its authorization server %s lists token_endpoint_auth_signing_alg_values_supported %q: give a key of one of those",
				id, k.alg, m.Issuer, strings.Join(algs, " "))
		}
	}
	return nil
}

// addClientAssertion adds to params, when cfg's client authenticates by its key, the client
// assertion of one token request to the authorization server issuer (RFC 7523 section 2.2):
// a JWT signed with the key of oauth.client_key_file, read now (a replaced file is used at
// the next request), whose iss and sub are the client id, aud the issuer (SEP-1046; RFC 7523
// allows the token endpoint, which draft-ietf-oauth-rfc7523bis forbids for its ambiguity), a
// unique jti, and exp ClientAssertionLifetime from now.
func (s *Signer) addClientAssertion(cfg *mcpgatewayv1.ServerConfig, clientID, issuer string, params url.Values) error {
	if !hasClientKey(cfg) {
		return nil
	}
	o := cfg.GetOauth()
	k, err := loadClientKey(o.GetClientKeyFile())
	if err != nil {
		return fmt.Errorf("server %q: %w", cfg.GetId(), err)
	}
	a, err := signAssertion(k, o.GetClientKeyId(), clientID, issuer, s.now())
	if err != nil {
		return fmt.Errorf("server %q: oauth.client_key_file: sign the client assertion: %w", cfg.GetId(), err)
	}
	params.Set("client_assertion_type", ClientAssertionType)
	params.Set("client_assertion", a)
	return nil
}

// signAssertion is the compact JWT client assertion of clientID for audience, signed with k at
// now (kid in its header when not empty).
func signAssertion(k *clientKey, kid, clientID, audience string, now time.Time) (string, error) {
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.key}, opts)
	if err != nil {
		return "", err
	}
	claims := jwt.Claims{Issuer: clientID, Subject: clientID, Audience: jwt.Audience{audience}, ID: rand.Text(),
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ClientAssertionLifetime))}
	return jwt.Signed(sig).Claims(claims).Serialize()
}

// credentialsHint names the client's credentials a refused token request should be checked
// against.
func credentialsHint(cfg *mcpgatewayv1.ServerConfig) string {
	if hasClientKey(cfg) {
		return "that the key of oauth.client_key_file (and oauth.client_key_id) is the one registered there for the client"
	}
	return "the secret oauth.client_secret names"
}
