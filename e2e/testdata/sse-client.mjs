// The official TypeScript SDK's HTTP+SSE client (SSEClientTransport: protocol 2024-11-05's
// transport) as a client of one of Zest's MCP endpoints: connect to URL (an endpoint's /sse),
// list the tools, call TOOL with ARGUMENTS_JSON. Prints one JSON line with what it saw.
// Usage: node sse-client.mjs URL API_KEY TOOL ARGUMENTS_JSON
import { createRequire } from "node:module";

const require = createRequire(new URL("../../scripts/peers/package.json", import.meta.url));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { SSEClientTransport } = require("@modelcontextprotocol/sdk/client/sse.js");

const [url, key, tool, args] = process.argv.slice(2);
const transport = new SSEClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
const client = new Client({ name: "zest-e2e-sse", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const call = await client.callTool({ name: tool, arguments: JSON.parse(args) });
await client.close();
console.log(JSON.stringify({
  serverName: client.getServerVersion()?.name,
  tools: tools.tools.map((t) => t.name),
  isError: call.isError ?? false,
  text: call.content?.[0]?.text ?? "",
}));
