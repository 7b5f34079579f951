// The official TypeScript SDK calling tools of an MCP endpoint of Zest in turn, each with a
// progress callback. Prints one JSON line: per call (in order) the tool, its isError, the text
// of its content and the progress values seen, or the error the SDK threw (its message), for the
// Go test to check.
// Usage: node tools-client.mjs URL '[["tool", {args}], …]'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, callsJSON] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "zest-e2e-tools", version: "1.0.0" });
await client.connect(transport);
const out = [];
for (const [name, args] of JSON.parse(callsJSON)) {
  const progress = [];
  let res;
  try {
    res = await client.callTool({ name, arguments: args }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
  } catch (e) {
    out.push({ tool: name, error: e.message });
    continue;
  }
  out.push({
    tool: name,
    isError: res.isError ?? false,
    text: res.content.filter((c) => c.type === "text").map((c) => c.text).join("\n"),
    progress,
  });
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
