// A Node stdio MCP echo server, as Lemonade's external-MCP smoke test uses: one tool, `echo`,
// that returns its `text` argument. Built with the official TypeScript SDK.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "zest-echo", version: "1.0.0" });
server.registerTool(
  "echo",
  { description: "Echo the given text back", inputSchema: { text: z.string().describe("Text to echo") } },
  async ({ text }) => ({ content: [{ type: "text", text }] }),
);
await server.connect(new StdioServerTransport());
