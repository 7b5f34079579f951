// Package session issues and checks the session ids of /mcp and /mcp/servers/{id}. An id is
// self-describing and signed (HMAC-SHA256): any mcpgateway replica that shares the key can
// check it without shared memory, and a restart loses nothing. The id carries the negotiated protocol version and
// the issue time (and, for /mcp/servers/{id}, the server id); ids expire after a fixed
// lifetime.
package session

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Errors of session ids.
var (
	// ErrInvalid means the id was not issued with this key (or was altered).
	ErrInvalid = errors.New("session id is not valid")
	// ErrExpired means the id is older than its lifetime.
	ErrExpired = errors.New("session has expired")
)

// Claims are what a session id says about its session.
type Claims struct {
	// ProtocolVersion is the negotiated MCP protocol version.
	ProtocolVersion string `json:"v"`
	// IssuedAt is the Unix time of initialize.
	IssuedAt int64 `json:"t"`
	// Nonce makes ids of the same second distinct.
	Nonce string `json:"n"`
	// Server is the registered server a session of /mcp/servers/{id} is bound to; empty for
	// Zest's own /mcp. A session is served only on the endpoint it was issued for.
	Server string `json:"s,omitempty"`
	// Relays are the requests of the server the session's MCP client accepts, from the
	// capabilities it declared in initialize: "s" sampling, "e" elicitation, "r" roots (empty
	// for ids issued before relays existed: nothing is relayed to them).
	Relays string `json:"c,omitempty"`
}

// Codec signs and checks session ids.
type Codec struct {
	key      []byte
	lifetime time.Duration
	now      func() time.Time

	// verified remembers the claims of ids whose signature checked out, so that a session's
	// every request does not pay for the HMAC, two base64 decodings and a JSON decoding
	// (~5% of the CPU of a small tools/call). Bounded: emptied when it reaches
	// verifiedCap entries. Expiry is checked on every Parse, cached or not.
	mu       sync.Mutex
	verified map[string]Claims
}

// verifiedCap bounds the cache of verified ids (~200 bytes an entry).
const verifiedCap = 4096

// NewCodec returns a codec; key must be at least 32 bytes.
func NewCodec(key []byte, lifetime time.Duration) (*Codec, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("session key has %d bytes, want at least 32", len(key))
	}
	return &Codec{key: key, lifetime: lifetime, now: time.Now, verified: map[string]Claims{}}, nil
}

var enc = base64.RawURLEncoding

// Issue returns a new session id of Zest's own /mcp for protocolVersion.
func (c *Codec) Issue(protocolVersion string) (string, error) { return c.IssueFor(protocolVersion, "") }

// IssueFor returns a new session id for protocolVersion bound to server (empty: Zest's own
// /mcp).
func (c *Codec) IssueFor(protocolVersion, server string) (string, error) {
	return c.IssueWith(protocolVersion, server, "")
}

// IssueWith is IssueFor for a client that accepts the server's requests named in relays
// (see Claims.Relays).
func (c *Codec) IssueWith(protocolVersion, server, relays string) (string, error) {
	nonce := make([]byte, 12)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	id, err := c.encode(Claims{ProtocolVersion: protocolVersion, IssuedAt: c.now().Unix(), Nonce: enc.EncodeToString(nonce), Server: server, Relays: relays})
	if err == nil {
		started.WithLabelValues(endpointOf(server)).Inc() // metrics.go
	}
	return id, err
}

// encode signs cl into an id.
func (c *Codec) encode(cl Claims) (string, error) {
	payload, err := json.Marshal(cl)
	if err != nil {
		return "", err
	}
	body := enc.EncodeToString(payload)
	return body + "." + enc.EncodeToString(c.sign(body)), nil
}

// Parse checks id and returns its claims.
func (c *Codec) Parse(id string) (Claims, error) {
	c.mu.Lock()
	cl, hit := c.verified[id]
	c.mu.Unlock()
	if !hit {
		var err error
		if cl, err = c.verify(id); err != nil {
			return Claims{}, err
		}
		c.mu.Lock()
		if len(c.verified) >= verifiedCap {
			clear(c.verified)
		}
		c.verified[id] = cl
		c.mu.Unlock()
	}
	if c.lifetime > 0 && c.now().Sub(time.Unix(cl.IssuedAt, 0)) > c.lifetime {
		return Claims{}, ErrExpired
	}
	return cl, nil
}

// verify checks id's signature and decodes its claims.
func (c *Codec) verify(id string) (Claims, error) {
	body, sig, ok := strings.Cut(id, ".")
	if !ok {
		return Claims{}, ErrInvalid
	}
	// Compare the signature as text, with the one encoding this codec writes: decoding it
	// instead would accept other spellings of the same bytes (base64 ignores the unused low
	// bits of the last character, and line breaks), and an altered id would then pass as a
	// different string (one that DELETE never recorded as ended).
	if !hmac.Equal([]byte(sig), []byte(enc.EncodeToString(c.sign(body)))) {
		return Claims{}, ErrInvalid
	}
	raw, err := enc.DecodeString(body)
	if err != nil {
		return Claims{}, ErrInvalid
	}
	var cl Claims
	if err := json.Unmarshal(raw, &cl); err != nil {
		return Claims{}, ErrInvalid
	}
	return cl, nil
}

// Expires is when a session's id stops being valid (zero when ids never expire).
func (c *Codec) Expires(cl Claims) time.Time {
	if c.lifetime <= 0 {
		return time.Time{}
	}
	return time.Unix(cl.IssuedAt, 0).Add(c.lifetime)
}

func (c *Codec) sign(body string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("zest-mcp-session\n"))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// LoadOrCreateKey returns the key in the file at path, creating it with 32 random bytes
// (mode 0600) when it does not exist. Replicas share a key by sharing this file or by
// ZEST_SESSION_KEY.
func LoadOrCreateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		key, derr := enc.DecodeString(strings.TrimSpace(string(b)))
		if derr != nil || len(key) < 32 {
			return nil, fmt.Errorf("session key file %s: want base64url of at least 32 bytes", path)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("session key file: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("session key directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) { // another replica won the race: use its key
			return LoadOrCreateKey(path)
		}
		return nil, fmt.Errorf("session key file: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(enc.EncodeToString(key) + "\n"); err != nil {
		return nil, err
	}
	return key, f.Sync()
}

// DecodeKey reads a key given as base64url text (ZEST_SESSION_KEY).
func DecodeKey(text string) ([]byte, error) {
	key, err := enc.DecodeString(strings.TrimSpace(text))
	if err != nil || len(key) < 32 {
		return nil, errors.New("ZEST_SESSION_KEY: want base64url (no padding) of at least 32 random bytes, e.g. `head -c32 /dev/urandom | basenc --base64url | tr -d =`")
	}
	return key, nil
}
