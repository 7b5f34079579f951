package grpcdial

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// The calling policy of every connection Dial opens (its default service config; a service
// config a DNS TXT record carries is ignored):
//
//   - round_robin over the replicas whose gRPC health (service "", which lib/grpcserve sets
//     SERVING while it serves and NOT_SERVING as soon as it drains) answers SERVING. grpc-go's
//     least-loaded policy, least_request_experimental, is experimental (its name and config may
//     change), and weighted_round_robin needs every server to send ORCA load reports; Zest's
//     calls are short or streamed, and round robin over healthy replicas spreads them well.
//   - A call that failed with UNAVAILABLE is sent again (up to RetryAttempts in all, after
//     RetryBackoff or less) only when its method is in the table below as safe: a read. Nothing
//     that runs a tool, a chat, a model or an MCP exchange, and no write, is ever sent twice.
//   - gRPC's transparent retry stays on for every method: it resends a call only when the call
//     never reached a server (the connection failed before its headers were written, or the
//     server refused the stream unread: GOAWAY, REFUSED_STREAM), so the server never saw it.

// RetryAttempts is how many times in all a safe call is sent when it fails with UNAVAILABLE.
const RetryAttempts = 3

// RetryBackoff is the longest wait before a retry (the first waits up to half of it).
const RetryBackoff = 100 * time.Millisecond

// methods classifies every method of every Zest service (and gRPC health's Check): retry says
// whether a call that failed with UNAVAILABLE — its replica died or became unreachable, maybe
// while the call ran there — may be sent again to another replica. why says why. A new method
// must be added here (TestEveryMethodIsClassified fails until it is).
var methods = []struct {
	name  string
	retry bool
	why   string
}{
	{"/grpc.health.v1.Health/Check", true, "reads the server's health"},

	{"/zest.inference.v1.InferenceService/ListModels", true, "reads the model list"},
	{"/zest.inference.v1.InferenceService/GetModel", true, "reads one model"},
	{"/zest.inference.v1.InferenceService/ListReplicas", true, "reads the engine replicas' state"},
	{"/zest.inference.v1.InferenceService/Chat", false, "runs a model generation"},
	{"/zest.inference.v1.InferenceService/Transcribe", false, "runs a model"},
	{"/zest.inference.v1.InferenceService/GenerateImage", false, "runs a model generation"},
	{"/zest.inference.v1.MediaService/Speech", false, "runs a model generation"},
	{"/zest.inference.v1.MediaService/StreamSpeech", false, "runs a model generation"},
	{"/zest.inference.v1.MediaService/GenerateAudio", false, "runs a model generation"},
	{"/zest.inference.v1.MediaService/EditImage", false, "runs a model generation"},
	{"/zest.inference.v1.MediaService/Generate3D", false, "runs a model generation"},
	{"/zest.inference.v1.ModelAdminService/Stats", true, "reads counters"},
	{"/zest.inference.v1.ModelAdminService/SystemInfo", true, "reads the node's host and engines"},
	{"/zest.inference.v1.ModelAdminService/LoadedModels", true, "reads the loaded models"},
	{"/zest.inference.v1.ModelAdminService/Load", false, "writes: loads (and may download) a model"},
	{"/zest.inference.v1.ModelAdminService/Unload", false, "writes: unloads models"},
	{"/zest.inference.v1.ModelAdminService/Pull", false, "writes: downloads a model"},
	{"/zest.inference.v1.ModelAdminService/Delete", false, "writes: deletes a model"},
	{"/zest.inference.v1.ModelAdminService/Pin", true, "writes a mark: a second send sets the same mark"},
	{"/zest.inference.v1.ModelOptionsService/GetModelOptions", true, "reads a model's settings"},
	{"/zest.inference.v1.TextService/Embeddings", false, "runs a model (no side effect, but a model run is never doubled)"},
	{"/zest.inference.v1.TextService/Completions", false, "runs a model generation"},
	{"/zest.inference.v1.TextService/Responses", false, "runs a model generation"},

	{"/zest.mcpgateway.v1.AdminService/ListServers", true, "reads the registry and the catalog"},
	{"/zest.mcpgateway.v1.AdminService/ListTools", true, "reads the catalog"},
	{"/zest.mcpgateway.v1.AdminService/GetServer", true, "reads the registry, the catalog and the tool host's process state"},
	{"/zest.mcpgateway.v1.AdminService/ListPresets", true, "reads the registry"},
	{"/zest.mcpgateway.v1.AdminService/GetPreset", true, "reads the registry"},
	{"/zest.mcpgateway.v1.AdminService/ListActivity", true, "reads the answering replica's ring (each keeps its own)"},
	{"/zest.mcpgateway.v1.AdminService/UpsertServer", false, "writes the registry"},
	{"/zest.mcpgateway.v1.AdminService/UpdateServer", false, "writes the registry"},
	{"/zest.mcpgateway.v1.AdminService/DeleteServer", false, "writes the registry"},
	{"/zest.mcpgateway.v1.AdminService/UpsertPreset", false, "writes the registry"},
	{"/zest.mcpgateway.v1.AdminService/DeletePreset", false, "writes the registry"},
	{"/zest.mcpgateway.v1.AdminService/TestServer", false, "launches or connects a server"},
	{"/zest.mcpgateway.v1.AdminService/ConnectServer", false, "connects a server (may launch it)"},
	{"/zest.mcpgateway.v1.AdminService/DisconnectServer", false, "disconnects a server"},
	{"/zest.mcpgateway.v1.AdminService/RefreshTools", false, "asks a server again and changes the catalog"},
	{"/zest.mcpgateway.v1.AdminService/CallTool", false, "runs a tool: never twice"},
	{"/zest.mcpgateway.v1.AdminService/ListApprovals", true, "reads the registry"},
	{"/zest.mcpgateway.v1.AdminService/ListAudit", true, "reads the registry"},
	{"/zest.mcpgateway.v1.AdminService/ExportAudit", true, "reads the registry (a stream is retried only before its first message)"},
	{"/zest.mcpgateway.v1.AdminService/ApproveToolCall", false, "decides an approval (a waiting tool call runs): a second send would answer that it is decided"},
	{"/zest.mcpgateway.v1.AdminService/DenyToolCall", false, "decides an approval: a second send would answer that it is decided"},
	{"/zest.mcpgateway.v1.AdminService/ListToolPins", true, "reads the registry"},
	{"/zest.mcpgateway.v1.RegistryService/SearchRegistry", true, "reads the MCP Registry; saves nothing"},
	{"/zest.mcpgateway.v1.RegistryService/PlanInstall", true, "reads the MCP Registry; saves nothing"},
	{"/zest.mcpgateway.v1.AdminService/AcceptToolPins", false, "decides held tool definitions: a second send would answer that nothing is held"},
	{"/zest.mcpgateway.v1.AdminService/RefuseToolPins", false, "decides held tool definitions: a second send would answer that nothing is pending"},
	{"/zest.mcpgateway.v1.AdminService/RecordEdgeChange", false, "writes the audit trail: a second send would record the change twice"},
	{"/zest.mcpgateway.v1.ChatService/Chat", false, "runs a model and tools"},
	{"/zest.mcpgateway.v1.HttpService/Exchange", false, "carries the MCP endpoints' requests (a tool call, a session's stream, its end)"},
	// McpService ends sessions from outside (zestctl); MCP's transport calls its endpoints
	// in-process, through no gRPC contract.
	{"/zest.mcpgateway.v1.McpService/EndSession", false, "writes: ends a session"},
	// Signing Zest in to an upstream by OAuth (oauth.proto).
	{"/zest.mcpgateway.v1.UpstreamOAuthService/StartSignIn", false, "starts a sign-in (and may register a client): a second send would start another"},
	{"/zest.mcpgateway.v1.UpstreamOAuthService/FinishSignIn", false, "uses the state and the code once: a second send is refused as used"},
	{"/zest.mcpgateway.v1.UpstreamOAuthService/SignOut", false, "writes: forgets the server's tokens (and audits it)"},

	{"/zest.toolhost.v1.ToolHostService/GetStatus", true, "reads a server's process state"},
	{"/zest.toolhost.v1.ToolHostService/ListServers", true, "reads the supervised servers"},
	{"/zest.toolhost.v1.ToolHostService/ListTools", false, "starts a server that never ran"},
	{"/zest.toolhost.v1.ToolHostService/EnsureStarted", false, "launches a process"},
	{"/zest.toolhost.v1.ToolHostService/Stop", false, "stops a process"},
	{"/zest.toolhost.v1.ToolHostService/Call", false, "runs a tool: never twice"},
	{"/zest.toolhost.v1.ToolHostService/CallStream", false, "runs a tool: never twice"},
	{"/zest.toolhost.v1.ToolHostService/Watch", false, "a stream: the watcher opens it again itself"},
	{"/zest.toolhost.v1.ToolHostService/Answer", false, "writes a client's answer to a child: twice would answer twice"},
	{"/zest.toolhost.v1.ToolHostService/Resume", false, "goes on with a parked tool call"},
	{"/zest.toolhost.v1.ToolHostService/Describe", true, "reads the tool host's name and process"},
}

// Retryable reports whether method ("/package.Service/Method") is retried on UNAVAILABLE.
func Retryable(method string) bool {
	for _, m := range methods {
		if m.name == method {
			return m.retry
		}
	}
	return false
}

// serviceConfig is the default service config of every connection (see the policy above).
var serviceConfig = func() string {
	type name struct {
		Service string `json:"service"`
		Method  string `json:"method"`
	}
	var names []name
	for _, m := range methods {
		if m.retry {
			svc, meth, _ := strings.Cut(strings.TrimPrefix(m.name, "/"), "/")
			names = append(names, name{svc, meth})
		}
	}
	cfg := map[string]any{
		"loadBalancingConfig": []any{map[string]any{"round_robin": map[string]any{}}},
		"healthCheckConfig":   map[string]any{"serviceName": ""},
		"methodConfig": []any{map[string]any{
			"name": names,
			"retryPolicy": map[string]any{
				"maxAttempts":          RetryAttempts,
				"initialBackoff":       durationJSON(RetryBackoff / 2),
				"maxBackoff":           durationJSON(RetryBackoff),
				"backoffMultiplier":    2,
				"retryableStatusCodes": []string{"UNAVAILABLE"},
			},
		}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// durationJSON writes d as a service config's duration ("0.05s").
func durationJSON(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}
