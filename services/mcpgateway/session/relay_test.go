package session

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRelayIDs(t *testing.T) {
	c, _ := NewCodec(bytes.Repeat([]byte{7}, 32), time.Hour)
	id := c.SignRelay("sess-a", "fx", "t:0123abcd")
	if !strings.HasPrefix(id, RelayPrefix) {
		t.Fatalf("id %q", id)
	}
	ref, err := c.OpenRelay(id, "sess-a", "fx")
	if err != nil || ref != "t:0123abcd" {
		t.Fatalf("OpenRelay = %q, %v", ref, err)
	}
	other, _ := NewCodec(bytes.Repeat([]byte{8}, 32), time.Hour)
	body, _, _ := strings.Cut(strings.TrimPrefix(id, RelayPrefix), ".")
	forged := RelayPrefix + base64.RawURLEncoding.EncodeToString([]byte("t:ffff")) + "." + strings.SplitN(id, ".", 3)[2]
	for name, check := range map[string]func() (string, error){
		"another session":  func() (string, error) { return c.OpenRelay(id, "sess-b", "fx") },
		"another server":   func() (string, error) { return c.OpenRelay(id, "sess-a", "other") },
		"another key":      func() (string, error) { return other.OpenRelay(id, "sess-a", "fx") },
		"another ref":      func() (string, error) { return c.OpenRelay(forged, "sess-a", "fx") },
		"no signature":     func() (string, error) { return c.OpenRelay(RelayPrefix+body, "sess-a", "fx") },
		"not a relay id":   func() (string, error) { return c.OpenRelay("42", "sess-a", "fx") },
		"a session id too": func() (string, error) { s, _ := c.IssueFor("2025-11-25", "fx"); return c.OpenRelay(s, "sess-a", "fx") },
	} {
		if ref, err := check(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %q, %v; want ErrInvalid", name, ref, err)
		}
	}
}

// TestRelaysClaim: the claim is kept, and an id issued before it existed still parses (with
// nothing relayed).
func TestRelaysClaim(t *testing.T) {
	c, _ := NewCodec(bytes.Repeat([]byte{7}, 32), time.Hour)
	id, _ := c.IssueWith("2025-11-25", "fx", "se")
	if cl, err := c.Parse(id); err != nil || cl.Relays != "se" || cl.Server != "fx" {
		t.Fatalf("Parse = %+v, %v", cl, err)
	}
	old, _ := json.Marshal(map[string]any{"v": "2025-11-25", "t": time.Now().Unix(), "n": "abc", "s": "fx"})
	body := base64.RawURLEncoding.EncodeToString(old)
	oldID := body + "." + base64.RawURLEncoding.EncodeToString(c.sign(body))
	if cl, err := c.Parse(oldID); err != nil || cl.Relays != "" || cl.Server != "fx" {
		t.Fatalf("an id of before: %+v, %v", cl, err)
	}
}
