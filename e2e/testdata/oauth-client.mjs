// The official TypeScript SDK's OAuth flow (its auth(), through StreamableHTTPClientTransport's
// authProvider) as a client of one of Zest's MCP endpoints: connect to URL without a key, meet
// the 401, discover the issuer through the endpoint's protected-resource metadata, authorize
// as the pre-registered public client CLIENT_ID (PKCE, the endpoint as resource), exchange the
// code, connect again with the token, list the tools and call TOOL with ARGUMENTS_JSON.
// The browser's part of the authorization is done here: its redirects are followed (the test
// server signs its user in at once) up to the redirect URI, whose code is taken.
// Prints one JSON line with what it saw. Usage: node oauth-client.mjs URL CLIENT_ID TOOL ARGUMENTS_JSON
import { createRequire } from "node:module";

const require = createRequire(new URL("../../scripts/peers/package.json", import.meta.url));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { UnauthorizedError } = require("@modelcontextprotocol/sdk/client/auth.js");

const [url, clientId, tool, args] = process.argv.slice(2);
const redirectUrl = "http://127.0.0.1:1/oauth/callback"; // never listened on: the redirects stop before it
let codeVerifier, tokens, code, authorizeUrl;
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return { client_name: "zest-e2e-oauth", redirect_uris: [redirectUrl], grant_types: ["authorization_code"], response_types: ["code"], token_endpoint_auth_method: "none" };
  },
  clientInformation() { return { client_id: clientId }; },
  tokens() { return tokens; },
  saveTokens(t) { tokens = t; },
  saveCodeVerifier(v) { codeVerifier = v; },
  codeVerifier() { return codeVerifier; },
  async redirectToAuthorization(u) {
    authorizeUrl = u.toString();
    let next = authorizeUrl;
    for (let i = 0; i < 10; i++) {
      const r = await fetch(next, { redirect: "manual" });
      const loc = r.headers.get("location");
      if (!loc) throw new Error(`the authorization stopped at ${next}: ${r.status} ${await r.text()}`);
      const abs = new URL(loc, next);
      if (abs.href.startsWith(redirectUrl)) {
        code = abs.searchParams.get("code");
        return;
      }
      next = abs.href;
    }
    throw new Error("more than 10 redirects");
  },
};

const connect = async () => {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const client = new Client({ name: "zest-e2e-oauth", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
};
let client, firstError = "";
try {
  ({ client } = await connect());
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
  firstError = String(e);
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await transport.finishAuth(code);
  ({ client } = await connect());
}
const tools = await client.listTools();
const call = await client.callTool({ name: tool, arguments: JSON.parse(args) });
await client.close();
const claims = JSON.parse(Buffer.from(tokens.access_token.split(".")[1], "base64url").toString());
console.log(JSON.stringify({
  unauthorized: firstError,
  authorizeUrl,
  audience: claims.aud,
  tools: tools.tools.map((t) => t.name),
  isError: call.isError ?? false,
  text: call.content?.[0]?.text ?? "",
}));
