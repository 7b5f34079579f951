package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// OAuthTokens keeps the OAuth tokens Zest holds for its upstream servers, one record per
// server id, as the caller gives it: sealed (services/mcpgateway/oauthclient encrypts them with
// the key of ZEST_SECRET_KEY_FILE before they reach a store; no store sees a token in the
// clear). Both stores implement it; bbolt creates its bucket on the first write, so a registry
// file needs no new schema version for it (an older build ignores the bucket).
type OAuthTokens interface {
	// PutOAuthToken stores (replaces) the sealed record of server id.
	PutOAuthToken(ctx context.Context, id string, sealed []byte) error
	// GetOAuthToken returns the sealed record of server id, or ErrNotFound.
	GetOAuthToken(ctx context.Context, id string) ([]byte, error)
	// DeleteOAuthToken forgets the record of server id (none: no error).
	DeleteOAuthToken(ctx context.Context, id string) error
	// ListOAuthTokens returns the records whose id starts with prefix, by id (the sign-ins in
	// progress, which their owner sweeps once expired).
	ListOAuthTokens(ctx context.Context, prefix string) (map[string][]byte, error)
}

var bucketOAuthTokens = []byte("oauth_tokens")

// dirOAuthTokens holds the etcd records: oauth_tokens/<server id>.
const dirOAuthTokens = "oauth_tokens/"

func checkTokenID(id string) error {
	if id == "" {
		return errors.New("oauth token: the server id is empty")
	}
	return nil
}

// PutOAuthToken implements OAuthTokens.
func (b *Bolt) PutOAuthToken(_ context.Context, id string, sealed []byte) error {
	if err := checkTokenID(id); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketOAuthTokens)
		if err != nil {
			return err
		}
		return bk.Put([]byte(id), sealed)
	})
}

// GetOAuthToken implements OAuthTokens.
func (b *Bolt) GetOAuthToken(_ context.Context, id string) ([]byte, error) {
	var out []byte
	err := b.db.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(bucketOAuthTokens); bk != nil {
			if v := bk.Get([]byte(id)); v != nil {
				out = append([]byte(nil), v...)
			}
		}
		return nil
	})
	if err == nil && out == nil {
		err = fmt.Errorf("oauth token of server %q: %w", id, ErrNotFound)
	}
	return out, err
}

// DeleteOAuthToken implements OAuthTokens.
func (b *Bolt) DeleteOAuthToken(_ context.Context, id string) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(bucketOAuthTokens); bk != nil {
			return bk.Delete([]byte(id))
		}
		return nil
	})
}

// ListOAuthTokens implements OAuthTokens.
func (b *Bolt) ListOAuthTokens(_ context.Context, prefix string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketOAuthTokens)
		if bk == nil {
			return nil
		}
		c := bk.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			out[string(k)] = append([]byte(nil), v...)
		}
		return nil
	})
	return out, err
}

// PutOAuthToken implements OAuthTokens.
func (e *Etcd) PutOAuthToken(ctx context.Context, id string, sealed []byte) error {
	if err := checkTokenID(id); err != nil {
		return err
	}
	return e.put(ctx, "put oauth token "+id, dirOAuthTokens+id, string(sealed))
}

// GetOAuthToken implements OAuthTokens.
func (e *Etcd) GetOAuthToken(ctx context.Context, id string) ([]byte, error) {
	v, err := e.get(ctx, "get oauth token "+id, dirOAuthTokens+id)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("oauth token of server %q: %w", id, ErrNotFound)
	}
	return v, nil
}

// DeleteOAuthToken implements OAuthTokens.
func (e *Etcd) DeleteOAuthToken(ctx context.Context, id string) error {
	err := e.delete(ctx, "oauth token", dirOAuthTokens, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// ListOAuthTokens implements OAuthTokens.
func (e *Etcd) ListOAuthTokens(ctx context.Context, prefix string) (map[string][]byte, error) {
	kvs, err := e.list(ctx, "list oauth tokens "+prefix, dirOAuthTokens+prefix)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(kvs))
	for _, kv := range kvs {
		out[strings.TrimPrefix(string(kv.Key), e.prefix+dirOAuthTokens)] = kv.Value
	}
	return out, nil
}
