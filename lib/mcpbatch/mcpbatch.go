// Package mcpbatch is the budget of a JSON-RPC batch, which MCP 2025-03-26 lets a client send
// in one POST: the most messages one may hold, and a count of them taken from the body without
// decoding it. The edge counts each message against its caller's limits and refuses a longer
// batch before any service reads it; mcpgateway refuses it too, for its gRPC callers.
package mcpbatch

import "fmt"

// MaxMessages is the most messages one batch may hold: tens are plenty for a client that
// groups what it would otherwise send one by one, and it bounds what one request may make
// mcpgateway do (every message runs in turn, each answer kept until the batch is answered).
const MaxMessages = 50

// TooLong is the JSON-RPC error message of a batch of n > MaxMessages messages.
func TooLong(n int) string {
	return fmt.Sprintf("Invalid Request: a JSON-RPC batch holds at most %d messages; this one holds %d: send them in several batches (or one by one)", MaxMessages, n)
}

// Count reports whether body is a batch — its first byte other than JSON white space is '['
// — and how many elements its outer array holds, found by scanning (strings and nesting
// followed, nothing decoded or allocated). For a body that is not valid JSON the count is a
// guess that the parser's refusal makes moot.
func Count(body []byte) (n int, batch bool) {
	i := 0
	for i < len(body) && isSpace(body[i]) {
		i++
	}
	if i == len(body) || body[i] != '[' {
		return 0, false
	}
	depth, inString, escaped, pending := 0, false, false, false
	for _, c := range body[i:] {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
			if depth == 1 {
				pending = true
			}
		case c == '[' || c == '{':
			if depth == 1 {
				pending = true
			}
			depth++
		case c == ']' || c == '}':
			depth--
			if depth == 0 {
				if pending {
					n++
				}
				return n, true
			}
		case depth == 1 && c == ',':
			n++
			pending = false
		case depth == 1 && !isSpace(c):
			pending = true // a number, true, false or null
		}
	}
	if pending {
		n++
	}
	return n, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
