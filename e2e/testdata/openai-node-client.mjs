// The OpenAI Node SDK's streaming helpers, used unchanged against Zest's OpenAI routes:
// responses.stream(), chat.completions.stream() (a chat whose tool loop Zest runs, selected with
// Zest's mcp_server_ids) and chat.completions.runTools() (a function the client runs). Each
// helper's outcome, or its error, goes into one JSON line.
// Usage: node openai-node-client.mjs BASE_URL MODEL MCP_SERVER_ID MCP_TOOL
import { createRequire } from "node:module";

const require = createRequire(new URL("../../scripts/peers/package.json", import.meta.url));
const { default: OpenAI } = require("openai");

const [baseURL, model, serverID, mcpTool] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const out = {};

async function run(name, fn) {
  try {
    out[name] = await fn();
  } catch (err) {
    out[name] = { error: String(err?.message ?? err) };
  }
}

await run("responses_stream", async () => {
  const stream = client.responses.stream({ model, input: "hello from the node sdk" });
  const deltas = [];
  stream.on("response.output_text.delta", (ev) => deltas.push(ev.delta));
  const final = await stream.finalResponse();
  return { text: final.output_text, status: final.status, deltas: deltas.join("") };
});

await run("chat_stream", async () => {
  const stream = client.chat.completions.stream({
    model,
    mcp_server_ids: [serverID],
    tool_choice: { type: "function", function: { name: mcpTool } },
    messages: [{ role: "user", content: '{"text":"through the node sdk"}' }],
  });
  const final = await stream.finalChatCompletion();
  return { text: final.choices[0].message.content, finish: final.choices[0].finish_reason, keys: Object.keys(final).sort() };
});

await run("run_tools", async () => {
  const calls = [];
  const runner = client.chat.completions.runTools({
    model,
    messages: [{ role: "user", content: 'call get_sum with {"a":40,"b":2}' }],
    tools: [{
      type: "function",
      function: {
        name: "get_sum",
        description: "adds two numbers",
        parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
        parse: JSON.parse,
        function: ({ a, b }) => { calls.push([a, b]); return String(a + b); },
      },
    }],
  });
  const text = await runner.finalContent();
  return { text, calls };
});

console.log(JSON.stringify(out));
