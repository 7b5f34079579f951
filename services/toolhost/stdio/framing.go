package stdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The stdio transport frames JSON-RPC messages as lines: one message, then "\n". Everything
// written to a child must therefore be one line of valid JSON, and everything read from it is
// classified by its members alone.

// appendRequest appends the framed request {jsonrpc, id, method, params} to dst. params must
// already be checked by normalizeParams.
func appendRequest(dst []byte, id int64, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"method":`...)
	dst = appendJSONString(dst, method)
	if len(params) > 0 {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, "}\n"...)
}

// appendJSONString appends s as a JSON string; s must be valid UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b, _ := json.Marshal(s) // escapes control characters, quotes and backslashes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// checkMethod refuses a method that cannot be sent as it is. The tool host relies on it: it
// has no check of its own.
func checkMethod(method string) error {
	if method == "" {
		return fmt.Errorf("%w: the method is empty; give one such as tools/call", ErrBadRequest)
	}
	if !utf8.ValidString(method) {
		return fmt.Errorf("%w: the method is not valid UTF-8", ErrBadRequest)
	}
	return nil
}

// normalizeParams returns params ready to be framed: nil when absent (empty or null), else a
// JSON object or array on one line. Valid JSON holds newlines only between tokens, so a
// pretty-printed value is compacted; anything that is not JSON is refused rather than written,
// as it would break the child's framing and leave the call without an answer.
func normalizeParams(params json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimSpace(params)
	if len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	if t[0] != '{' && t[0] != '[' {
		if !json.Valid(t) {
			return nil, fmt.Errorf("%w: params are not valid JSON (%q)", ErrBadRequest, truncate(t, 60))
		}
		return nil, fmt.Errorf("%w: params must be a JSON object or array, not %q", ErrBadRequest, truncate(t, 60))
	}
	if bytes.IndexByte(t, '\n') < 0 && bytes.IndexByte(t, '\r') < 0 {
		if !json.Valid(t) {
			return nil, fmt.Errorf("%w: params are not valid JSON (%q)", ErrBadRequest, truncate(t, 60))
		}
		return t, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(t))
	if err := json.Compact(&buf, t); err != nil {
		return nil, fmt.Errorf("%w: params are not valid JSON: %w", ErrBadRequest, err)
	}
	return buf.Bytes(), nil
}

// rewriteProgressToken replaces params._meta.progressToken with token and returns the
// caller's token (nil, and params unchanged, when there is none: params that are not an
// object have no _meta). params must come from normalizeParams: valid JSON, an object or an
// array.
func rewriteProgressToken(params json.RawMessage, token string) (json.RawMessage, json.RawMessage) {
	var p map[string]json.RawMessage
	if len(params) == 0 || params[0] != '{' || json.Unmarshal(params, &p) != nil {
		return params, nil
	}
	var meta map[string]json.RawMessage
	if raw, ok := p["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return params, nil
	}
	orig, ok := meta["progressToken"]
	if !ok {
		return params, nil
	}
	meta["progressToken"], _ = json.Marshal(token)
	p["_meta"], _ = json.Marshal(meta)
	out, _ := json.Marshal(p) // cannot fail: every value is valid JSON
	return out, orig
}

// kind is what a message from the child is.
type kind int

const (
	// kindResponse answers one of our requests (it has no "method").
	kindResponse kind = iota
	// kindRequest asks us something: a "method" and an id that is not null.
	kindRequest
	// kindNotification tells us something: a "method" and no id, or a null one.
	kindNotification
	// kindBadRequest has a "method" that is not a non-empty string: it is answered with
	// -32600 when it has an id, and dropped otherwise; it is never taken for a response.
	kindBadRequest
)

// inMsg is one JSON-RPC message from the child. Members are matched as encoding/json matches
// them (an exact name first, else case-insensitively).
type inMsg struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// hasID says whether the message carries an id other than null.
func (m *inMsg) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// classify decodes one message (a JSON object) from the child, in one pass (decodeMessage);
// the members of m are slices of one copy of raw, which the caller may reuse. A message with
// a "method" member is a request or a notification whatever its id, never a response. The
// error is a protocol failure: raw is not a JSON object.
func classify(raw []byte) (inMsg, string, kind, error) {
	m, ok := decodeMessage(raw)
	if !ok {
		return inMsg{}, "", 0, fmt.Errorf("%w: stdout line is not a JSON-RPC message (%q)", ErrProtocol, truncate(raw, 120))
	}
	if m.ID != nil || m.Method != nil || m.Params != nil || m.Result != nil || m.Error != nil {
		m = m.clone(raw)
	}
	if m.Method == nil {
		return m, "", kindResponse, nil
	}
	method, ok := methodName(m.Method)
	if !ok {
		return m, "", kindBadRequest, nil
	}
	if m.hasID() {
		return m, method, kindRequest, nil
	}
	return m, method, kindNotification, nil
}

// clone returns m with its members in one copy of raw, which they are slices of.
func (m inMsg) clone(raw []byte) inMsg {
	c := bytes.Clone(raw)
	in := func(member json.RawMessage) json.RawMessage {
		if member == nil {
			return nil
		}
		off := cap(raw) - cap(member)
		return c[off : off+len(member) : off+len(member)]
	}
	return inMsg{ID: in(m.ID), Method: in(m.Method), Params: in(m.Params), Result: in(m.Result), Error: in(m.Error)}
}

// methodName is the method a "method" member names: false when it is not a non-empty
// string.
func methodName(raw json.RawMessage) (string, bool) {
	if len(raw) < 3 || raw[0] != '"' {
		return "", false
	}
	if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), true
	}
	var method string
	if json.Unmarshal(raw, &method) != nil || method == "" {
		return "", false
	}
	return method, true
}

// responseError decodes the error member of a response (nil when there is none). A malformed
// error object still fails the call, with -32603 and what the child sent.
func responseError(raw json.RawMessage) *RPCError {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var e RPCError
	if err := json.Unmarshal(raw, &e); err != nil {
		return &RPCError{Code: -32603, Message: "the MCP server answered with a malformed JSON-RPC error", Data: bytes.Clone(raw)}
	}
	return &e
}
