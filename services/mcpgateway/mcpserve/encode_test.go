package mcpserve

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The spliced encoding of a tool result says exactly what encoding/json says.
func TestEncodeForMatchesEncode(t *testing.T) {
	res := mcp.NewToolResultText(`{"models":[]}`)
	res.RawStructuredContent = json.RawMessage(`{"models":[]}`)
	failing := mcp.NewToolResultError("no such model")
	awkward := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("<b>&\"é\u2028\n"), mcp.NewTextContent("")},
		RawStructuredContent: json.RawMessage(" { \"a\" : [1, 2] } ")}
	empty := &mcp.CallToolResult{}
	annotated := mcp.NewToolResultText("x")
	annotated.Content[0] = mcp.TextContent{Type: "text", Text: "x", Annotated: mcp.Annotated{Annotations: &mcp.Annotations{Priority: ptr(0.5)}}}
	image := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent("aGk=", "image/png")}}
	structured := mcp.NewToolResultText("y")
	structured.StructuredContent = map[string]any{"k": 1}
	for _, tc := range []struct {
		id     json.RawMessage
		reqID  any
		result any
	}{
		{json.RawMessage(`7`), int64(7), res},
		{json.RawMessage(`"abc-1"`), "abc-1", *res},
		{json.RawMessage(`8`), int64(8), failing},
		{json.RawMessage(`10`), int64(10), awkward},
		{json.RawMessage(`11`), int64(11), empty},
		{json.RawMessage(`12`), int64(12), annotated},                              // MarshalJSON's path
		{json.RawMessage(`13`), int64(13), image},                                  // MarshalJSON's path
		{json.RawMessage(`14`), int64(14), structured},                             // MarshalJSON's path
		{json.RawMessage(`9`), int64(9), mcp.ListToolsResult{Tools: []mcp.Tool{}}}, // not a tool result: the generic path
	} {
		if r, isTool := tc.result.(*mcp.CallToolResult); isTool {
			_, fast := appendToolResult(nil, r)
			if wantFast := r != annotated && r != image && r != structured; fast != wantFast {
				t.Fatalf("result %s: fast path %v, want %v", tc.id, fast, wantFast)
			}
		}
		msg := mcp.NewJSONRPCResultResponse(mcp.NewRequestId(tc.reqID), tc.result)
		got, err := encodeFor(tc.id, msg)
		if err != nil {
			t.Fatal(err)
		}
		want, err := encode(msg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) { // byte for byte, key order and escaping included
			t.Fatalf("encodeFor = %s\nencode    = %s", got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
