package session

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// FuzzSessionID: Parse never panics, and accepts no id but the exact strings this codec
// issued; an altered, forged (another key) or hand-made id is refused. Run it with
// `go test -run '^$' -fuzz FuzzSessionID -fuzztime 60s ./session/`.
func FuzzSessionID(f *testing.F) {
	issuedAt := time.Unix(1_800_000_000, 0)
	c, err := NewCodec(bytes.Repeat([]byte{7}, 32), time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	c.now = func() time.Time { return issuedAt }
	other, _ := NewCodec(bytes.Repeat([]byte{8}, 32), time.Hour)
	other.now = c.now

	// The ids are made with fixed nonces (Issue draws random ones): the fuzzing engine runs
	// this function in several processes, and each must know the same issued ids.
	issued := map[string]bool{}
	for i, v := range []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", ""} {
		cl := Claims{ProtocolVersion: v, IssuedAt: issuedAt.Unix(), Nonce: strings.Repeat(string(rune('a'+i)), 16)}
		id, err := c.encode(cl)
		if err != nil {
			f.Fatal(err)
		}
		issued[id] = true
		f.Add(id)
		body, sig, _ := strings.Cut(id, ".")
		f.Add(body)                                    // no signature
		f.Add(body + ".")                              // empty signature
		f.Add(id[:len(id)-1] + "V")                    // last character changed (unused low bits)
		f.Add(body + "." + sig[:10] + "\n" + sig[10:]) // a line break base64 would skip
		f.Add("x" + id)                                // altered body
		f.Add(body + "." + sig + "=")                  // padding
		forged, _ := other.Issue(v)                    // signed with another key
		f.Add(forged)
	}
	for _, s := range []string{"", ".", "..", "a.b", "e30.", "e30.e30", strings.Repeat("A", 4096) + "." + strings.Repeat("A", 43), "\x00.\xff", "é.ü"} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, id string) {
		cl, err := c.Parse(id)
		if err != nil {
			if cl != (Claims{}) {
				t.Fatalf("Parse(%q) failed (%v) but returned claims %+v", id, err, cl)
			}
			return
		}
		if !issued[id] {
			t.Fatalf("Parse accepted %q, an id this codec never issued (claims %+v)", id, cl)
		}
		if cl.IssuedAt != issuedAt.Unix() {
			t.Fatalf("claims of %q: %+v", id, cl)
		}
	})
}
