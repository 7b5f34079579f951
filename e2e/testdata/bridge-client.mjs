// The official TypeScript SDK as a session-era MCP client that accepts sampling and
// elicitation: it answers sampling/createMessage with a text of its own and elicitation/create
// by accepting with {"topic":"zest"}, calls one tool of a registered server through
// /mcp/servers/{id}, and prints one JSON line with the tool's result and the requests it got.
// Usage: node bridge-client.mjs URL API_KEY TOOL ARGUMENTS_JSON
import { createRequire } from "node:module";

const require = createRequire(new URL("../../scripts/peers/package.json", import.meta.url));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { CreateMessageRequestSchema, ElicitRequestSchema } = require("@modelcontextprotocol/sdk/types.js");

const [url, key, tool, args] = process.argv.slice(2);
const headers = key ? { Authorization: `Bearer ${key}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "zest-e2e-bridge", version: "1.0.0" }, { capabilities: { sampling: {}, elicitation: {} } });
const asked = [];
client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  asked.push(`sampling: ${req.params.messages?.[0]?.content?.text ?? ""}`);
  return { role: "assistant", model: "zest-e2e-model", stopReason: "endTurn", content: { type: "text", text: "sampled by the e2e client" } };
});
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(`elicitation: ${req.params.message}`);
  return { action: "accept", content: { topic: "zest" } };
});
await client.connect(transport);
const res = await client.callTool({ name: tool, arguments: JSON.parse(args) });
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ isError: res.isError ?? false, text: res.content?.[0]?.text ?? "", asked }));
