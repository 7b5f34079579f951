// The official TypeScript SDK as a client of a preset through Zest: /mcp/presets/{id} (or
// /mcp with ZEST_MCP_PRESET). With the preset of e2e/mcp_presets_test.go (lemonade, everything,
// memory, grow) it lists every tool (following nextCursor), calls a tool of each provider by
// its chat_name (one with progress), reads a resource, gets a prompt, makes grow add a tool and
// waits for tools/list_changed on the GET stream, then ends the session (DELETE). Prints one
// JSON line with what it saw.
// Usage: node preset-client.mjs URL API_KEY
import { createRequire } from "node:module";

const require = createRequire(new URL("../../scripts/peers/package.json", import.meta.url));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ToolListChangedNotificationSchema } = require("@modelcontextprotocol/sdk/types.js");

const [url, key] = process.argv.slice(2);
const headers = key ? { Authorization: `Bearer ${key}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "zest-e2e-preset", version: "1.0.0" });
let changed;
const listChanged = new Promise((resolve) => { changed = resolve; });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed(true));
await client.connect(transport);
const out = {
  sessionId: transport.sessionId,
  protocolVersion: transport.protocolVersion,
  serverInfo: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
  instructions: client.getInstructions() ?? "",
};
async function allTools() {
  const names = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    names.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
  } while (cursor);
  return names;
}
const text = (r) => r.content?.[0]?.text ?? "";
out.tools = await allTools();
out.echo = text(await client.callTool({ name: "mcp_everything__echo", arguments: { message: "hello through a preset" } }));
out.graph = text(await client.callTool({ name: "mcp_memory__read_graph", arguments: {} }));
out.models = await client.callTool({ name: "lemonade_list_models", arguments: {} }).then((r) => ({ isError: r.isError ?? false, text: text(r) }));
const progress = [];
const long = await client.callTool(
  { name: "mcp_everything__trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } },
  undefined,
  { onprogress: (p) => progress.push(p) },
);
out.progress = progress.length;
out.long = text(long);
const resources = (await client.listResources()).resources;
out.resources = resources.length;
const read = await client.readResource({ uri: resources[0].uri });
out.read = { uri: resources[0].uri, sameUri: read.contents[0]?.uri === resources[0].uri };
out.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
out.promptMessages = (await client.getPrompt({ name: "mcp_everything__simple-prompt" })).messages.length;
try {
  await client.callTool({ name: "mcp_everything__get-env", arguments: {} });
  out.filtered = { code: 0 };
} catch (e) {
  out.filtered = { code: e.code, message: e.message };
}
await client.callTool({ name: "mcp_grow__add_tool", arguments: { name: "fresh" } });
out.listChanged = await Promise.race([listChanged, new Promise((r) => setTimeout(() => r(false), 15000).unref())]);
out.toolsAfter = await allTools();
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
