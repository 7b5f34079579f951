// The official TypeScript SDK as a client of one registered server through Zest:
// /mcp/servers/{id}. It initializes, lists and calls tools (one with progress), lists and
// reads resources, lists and gets prompts, calls a tool the server's filters hide, and ends
// the session (DELETE). Prints one JSON line with what it saw.
// Usage: node federation-client.mjs URL API_KEY [full]
//   full: the server-everything steps (resources, prompts, progress, the filtered get-env);
//   without it, tools only (echo).
import { createRequire } from "node:module";

const require = createRequire(new URL("../../scripts/peers/package.json", import.meta.url));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

const [url, key, mode] = process.argv.slice(2);
const headers = key ? { Authorization: `Bearer ${key}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "zest-e2e-federation", version: "1.0.0" });
await client.connect(transport);
const out = {
  sessionId: transport.sessionId,
  protocolVersion: transport.protocolVersion,
  serverInfo: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
  instructions: client.getInstructions() ?? "",
};
out.tools = (await client.listTools()).tools.map((t) => t.name);
const echo = await client.callTool({ name: "echo", arguments: { message: "hello through zest" } });
out.echo = echo.content?.[0]?.text ?? "";
if (mode === "full") {
  const resources = (await client.listResources()).resources;
  out.resources = resources.length;
  const first = resources[0];
  const read = await client.readResource({ uri: first.uri });
  out.read = { uri: first.uri, contents: read.contents.length, sameUri: read.contents[0]?.uri === first.uri };
  out.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
  const prompt = await client.getPrompt({ name: "simple-prompt" });
  out.promptMessages = prompt.messages.length;
  const progress = [];
  const long = await client.callTool(
    { name: "trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } },
    undefined,
    { onprogress: (p) => progress.push(p) },
  );
  out.progress = progress;
  out.long = long.content?.[0]?.text ?? "";
  try {
    await client.callTool({ name: "get-env", arguments: {} });
    out.filtered = { code: 0 };
  } catch (e) {
    out.filtered = { code: e.code, message: e.message };
  }
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
