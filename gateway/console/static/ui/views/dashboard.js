// MCP endpoint: the URLs to give an MCP client (Zest's /mcp, each exposed server, each preset)
// with Copy buttons, the protocol versions /mcp serves, the health of the three services and
// of /mcp itself, /mcp's tool cards, and ready-to-paste client configurations.
const MODERN = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'zest-console', version: '1' },
};

// mcpRequest sends one MCP 2026-07-28 request (no session) to an MCP endpoint of Zest.
export async function mcpRequest(app, path, method, params = {}) {
  const headers = {
    'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'Mcp-Method': method, 'MCP-Protocol-Version': MODERN,
  };
  if (app.apiKey()) headers.Authorization = `Bearer ${app.apiKey()}`;
  const res = await fetch(path, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: META } }) });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { body = null; }
  if (res.status === 401) return { status: 401, error: (body && body.error && body.error.message) || 'an API key is required' };
  if (!body || body.error) return { status: res.status, error: body && body.error ? body.error.message : `HTTP ${res.status}` };
  return { status: res.status, result: body.result };
}

function statusBadge(app, state) {
  const s = String(state).toLowerCase();
  const good = s === 'serving' || s === 'ok';
  const icon = good ? '✔' : s === 'degraded' ? '⚠' : '✖';
  return app.el('span', { class: `status ${good ? 'ok' : s === 'degraded' ? 'degraded' : 'down'}` }, app.el('span', { 'aria-hidden': 'true' }, icon), state);
}

function countInputs(schema) {
  const props = Object.keys((schema && schema.properties) || {});
  const req = ((schema && schema.required) || []).length;
  return `${props.length} input${props.length === 1 ? '' : 's'} · ${req} required`;
}

// configs are the client configurations for url; key is a placeholder or null.
export function configs(url, keyRequired) {
  const name = 'zest';
  const headers = keyRequired ? { Authorization: 'Bearer ${ZEST_API_KEY}' } : undefined;
  const claudeArgs = ['-y', 'mcp-remote', url];
  if (keyRequired) claudeArgs.push('--header', 'Authorization:${AUTH_HEADER}');
  const claude = { mcpServers: { [name]: { command: 'npx', args: claudeArgs, ...(keyRequired ? { env: { AUTH_HEADER: 'Bearer <your LEMONADE_API_KEY>' } } : {}) } } };
  const cursor = { mcpServers: { [name]: { url, ...(headers ? { headers: { Authorization: 'Bearer <your LEMONADE_API_KEY>' } } : {}) } } };
  const vscode = { servers: { [name]: { type: 'http', url, ...(headers ? { headers: { Authorization: 'Bearer ${input:zest-key}' } } : {}) } },
    ...(keyRequired ? { inputs: [{ type: 'promptString', id: 'zest-key', description: 'Zest API key (LEMONADE_API_KEY)', password: true }] } : {}) };
  const inspector = `npx @modelcontextprotocol/inspector --cli ${url} --transport http --method tools/list${keyRequired ? " --header 'Authorization: Bearer <your LEMONADE_API_KEY>'" : ''}`;
  return [
    { id: 'claude', label: 'Claude Desktop', file: 'claude_desktop_config.json (through mcp-remote)', text: JSON.stringify(claude, null, 2) },
    { id: 'cursor', label: 'Cursor', file: '~/.cursor/mcp.json', text: JSON.stringify(cursor, null, 2) },
    { id: 'vscode', label: 'VS Code', file: '.vscode/mcp.json', text: JSON.stringify(vscode, null, 2) },
    { id: 'inspector', label: 'Inspector', file: 'a terminal', text: inspector },
  ];
}

function configPanel(app, targets, keyRequired) {
  const { el } = app;
  const select = el('select', { name: 'target' }, targets.map((t) => el('option', { value: t.url }, `${t.label} — ${t.url}`)));
  const tabs = el('div', { class: 'tabs', role: 'tablist', 'aria-label': 'MCP client' });
  const panel = el('div', { role: 'tabpanel', id: 'config-panel', tabindex: '0' });
  let active = 'claude';
  const draw = () => {
    const list = configs(select.value, keyRequired);
    tabs.replaceChildren(...list.map((c) => el('button', {
      type: 'button', role: 'tab', id: `tab-${c.id}`, 'aria-selected': c.id === active ? 'true' : 'false', 'aria-controls': 'config-panel',
      tabindex: c.id === active ? '0' : '-1',
      onclick: () => { active = c.id; draw(); document.getElementById(`tab-${c.id}`).focus(); },
      onkeydown: (e) => {
        const i = list.findIndex((x) => x.id === active);
        if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') {
          active = list[(i + (e.key === 'ArrowRight' ? 1 : list.length - 1)) % list.length].id;
          draw();
          document.getElementById(`tab-${active}`).focus();
        }
      },
    }, c.label)));
    const c = list.find((x) => x.id === active);
    panel.setAttribute('aria-labelledby', `tab-${c.id}`);
    const pre = el('pre', { class: 'config', 'data-client': c.id }, c.text);
    panel.replaceChildren(el('p', { class: 'muted' }, `Paste into ${c.file}.`), pre,
      el('div', { class: 'actions' }, copyLabelled(app, c.text, `Copy the ${c.label} configuration`)));
  };
  select.addEventListener('change', draw);
  draw();
  return el('section', { 'aria-labelledby': 'connect-h' }, el('h2', { id: 'connect-h' }, 'Connect a client'), app.field('Endpoint', select),
    keyRequired ? el('p', { class: 'notice' }, 'This server requires an API key: replace the placeholder with your LEMONADE_API_KEY.') : null,
    tabs, panel);
}

export default {
  title: 'MCP endpoint',
  async render(main, app) {
    const { el } = app;
    const base = app.origin();
    const mcpURL = `${base}/mcp`;
    const [health, discover, list] = await Promise.all([
      app.api('GET', '/api/v1/health').catch((e) => (e.body && e.body.services ? e.body : { status: 'unreachable', error: e.message })),
      mcpRequest(app, '/mcp', 'server/discover').catch((e) => ({ error: e.message })),
      mcpRequest(app, '/mcp', 'tools/list').catch((e) => ({ error: e.message })),
    ]);
    const keyRequired = discover.status === 401;

    // The endpoint and its versions.
    const endpoint = el('section', { 'aria-labelledby': 'ep-h' },
      el('h2', { id: 'ep-h' }, 'Zest\'s MCP endpoint'),
      el('p', {}, 'Give this URL to any MCP client (Streamable HTTP).'),
      el('div', { class: 'row' }, el('code', { class: 'url grow', id: 'mcp-url' }, mcpURL), copyLabelled(app, mcpURL, 'Copy the MCP endpoint URL')),
      discover.result
        ? el('p', {}, 'Protocol versions: ', el('span', { class: 'mono', id: 'mcp-versions' }, (discover.result.supportedVersions || []).join(', ')),
          ` · server ${((discover.result._meta || {})['io.modelcontextprotocol/serverInfo'] || {}).name || ''}`)
        : el('p', { class: keyRequired ? 'notice' : 'error' }, keyRequired ? '/mcp requires an API key (LEMONADE_API_KEY).' : `/mcp did not answer: ${discover.error}`));

    // Health.
    const services = (health && health.services) || {};
    const healthList = el('ul', { class: 'plain', id: 'health' },
      Object.keys(services).sort().map((n) => el('li', {}, el('span', { class: 'svc' }, `${n}: `), statusBadge(app, services[n]))),
      el('li', {}, el('span', {}, '/mcp: '), statusBadge(app, discover.result || keyRequired ? 'ok' : 'down')));
    const healthSec = el('section', { 'aria-labelledby': 'health-h' }, el('h2', { id: 'health-h' }, 'Health'),
      el('p', {}, 'Suite: ', statusBadge(app, health.status || 'unknown')), healthList);

    // Federated endpoints (needs the admin key; without it, only /mcp is shown).
    const targets = [{ label: 'Zest (/mcp)', url: mcpURL }];
    const fed = el('section', { 'aria-labelledby': 'fed-h' }, el('h2', { id: 'fed-h' }, 'Federated endpoints'));
    try {
      const [srv, pre] = await Promise.all([app.api('GET', '/internal/mcp/servers'), app.api('GET', '/internal/mcp/presets')]);
      const rows = [];
      for (const s of srv.servers || []) {
        if (s.expose === false) continue;
        const url = `${base}/mcp/servers/${encodeURIComponent(s.id)}`;
        targets.push({ label: `server ${s.name || s.id}`, url });
        rows.push(el('li', { class: 'row' }, el('span', {}, `Server ${s.name || s.id} (${s.status}): `), el('code', { class: 'url grow' }, url), copyLabelled(app, url, `Copy the URL of server ${s.id}`)));
      }
      for (const p of pre.presets || []) {
        const url = `${base}/mcp/presets/${encodeURIComponent(p.id)}`;
        targets.push({ label: `preset ${p.name || p.id}`, url });
        rows.push(el('li', { class: 'row' }, el('span', {}, `Preset ${p.name || p.id}: `), el('code', { class: 'url grow' }, url), copyLabelled(app, url, `Copy the URL of preset ${p.id}`)));
      }
      fed.append(rows.length ? el('ul', { class: 'plain' }, rows)
        : el('p', { class: 'muted' }, 'None yet: each registered server is also served as itself at /mcp/servers/{id}, and each preset at /mcp/presets/{id}. ', el('a', { href: '#/servers' }, 'Add a server.')));
    } catch (e) {
      fed.append(app.errorBox(e));
    }

    // Tool cards of /mcp.
    const tools = (list.result && list.result.tools) || [];
    const toolsSec = el('section', { 'aria-labelledby': 'tools-h' }, el('h2', { id: 'tools-h' }, `Tools of /mcp (${tools.length})`),
      el('div', { class: 'cards' }, tools.map((t) => el('article', { class: 'card tool-card', 'aria-label': t.name },
        el('h3', {}, el('code', {}, t.name)),
        el('p', {}, t.description || ''),
        el('p', { class: 'muted' }, countInputs(t.inputSchema)),
        el('details', {}, el('summary', {}, 'Schema'), el('pre', {}, JSON.stringify(t.inputSchema, null, 2)))))));

    main.append(endpoint, healthSec, fed, configPanel(app, targets, keyRequired), toolsSec);
  },
};

function copyLabelled(app, text, label) {
  const b = app.copyButton(text, 'Copy');
  b.setAttribute('aria-label', label);
  return b;
}
