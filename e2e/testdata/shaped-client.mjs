// The official TypeScript SDK as a client of a preset that shapes its tools: it lists every
// tool (following nextCursor) with its description and input schema, then calls tools in
// turn. Prints one JSON line: {tools: [{name, description, inputSchema}], calls: [{tool,
// isError, text} or {tool, error}]}.
// Usage: node shaped-client.mjs URL '[["tool", {args}], …]'
import { createRequire } from "node:module";

const require = createRequire(new URL("../../scripts/peers/package.json", import.meta.url));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

const [url, callsJSON] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "zest-e2e-shaped", version: "1.0.0" });
await client.connect(transport);
const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : undefined);
  tools.push(...page.tools.map((t) => ({ name: t.name, description: t.description ?? "", inputSchema: t.inputSchema })));
  cursor = page.nextCursor;
} while (cursor);
const calls = [];
for (const [name, args] of JSON.parse(callsJSON)) {
  try {
    const res = await client.callTool({ name, arguments: args });
    calls.push({ tool: name, isError: res.isError ?? false, text: res.content.filter((c) => c.type === "text").map((c) => c.text).join("\n") });
  } catch (e) {
    calls.push({ tool: name, error: e.message });
  }
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ tools, calls }));
