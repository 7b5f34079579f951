package session

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// StatePrefix starts a requestState Zest issues (see SignState); a requestState without it
// is an upstream's own, passed on as it came.
const StatePrefix = "zs."

// InputState is what the requestState of an input_required result Zest gives a client of
// MCP 2026-07-28 names: the upstream call waiting for the client's answers and the upstream's
// requests it answers, by the inputRequests keys.
type InputState struct {
	// Server is the registry id of the server the state was issued for.
	Server string `json:"s"`
	// Method is the request's method.
	Method string `json:"m"`
	// Call names the waiting call (upstream.InputRequiredError.Call).
	Call string `json:"c"`
	// Refs are the upstream requests' refs by inputRequests key.
	Refs map[string]string `json:"r"`
	// Expires is when the state stops being taken (Unix seconds).
	Expires int64 `json:"e"`
}

// SignState returns st as a requestState: its JSON and an HMAC with the session key, so that
// any replica can check it and no client can name another call.
func (c *Codec) SignState(st InputState) string {
	b, _ := json.Marshal(st)
	body := enc.EncodeToString(b)
	return StatePrefix + body + "." + enc.EncodeToString(c.signState(body))
}

// OpenState checks a requestState against the server and method of the request that carries
// it and the time, and returns what it names.
func (c *Codec) OpenState(state, server, method string, now time.Time) (InputState, error) {
	rest, ok := strings.CutPrefix(state, StatePrefix)
	body, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || !hmac.Equal([]byte(sig), []byte(enc.EncodeToString(c.signState(body)))) {
		return InputState{}, invalidState("requestState was not issued by this gateway (or was altered)")
	}
	raw, err := enc.DecodeString(body)
	var st InputState
	if err != nil || json.Unmarshal(raw, &st) != nil {
		return InputState{}, invalidState("requestState is malformed")
	}
	if st.Server != server || st.Method != method {
		return InputState{}, invalidState(fmt.Sprintf("requestState was issued for %s of MCP server %q, not %s of %q", st.Method, st.Server, method, server))
	}
	if now.Unix() > st.Expires {
		return InputState{}, invalidState("requestState expired at " + time.Unix(st.Expires, 0).UTC().Format(time.RFC3339) + "; send the request again without it")
	}
	return st, nil
}

func (c *Codec) signState(body string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("zest-mcp-request-state\n"))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// invalidState is a requestState that is not taken: an ErrInvalid with its own text.
type invalidState string

func (e invalidState) Error() string      { return string(e) }
func (invalidState) Is(target error) bool { return target == ErrInvalid }
