package mcpserve

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Batch answers a JSON-RPC batch body as every endpoint of this transport does (/mcp,
// /mcp/servers/{id}, /mcp/presets/{id}): accepted only in a session that negotiated
// 2025-03-26, each item checked as a message of its own, initialize refused inside it.
// session checks the request's session and returns the version it negotiated; answer answers
// one valid item (nil for a notification or a response), or fails the whole exchange. The
// result is the final message (nil: nothing to answer) and whether it answers a batch that
// could not be accepted (HTTP 400).
func Batch(payload []byte, session func() (string, error), answer func(item []byte, msg Message) ([]byte, error)) (final []byte, malformed bool, err error) {
	var items []json.RawMessage
	if err := json.Unmarshal(payload, &items); err != nil {
		return errorResponse(nil, mcp.PARSE_ERROR, "Parse error: the body is not valid JSON"), true, nil
	}
	version, err := session()
	if err != nil {
		return nil, false, err
	}
	if version != "2025-03-26" || len(items) == 0 {
		return errorResponse(nil, mcp.INVALID_REQUEST, "Invalid Request: JSON-RPC batches are accepted only in sessions that negotiated 2025-03-26"), true, nil
	}
	var out []json.RawMessage
	for _, item := range items {
		env, code, problem := checkEnvelope(item)
		if problem != "" {
			if code == mcp.PARSE_ERROR { // valid JSON as a whole: the item is just not an object
				code, problem = mcp.INVALID_REQUEST, "Invalid Request: a batch item must be a JSON-RPC object"
			}
			out = append(out, errorResponse(env.ID, code, problem))
			continue
		}
		if env.Method == string(mcp.MethodInitialize) {
			out = append(out, errorResponse(env.ID, mcp.INVALID_REQUEST, "Invalid Request: initialize must not be part of a batch"))
			continue
		}
		resp, err := answer(item, Message(env))
		if err != nil {
			return nil, false, err
		}
		if resp != nil {
			out = append(out, resp)
		}
	}
	if len(out) == 0 {
		return nil, false, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, false, status.Error(codes.Internal, err.Error())
	}
	return b, false, nil
}
