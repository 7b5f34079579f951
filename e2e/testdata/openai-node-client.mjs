// The OpenAI Node SDK used unchanged against Zest's OpenAI routes: its streaming helpers
// responses.stream(), chat.completions.stream() (a chat whose tool loop Zest runs, selected with
// Zest's mcp_server_ids) and chat.completions.runTools() (a function the client runs); a chat
// with stop; audio.translations of a short WAV. Each outcome, or its error, goes into one JSON
// line.
// Usage: node openai-node-client.mjs BASE_URL MODEL MCP_SERVER_ID MCP_TOOL AUDIO_MODEL
import { createRequire } from "node:module";

const require = createRequire(new URL("../../scripts/peers/package.json", import.meta.url));
const { default: OpenAI, toFile } = require("openai");

const [baseURL, model, serverID, mcpTool, audioModel] = process.argv.slice(2);
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

await run("responses_stream_call", async () => {
  const stream = client.responses.stream({
    model,
    input: 'add {"a":40,"b":2}',
    tools: [{ type: "function", name: "get_sum", parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } } }],
    tool_choice: { type: "function", name: "get_sum" },
  });
  const final = await stream.finalResponse();
  const call = final.output.find((o) => o.type === "function_call") ?? {};
  return { name: call.name, arguments: call.arguments, status: final.status };
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

await run("chat_stop", async () => {
  const res = await client.chat.completions.create({ model, stop: [" two"], messages: [{ role: "user", content: "one two three" }] });
  return { text: res.choices[0].message.content, finish: res.choices[0].finish_reason };
});

// wav is a RIFF/WAVE file of seconds of 16 kHz mono 16-bit silence.
function wav(seconds) {
  const rate = 16000, data = Math.round(rate * seconds) * 2;
  const b = Buffer.alloc(44 + data);
  b.write("RIFF", 0); b.writeUInt32LE(36 + data, 4); b.write("WAVE", 8);
  b.write("fmt ", 12); b.writeUInt32LE(16, 16); b.writeUInt16LE(1, 20); b.writeUInt16LE(1, 22);
  b.writeUInt32LE(rate, 24); b.writeUInt32LE(rate * 2, 28); b.writeUInt16LE(2, 32); b.writeUInt16LE(16, 34);
  b.write("data", 36); b.writeUInt32LE(data, 40);
  return b;
}

await run("translation", async () => {
  const res = await client.audio.translations.create({ model: audioModel, file: await toFile(wav(0.25), "a.wav"), response_format: "verbose_json" });
  return { text: res.text, language: res.language, task: res.task };
});

console.log(JSON.stringify(out));
