// A stdio MCP server whose tools grow: `add_tool {name}` registers a new tool `name` (which
// answers "<name> says hi"). The official TypeScript SDK then sends
// notifications/tools/list_changed, as a real server does when its tools change.
// The SDK is the one installed in scripts/peers (make peers).
import { createRequire } from "node:module";

const require = createRequire(new URL("../../scripts/peers/package.json", import.meta.url));
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const { z } = require("zod");

const server = new McpServer({ name: "zest-growing", version: "1.0.0" });
server.registerTool(
  "echo",
  { description: "Echo the given text back", inputSchema: { text: z.string() } },
  async ({ text }) => ({ content: [{ type: "text", text }] }),
);
server.registerTool(
  "add_tool",
  { description: "Register a new tool with the given name", inputSchema: { name: z.string() } },
  async ({ name }) => {
    server.registerTool(name, { description: `A tool added at run time: ${name}` },
      async () => ({ content: [{ type: "text", text: `${name} says hi` }] }));
    return { content: [{ type: "text", text: `added ${name}` }] };
  },
);
await server.connect(new StdioServerTransport());
