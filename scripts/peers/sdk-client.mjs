// The official TypeScript SDK as a client of Zest's /mcp: initialize, list tools, call
// lemonade_list_models, terminate the session (DELETE). Prints one JSON line with what it saw.
// Usage: node sdk-client.mjs URL [API_KEY]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key] = process.argv.slice(2);
const headers = key ? { Authorization: `Bearer ${key}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "zest-e2e-sdk", version: "1.0.0" });
await client.connect(transport);
const sessionId = transport.sessionId;
const tools = await client.listTools();
const call = await client.callTool({ name: "lemonade_list_models", arguments: {} });
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({
  sessionId,
  serverName: client.getServerVersion()?.name,
  protocolVersion: transport.protocolVersion,
  tools: tools.tools.map((t) => t.name),
  isError: call.isError ?? false,
  text: call.content?.[0]?.text ?? "",
}));
