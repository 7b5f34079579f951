package session

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRequestState: a requestState opens on any codec of the same key, for the server and
// method it was issued for, until it expires; anything else is ErrInvalid.
func TestRequestState(t *testing.T) {
	c, _ := NewCodec(bytes.Repeat([]byte{7}, 32), time.Hour)
	now := time.Unix(1_800_000_000, 0)
	st := InputState{Server: "fx", Method: "tools/call", Call: "t:abc", Refs: map[string]string{"r1": "t:0123"}, Expires: now.Unix() + 60}
	s := c.SignState(st)
	if !strings.HasPrefix(s, StatePrefix) {
		t.Fatalf("state %q", s)
	}
	replica, _ := NewCodec(bytes.Repeat([]byte{7}, 32), time.Hour)
	got, err := replica.OpenState(s, "fx", "tools/call", now)
	if err != nil || got.Call != "t:abc" || got.Refs["r1"] != "t:0123" {
		t.Fatalf("OpenState = %+v, %v", got, err)
	}
	other, _ := NewCodec(bytes.Repeat([]byte{8}, 32), time.Hour)
	for name, check := range map[string]func() error{
		"another server": func() error { _, err := c.OpenState(s, "other", "tools/call", now); return err },
		"another method": func() error { _, err := c.OpenState(s, "fx", "prompts/get", now); return err },
		"another key":    func() error { _, err := other.OpenState(s, "fx", "tools/call", now); return err },
		"expired":        func() error { _, err := c.OpenState(s, "fx", "tools/call", now.Add(61*time.Second)); return err },
		"altered":        func() error { _, err := c.OpenState(s[:len(s)-2]+"AA", "fx", "tools/call", now); return err },
		"an upstream's":  func() error { _, err := c.OpenState("opaque", "fx", "tools/call", now); return err },
		"a relay id": func() error {
			_, err := c.OpenState(c.SignRelay("s", "fx", "t:1"), "fx", "tools/call", now)
			return err
		},
	} {
		if err := check(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
}
