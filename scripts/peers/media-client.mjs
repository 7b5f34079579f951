// The official TypeScript SDK calling the media tools of Zest's /mcp: lemonade_text_to_speech,
// lemonade_generate_audio, lemonade_edit_image (the PNG given in base64) and
// lemonade_generate_3d from a prompt, each with a progress callback. Prints one JSON line:
// per tool its isError, its content blocks (type, mimeType, base64 data) and the progress
// values seen, for the Go test to decode.
// Usage: node media-client.mjs URL PNG_BASE64 MASK_BASE64
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, png, mask] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "zest-e2e-media", version: "1.0.0" });
await client.connect(transport);
const calls = [
  ["lemonade_text_to_speech", { input: "typescript speaks", output_dir: "ts" }],
  ["lemonade_generate_audio", { prompt: "typescript hums", duration: 1, output_dir: "ts" }],
  ["lemonade_edit_image", { prompt: "typescript paints", image_base64: png, mask_base64: mask, output_dir: "ts" }],
  ["lemonade_generate_3d", { prompt: "a typescript lemon", output_dir: "ts" }],
];
const out = {};
for (const [name, args] of calls) {
  const progress = [];
  const res = await client.callTool({ name, arguments: args }, undefined, {
    onprogress: (p) => progress.push(p.progress),
  });
  out[name] = {
    isError: res.isError ?? false,
    progress,
    content: res.content.map((c) => ({
      type: c.type,
      mimeType: c.mimeType ?? c.resource?.mimeType ?? "",
      data: c.data ?? c.resource?.blob ?? "",
      text: c.text ?? "",
    })),
  };
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
