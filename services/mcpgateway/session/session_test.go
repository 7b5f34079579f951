package session

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestIssueParse(t *testing.T) {
	c, err := NewCodec(bytes.Repeat([]byte{7}, 32), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Issue("2025-06-18")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := c.Parse(id)
	if err != nil || cl.ProtocolVersion != "2025-06-18" {
		t.Fatalf("Parse = %+v, %v", cl, err)
	}
	id2, _ := c.Issue("2025-06-18")
	if id == id2 {
		t.Fatal("two sessions got the same id")
	}

	other, _ := NewCodec(bytes.Repeat([]byte{8}, 32), time.Hour)
	if _, err := other.Parse(id); !errors.Is(err, ErrInvalid) {
		t.Fatalf("foreign key: %v", err)
	}
	body, sig, _ := strings.Cut(id, ".")
	for name, bad := range map[string]string{
		"no dot": body, "altered body": "x" + body + "." + sig, "empty": "", "garbage": "a.b",
	} {
		if _, err := c.Parse(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}

	c.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := c.Parse(id); !errors.Is(err, ErrExpired) {
		t.Fatalf("old id: %v", err)
	}
}

func TestNewCodecRefusesShortKey(t *testing.T) {
	if _, err := NewCodec([]byte("short"), 0); err == nil {
		t.Fatal("want an error")
	}
}

func TestLoadOrCreateKeyPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d", "session.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second load = %x, %v; want the same key", k2, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
}

// The cache of verified ids stays bounded, and ids keep parsing after it is emptied.
func TestVerifiedCacheIsBounded(t *testing.T) {
	c, _ := NewCodec(bytes.Repeat([]byte{7}, 32), time.Hour)
	var first string
	for i := range verifiedCap + 10 {
		id, err := c.Issue("2025-11-25")
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = id
		}
		if _, err := c.Parse(id); err != nil {
			t.Fatal(err)
		}
		if n := len(c.verified); n > verifiedCap {
			t.Fatalf("%d cached ids, cap %d", n, verifiedCap)
		}
	}
	if _, err := c.Parse(first); err != nil {
		t.Fatalf("an id dropped from the cache: %v", err)
	}
}

// TestServerBinding: an id issued for a server carries it, an id of /mcp carries none, and
// neither can be turned into the other without breaking the signature.
func TestServerBinding(t *testing.T) {
	c, _ := NewCodec(bytes.Repeat([]byte{7}, 32), time.Hour)
	own, _ := c.Issue("2025-11-25")
	bound, err := c.IssueFor("2025-06-18", "everything")
	if err != nil {
		t.Fatal(err)
	}
	if cl, err := c.Parse(own); err != nil || cl.Server != "" {
		t.Fatalf("own /mcp id: %+v, %v", cl, err)
	}
	cl, err := c.Parse(bound)
	if err != nil || cl.Server != "everything" || cl.ProtocolVersion != "2025-06-18" {
		t.Fatalf("bound id: %+v, %v", cl, err)
	}
	// Re-encode the claims for another server and keep the old signature: refused.
	_, sig, _ := strings.Cut(bound, ".")
	forged := Claims{ProtocolVersion: cl.ProtocolVersion, IssuedAt: cl.IssuedAt, Nonce: cl.Nonce, Server: "other"}
	other, _ := c.encode(forged)
	body, _, _ := strings.Cut(other, ".")
	if _, err := c.Parse(body + "." + sig); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a server swapped under the old signature: %v", err)
	}
}
