package edge

import (
	"strings"
	"testing"
)

// TestServiceAddrsTakeReplicas: ZEST_MCPGATEWAY_ADDR and ZEST_INFERENCE_ADDR are each one
// address, a list or dns:///; a bad one is refused naming its flag and the forms.
func TestServiceAddrsTakeReplicas(t *testing.T) {
	for _, c := range []struct {
		mcpgw, inference string
		bad              string // the flag the error names; "" when valid
	}{
		{"127.0.0.1:13311", "127.0.0.1:13310", ""},
		{"10.0.0.1:13311,10.0.0.2:13311", "dns:///inference.zest:13310", ""},
		{"10.0.0.1:13311,10.0.0.1:13311", "127.0.0.1:13310", "mcpgateway-addr"},
		{"127.0.0.1:13311", "dns:///inference", "inference-addr"},
	} {
		cfg := DefaultConfig()
		cfg.McpgatewayAddr, cfg.InferenceAddr = c.mcpgw, c.inference
		err := cfg.Validate()
		if c.bad == "" && err != nil || c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad+" ") || !strings.Contains(err.Error(), "dns:///name:port")) {
			t.Errorf("%q %q: %v", c.mcpgw, c.inference, err)
		}
	}
}
