package registry

import (
	"bytes"
	"errors"
	"testing"
)

// testOAuthTokens checks the OAuthTokens contract on o, an empty store: records round-trip
// byte for byte (a sealed record is binary), replace, and delete (twice without error).
func testOAuthTokens(t *testing.T, o OAuthTokens) {
	ctx := t.Context()
	if _, err := o.GetOAuthToken(ctx, "up"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if err := o.PutOAuthToken(ctx, "", []byte{1}); err == nil {
		t.Fatal("a record without a server id was stored")
	}
	rec := []byte{1, 0, 0xff, 0x80, '\n', 0}
	if err := o.PutOAuthToken(ctx, "up", rec); err != nil {
		t.Fatal(err)
	}
	if got, err := o.GetOAuthToken(ctx, "up"); err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("get = %x, %v; want %x", got, err, rec)
	}
	if err := o.PutOAuthToken(ctx, "up", []byte{2}); err != nil {
		t.Fatal(err)
	}
	if got, err := o.GetOAuthToken(ctx, "up"); err != nil || !bytes.Equal(got, []byte{2}) {
		t.Fatalf("get after replace = %x, %v", got, err)
	}
	if _, err := o.GetOAuthToken(ctx, "up2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another server's record: %v", err)
	}
	// Listed by prefix: only the ids that start with it, with their records.
	for id, v := range map[string][]byte{"sign-in/a": {3}, "sign-in/b": {4}, "sign-inx": {5}} {
		if err := o.PutOAuthToken(ctx, id, v); err != nil {
			t.Fatal(err)
		}
	}
	got, err := o.ListOAuthTokens(ctx, "sign-in/")
	if err != nil || len(got) != 2 || !bytes.Equal(got["sign-in/a"], []byte{3}) || !bytes.Equal(got["sign-in/b"], []byte{4}) {
		t.Fatalf("list sign-in/ = %v, %v", got, err)
	}
	if got, err := o.ListOAuthTokens(ctx, "none/"); err != nil || len(got) != 0 {
		t.Fatalf("list none/ = %v, %v", got, err)
	}
	for range 2 {
		if err := o.DeleteOAuthToken(ctx, "up"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.GetOAuthToken(ctx, "up"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
}
