// Harvests the tools/list of real npm MCP servers into bench/testdata/tool-catalog.json, the
// catalog of issue 25's tool-search benchmark (`make bench`, -only toolsearch) and of
// toolsearch's recall test. Each server runs over stdio through the pinned TypeScript SDK
// (scripts/peers), with dummy credentials where it wants one only to call its service later:
// tools/list never reaches a network here. The three servers of scripts/peers come from there;
// the others from scripts/peers/harvest (its own package.json, installed by `make tool-catalog`
// only: some are large, and make test needs none of them).
//
// Usage (from the repository's root): node scripts/peers/harvest-tools.mjs [OUT]
// A server that fails to list is reported on stderr and left out; the run fails if the
// catalog then has fewer than MIN_TOOLS real tools.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, "../../bench/testdata/tool-catalog.json"));
const MIN_TOOLS = 500;
const LIST_TIMEOUT_MS = 120_000;
const scratch = mkdtempSync(join(tmpdir(), "zest-harvest-"));
const dummy = "zest-harvest-dummy-token";

// id: the server's id in the catalog; pkg: its npm package; dir: which package.json pins it;
// args and env: what it needs to start (dummy secrets).
const servers = [
  { id: "everything", pkg: "@modelcontextprotocol/server-everything", dir: ".", args: ["stdio"] },
  { id: "filesystem", pkg: "@modelcontextprotocol/server-filesystem", dir: ".", args: [scratch] },
  { id: "memory", pkg: "@modelcontextprotocol/server-memory", dir: ".", env: { MEMORY_FILE_PATH: join(scratch, "memory.jsonl") } },
  { id: "sequential-thinking", pkg: "@modelcontextprotocol/server-sequential-thinking" },
  { id: "github", pkg: "@modelcontextprotocol/server-github", env: { GITHUB_PERSONAL_ACCESS_TOKEN: dummy } },
  { id: "gitlab", pkg: "@modelcontextprotocol/server-gitlab", env: { GITLAB_PERSONAL_ACCESS_TOKEN: dummy } },
  { id: "slack", pkg: "@modelcontextprotocol/server-slack", env: { SLACK_BOT_TOKEN: dummy, SLACK_TEAM_ID: "T00000000" } },
  { id: "puppeteer", pkg: "@modelcontextprotocol/server-puppeteer" },
  { id: "brave-search", pkg: "@modelcontextprotocol/server-brave-search", env: { BRAVE_API_KEY: dummy } },
  { id: "google-maps", pkg: "@modelcontextprotocol/server-google-maps", env: { GOOGLE_MAPS_API_KEY: dummy } },
  { id: "playwright", pkg: "@playwright/mcp", args: ["--headless"] },
  { id: "playwright-ea", pkg: "@executeautomation/playwright-mcp-server" },
  { id: "chrome-devtools", pkg: "chrome-devtools-mcp", args: ["--headless"] },
  { id: "context7", pkg: "@upstash/context7-mcp" },
  { id: "notion", pkg: "@notionhq/notion-mcp-server", env: { NOTION_TOKEN: dummy } },
  { id: "kubernetes", pkg: "mcp-server-kubernetes" },
  { id: "firecrawl", pkg: "firecrawl-mcp", env: { FIRECRAWL_API_KEY: "fc-" + dummy } },
  { id: "exa", pkg: "exa-mcp-server", env: { EXA_API_KEY: dummy } },
  { id: "sentry", pkg: "@sentry/mcp-server", args: ["--access-token", dummy] },
  { id: "hubspot", pkg: "@hubspot/mcp-server", env: { PRIVATE_APP_ACCESS_TOKEN: dummy } },
  { id: "mongodb", pkg: "mongodb-mcp-server", env: { MDB_MCP_TELEMETRY: "disabled", MDB_MCP_CONNECTION_STRING: "mongodb://127.0.0.1:1" } },
  { id: "desktop-commander", pkg: "@wonderwhy-er/desktop-commander" },
  { id: "tavily", pkg: "tavily-mcp", env: { TAVILY_API_KEY: "tvly-" + dummy } },
  { id: "chart", pkg: "@antv/mcp-server-chart" },
  { id: "jira", pkg: "@aashari/mcp-server-atlassian-jira", env: { ATLASSIAN_SITE_NAME: "example", ATLASSIAN_USER_EMAIL: "a@example.com", ATLASSIAN_API_TOKEN: dummy } },
  { id: "gitlab-community", pkg: "@zereight/mcp-gitlab", env: { GITLAB_PERSONAL_ACCESS_TOKEN: dummy, GITLAB_API_URL: "https://gitlab.example/api/v4" } },
  { id: "git", pkg: "@cyanheads/git-mcp-server", env: { MCP_TRANSPORT_TYPE: "stdio", MCP_LOG_LEVEL: "error" } },
  { id: "launchdarkly", pkg: "@launchdarkly/mcp-server", args: ["start", "--api-key", dummy] },
  { id: "circleci", pkg: "@circleci/mcp-server-circleci", env: { CIRCLECI_TOKEN: dummy } },
  { id: "pinecone", pkg: "@pinecone-database/mcp", env: { PINECONE_API_KEY: dummy } },
  { id: "elasticsearch", pkg: "@elastic/mcp-server-elasticsearch", env: { ES_URL: "http://127.0.0.1:1", ES_API_KEY: dummy } },
];

// Left out, each tried: @azure-devops/mcp (its keytar needs a native build), @heroku/mcp-server
// (imports an SDK path its pinned SDK lacks), @modelcontextprotocol/server-redis (exits without
// a Redis), @supabase/mcp-server-supabase and @stripe/mcp (call their service before listing),
// @atlassian-dc-mcp/confluence (depends on a package the registry does not serve),
// @a-bonus/google-docs-mcp (exits without Google credentials).

// bin finds the package's entry point (its only or first bin), and its version.
function bin(s) {
  const root = join(here, s.dir ?? "harvest", "node_modules", s.pkg);
  const pj = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const b = typeof pj.bin === "string" ? pj.bin : Object.values(pj.bin ?? {})[0];
  if (!b) throw new Error(`${s.pkg} has no bin in its package.json`);
  return { path: join(root, b), source: `${s.pkg}@${pj.version}` };
}

async function harvest(s) {
  const { path, source } = bin(s);
  const env = { ...process.env, ...(s.env ?? {}), HOME: scratch, DO_NOT_TRACK: "1" };
  const transport = new StdioClientTransport({ command: process.execPath, args: [path, ...(s.args ?? [])], env, cwd: scratch, stderr: "ignore" });
  const client = new Client({ name: "zest-tool-harvest", version: "1.0.0" });
  await client.connect(transport, { timeout: LIST_TIMEOUT_MS });
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {}, { timeout: LIST_TIMEOUT_MS });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  await client.close();
  const id = s.id;
  return tools.map((t) => ({
    server: id,
    source,
    name: t.name,
    ...(t.title ?? t.annotations?.title ? { title: t.title ?? t.annotations.title } : {}),
    ...(t.description ? { description: t.description } : {}),
    inputSchema: t.inputSchema,
    ...(t.annotations ? { annotations: t.annotations } : {}),
  }));
}

const all = [];
const failed = [];
for (const s of servers) {
  try {
    const tools = await harvest(s);
    console.error(`${s.id}: ${tools.length} tools`);
    all.push(...tools);
  } catch (e) {
    failed.push(s.pkg);
    console.error(`${s.id} (${s.pkg}): left out: ${e.message}`);
  }
}
if (all.length < MIN_TOOLS) {
  console.error(`only ${all.length} real tools, fewer than ${MIN_TOOLS}`);
  process.exit(1);
}
const catalog = {
  harvested: `scripts/peers/harvest-tools.mjs: tools/list of ${all.length} tools from ${servers.length - failed.length} npm MCP servers over stdio (pinned versions in each tool's source)`,
  tools: all,
};
writeFileSync(out, JSON.stringify(catalog, null, 1) + "\n");
console.error(`wrote ${all.length} tools to ${out}`);
process.exit(0);
