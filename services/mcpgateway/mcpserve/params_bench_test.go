package mcpserve

import "testing"

// BenchmarkCheckMessageAndParams is the decoding /mcp/servers/{id} does of a tools/call
// before it forwards it (go test -bench CheckMessageAndParams ./mcpserve/).
func BenchmarkCheckMessageAndParams(b *testing.B) {
	payload := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"bench"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		m, _, _ := CheckMessage(payload)
		_, _ = Params(payload, m)
	}
}
