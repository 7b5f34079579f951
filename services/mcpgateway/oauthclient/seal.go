package oauthclient

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// Settings of the secret key.
const (
	// EnvSecretKeyFile names the file of the key that seals upstream tokens at rest: 32 random
	// bytes, raw or as base64 or hex (openssl rand -base64 32).
	EnvSecretKeyFile = "ZEST_SECRET_KEY_FILE"
	// EnvSecretKeyPreviousFile names the key being rotated out: tokens sealed with it are still
	// read, and sealed again with the current key when next written (docs/operator/oauth.md).
	EnvSecretKeyPreviousFile = "ZEST_SECRET_KEY_PREVIOUS_FILE"
	// KeyBytes is the key's length (AES-256).
	KeyBytes = 32
)

// sealVersion is the first byte of a sealed record: 1 is AES-256-GCM, the key's id (4 bytes),
// a random 12-byte nonce, the ciphertext and its tag.
const sealVersion = 1

// Errors of the keyring.
var (
	// ErrNoSecretKey means ZEST_SECRET_KEY_FILE is not set: no token can be stored.
	ErrNoSecretKey = errors.New("no secret key to seal upstream OAuth tokens with: set " + EnvSecretKeyFile + " to a file of 32 random bytes (openssl rand -base64 32 > FILE) on every mcpgateway, the same file on each")
	// ErrUnseal means a record was sealed with neither key, or altered.
	ErrUnseal = errors.New("a stored upstream OAuth token could not be read with the secret key")
)

// Keyring seals and opens records with the current key, and opens those of the previous one.
type Keyring struct {
	cur, prev cipher.AEAD
	curID     []byte
	prevID    []byte
}

// LoadKeyring reads the keys the environment names; without EnvSecretKeyFile it returns nil
// (signing in is then refused with ErrNoSecretKey).
func LoadKeyring(lookupEnv func(string) (string, bool)) (*Keyring, error) {
	path, ok := lookupEnv(EnvSecretKeyFile)
	if !ok || path == "" {
		return nil, nil
	}
	k := &Keyring{}
	var err error
	if k.cur, k.curID, err = loadKey(EnvSecretKeyFile, path); err != nil {
		return nil, err
	}
	if p, ok := lookupEnv(EnvSecretKeyPreviousFile); ok && p != "" {
		if k.prev, k.prevID, err = loadKey(EnvSecretKeyPreviousFile, p); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// NewKeyring is a keyring of one key (tests, and LoadKeyring's parts).
func NewKeyring(key []byte) (*Keyring, error) {
	a, id, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	return &Keyring{cur: a, curID: id}, nil
}

func loadKey(setting, path string) (cipher.AEAD, []byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", setting, err)
	}
	key, err := decodeKey(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", setting, path, err)
	}
	return newAEAD(key)
}

// decodeKey reads 32 bytes: raw, or base64 (standard or URL, padded or not) or hex of them,
// surrounding whitespace ignored.
func decodeKey(raw []byte) ([]byte, error) {
	if len(raw) == KeyBytes {
		return raw, nil
	}
	t := string(bytes.TrimSpace(raw))
	for _, dec := range []func(string) ([]byte, error){base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString, hex.DecodeString} {
		if k, err := dec(t); err == nil && len(k) == KeyBytes {
			return k, nil
		}
	}
	return nil, fmt.Errorf("the file must hold %d random bytes, raw or as base64 or hex (openssl rand -base64 32 > FILE)", KeyBytes)
}

func newAEAD(key []byte) (cipher.AEAD, []byte, error) {
	if len(key) != KeyBytes {
		return nil, nil, fmt.Errorf("the secret key must be %d bytes, not %d", KeyBytes, len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, nil, err
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(append([]byte("zest secret key id\x00"), key...))
	return a, sum[:4], nil
}

// Seal encrypts plain with the current key, bound to aad (the server's id: a record moved to
// another server does not open).
func (k *Keyring) Seal(plain, aad []byte) ([]byte, error) {
	if k == nil {
		return nil, ErrNoSecretKey
	}
	out := make([]byte, 1+4+k.cur.NonceSize(), 1+4+k.cur.NonceSize()+len(plain)+k.cur.Overhead())
	out[0] = sealVersion
	copy(out[1:5], k.curID)
	if _, err := rand.Read(out[5:]); err != nil {
		return nil, err
	}
	return k.cur.Seal(out, out[5:], plain, aad), nil
}

// Open decrypts a record Seal made with either key. stale reports that it was the previous
// key's: the caller seals it again.
func (k *Keyring) Open(sealed, aad []byte) (plain []byte, stale bool, err error) {
	if k == nil {
		return nil, false, ErrNoSecretKey
	}
	if len(sealed) < 5 || sealed[0] != sealVersion {
		return nil, false, ErrUnseal
	}
	id, rest := sealed[1:5], sealed[5:]
	a := k.cur
	switch {
	case bytes.Equal(id, k.curID):
	case k.prev != nil && bytes.Equal(id, k.prevID):
		a, stale = k.prev, true
	default:
		return nil, false, fmt.Errorf("%w: it was sealed with another key (%s changed? set %s to the old key's file while rotating)", ErrUnseal, EnvSecretKeyFile, EnvSecretKeyPreviousFile)
	}
	if len(rest) < a.NonceSize() {
		return nil, false, ErrUnseal
	}
	plain, err = a.Open(nil, rest[:a.NonceSize()], rest[a.NonceSize():], aad)
	if err != nil {
		return nil, false, ErrUnseal
	}
	return plain, stale, nil
}
