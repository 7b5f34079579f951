package mcpserve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/pins"
)

// A tool no listing showed (pins.StateUnlisted) is an unknown tool to an MCP client, as on
// every endpoint; a held one is an isError result that names how to accept it.
func TestToolRefusalOfPins(t *testing.T) {
	id := json.RawMessage(`7`)
	answer, ok := ToolRefusal(id, "steal", &pins.HeldError{Server: "rug", Tool: "steal", State: pins.StateUnlisted})
	if !ok || !strings.Contains(string(answer), `"code":-32602`) || !strings.Contains(string(answer), `Unknown tool \"steal\"`) {
		t.Fatalf("unlisted: %s, %v", answer, ok)
	}
	answer, ok = ToolRefusal(id, "echo", &pins.HeldError{Server: "rug", Tool: "echo", State: pins.StatePending})
	if !ok || !strings.Contains(string(answer), `"isError":true`) || !strings.Contains(string(answer), "zestctl servers pins accept rug echo") {
		t.Fatalf("held: %s, %v", answer, ok)
	}
}
