package session

import (
	"crypto/hmac"
	"crypto/sha256"
	"strings"
)

// RelayPrefix starts the JSON-RPC id of a request relayed from a server to a session's
// client (see SignRelay).
const RelayPrefix = "zr."

// SignRelay returns the JSON-RPC id under which a server's request, known upstream as ref, is
// sent to the client of session sessionID of server: the ref and a signature binding it to
// the session and the server, so that the client's answer can be checked by any replica
// and no other session's answer is taken for it.
func (c *Codec) SignRelay(sessionID, server, ref string) string {
	body := enc.EncodeToString([]byte(ref))
	return RelayPrefix + body + "." + enc.EncodeToString(c.signRelay(sessionID, server, body))
}

// OpenRelay checks a relay id against the session and the server the answer came for, and
// returns its ref.
func (c *Codec) OpenRelay(id, sessionID, server string) (string, error) {
	rest, ok := strings.CutPrefix(id, RelayPrefix)
	if !ok {
		return "", ErrInvalid
	}
	body, sig, ok := strings.Cut(rest, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(enc.EncodeToString(c.signRelay(sessionID, server, body)))) {
		return "", ErrInvalid
	}
	ref, err := enc.DecodeString(body)
	if err != nil {
		return "", ErrInvalid
	}
	return string(ref), nil
}

func (c *Codec) signRelay(sessionID, server, body string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("zest-mcp-relay\n" + sessionID + "\n" + server + "\n"))
	m.Write([]byte(body))
	return m.Sum(nil)
}
