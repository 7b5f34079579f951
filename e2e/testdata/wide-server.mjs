// A stdio MCP server with one tool, `wide`, whose description is as many bytes as its first
// argument: its tools/list answer is as large as a test needs. The SDK is the one installed
// in scripts/peers (make peers).
import { createRequire } from "node:module";

const require = createRequire(new URL("../../scripts/peers/package.json", import.meta.url));
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");

const server = new McpServer({ name: "zest-wide", version: "1.0.0" });
server.registerTool("wide", { description: "w".repeat(Number(process.argv[2] ?? 1000)) },
  async () => ({ content: [{ type: "text", text: "wide" }] }));
await server.connect(new StdioServerTransport());
