// The official TypeScript SDK as a client that answers elicitation: it opens a session of URL,
// calls TOOL with {"text": TEXT} and answers every elicitation/create with ACTION ("accept",
// "decline" or "cancel"; "none" declares no elicitation capability). Prints one JSON line with
// the messages it was asked and the call's result.
// Usage: node approval-client.mjs URL TOOL TEXT ACTION [API_KEY]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, tool, text, action, key] = process.argv.slice(2);
const headers = key ? { Authorization: `Bearer ${key}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const capabilities = action === "none" ? {} : { elicitation: {} };
const client = new Client({ name: "zest-e2e-approvals", version: "1.0.0" }, { capabilities });
const asked = [];
if (action !== "none") {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params.message);
    return action === "accept" ? { action, content: {} } : { action };
  });
}
await client.connect(transport);
const call = await client.callTool({ name: tool, arguments: { text } });
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ asked, isError: call.isError ?? false, text: call.content?.[0]?.text ?? "" }));
