package mcpserve

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The spliced encoding of a tool result says exactly what encoding/json says.
func TestEncodeForMatchesEncode(t *testing.T) {
	res := mcp.NewToolResultText(`{"models":[]}`)
	res.RawStructuredContent = json.RawMessage(`{"models":[]}`)
	failing := mcp.NewToolResultError("no such model")
	for _, tc := range []struct {
		id     json.RawMessage
		reqID  any
		result any
	}{
		{json.RawMessage(`7`), int64(7), res},
		{json.RawMessage(`"abc-1"`), "abc-1", *res},
		{json.RawMessage(`8`), int64(8), failing},
		{json.RawMessage(`9`), int64(9), mcp.ListToolsResult{Tools: []mcp.Tool{}}}, // not a tool result: the generic path
	} {
		msg := mcp.NewJSONRPCResultResponse(mcp.NewRequestId(tc.reqID), tc.result)
		got, err := encodeFor(tc.id, msg)
		if err != nil {
			t.Fatal(err)
		}
		want, err := encode(msg)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: not JSON: %v", got, err)
		}
		json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("encodeFor = %s\nencode    = %s", got, want)
		}
	}
}
