package session

import (
	"bytes"
	"errors"
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

// FuzzRelayAndState: OpenRelay and OpenState never panic and accept only the exact relay ids
// and requestStates this codec signed, for the session, server and method they were signed
// for; an altered, forged (another key) or hand-made one is refused with ErrInvalid.
func FuzzRelayAndState(f *testing.F) {
	c, err := NewCodec(bytes.Repeat([]byte{7}, 32), time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	other, _ := NewCodec(bytes.Repeat([]byte{8}, 32), time.Hour)
	now := time.Unix(1_800_000_000, 0)
	const sess, server, method = "session-a", "everything", "tools/call"
	relays := map[string]string{} // id → ref
	states := map[string]bool{}
	for _, ref := range []string{"t:0123456789abcdef", "h:7", "", "é\n."} {
		id := c.SignRelay(sess, server, ref)
		relays[id] = ref
		f.Add(id)
		f.Add(other.SignRelay(sess, server, ref))
		f.Add(c.SignRelay("session-b", server, ref))
		f.Add(id[:len(id)-1] + "A")
		f.Add(id + "=")
	}
	for _, st := range []InputState{
		{Server: server, Method: method, Call: "c1", Refs: map[string]string{"zest-1": "t:1"}, Expires: now.Unix() + 60},
		{Server: server, Method: method, Call: "c2", Expires: now.Unix() + 1},
		{Server: "other", Method: method, Call: "c3", Expires: now.Unix() + 60},
		{Server: server, Method: method, Call: "c4", Expires: now.Unix() - 1},
	} {
		s := c.SignState(st)
		if st.Server == server && st.Method == method && st.Expires >= now.Unix() {
			states[s] = true
		}
		f.Add(s)
		f.Add(other.SignState(st))
		f.Add("x" + s)
	}
	for _, s := range []string{"", "zr.", "zs.", "zr..", "zs..", "zr.e30.", "zs.e30.e30", "zs.bnVsbA." + strings.Repeat("A", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := c.OpenRelay(s, sess, server)
		if want, ok := relays[s]; ok {
			if err != nil || ref != want {
				t.Fatalf("OpenRelay(%q) = %q, %v; want %q", s, ref, err, want)
			}
		} else if err == nil || !errors.Is(err, ErrInvalid) || ref != "" {
			t.Fatalf("OpenRelay accepted %q (ref %q, err %v), an id this codec never signed for this session", s, ref, err)
		}
		st, err := c.OpenState(s, server, method, now)
		if states[s] {
			if err != nil {
				t.Fatalf("OpenState(%q): %v", s, err)
			}
		} else if err == nil || !errors.Is(err, ErrInvalid) || st.Call != "" {
			t.Fatalf("OpenState accepted %q (%+v, err %v), a state this codec never signed for this server and method", s, st, err)
		}
	})
}
