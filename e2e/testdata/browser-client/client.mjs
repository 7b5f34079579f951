// The official MCP TypeScript SDK v2 client, bundled for the browser by
// e2e/mcp_browser_test.go (esbuild, from scripts/browser). A page on another origin calls
// window.mcpRun to connect to one of Zest's MCP endpoints, list its tools and call one, as
// Lemonade's GUI will from the browser.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

// mcpRun connects to url with key in the given era ('2025-11-25': the session era by
// initialize; '2026-07-28': the stateless era, pinned), lists the tools (every page), calls
// tool with args, and answers what it saw: the era and session id it got, the tool names,
// the call's text and whether it was an error. A failure answers {error: message}.
window.mcpRun = async function (url, key, era, tool, args) {
  const options = era === '2026-07-28' ? { versionNegotiation: { mode: { pin: era } } } : {};
  const client = new Client({ name: 'zest-browser-test', version: '1.0.0' }, options);
  const headers = key ? { Authorization: 'Bearer ' + key } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  try {
    await client.connect(transport);
    const names = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      names.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    } while (cursor);
    const result = await client.callTool({ name: tool, arguments: args });
    const text = (result.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
    return {
      era: client.getNegotiatedProtocolVersion() || transport.protocolVersion || null,
      session: transport.sessionId || null,
      tools: names,
      text,
      isError: !!result.isError,
    };
  } catch (e) {
    return { error: String((e && e.message) || e) };
  } finally {
    try { await client.close(); } catch (e) { /* closing is best effort: the answer is made */ }
  }
};
