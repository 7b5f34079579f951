// External MCP servers, in Lemonade's words: the list of registered servers with their status
// (colour + icon + text, changes announced in the live region), last error, stderr tail and
// tools; the form to add or edit one (HTTP endpoint or Local process), with Test connection
// and Save and connect; API errors shown next to the field they name; and the install search
// of the MCP Registry (registry.js).
import { installSection } from './registry.js';

const STATUS = {
  connected: { icon: '●', text: 'Connected' },
  connecting: { icon: '◌', text: 'Connecting' },
  error: { icon: '✖', text: 'Error' },
  disconnected: { icon: '○', text: 'Disconnected' },
  disabled: { icon: '⊘', text: 'Disabled' },
};

let timer = null;
let lastStatus = new Map();
// busy holds the ids being connected, shown as Connecting until the call returns.
const busy = new Set();

function badge(app, status) {
  const s = STATUS[status] || { icon: '?', text: status };
  return app.el('span', { class: `status ${status}` }, app.el('span', { 'aria-hidden': 'true' }, s.icon), s.text);
}

function lines(text) { return text.split('\n').map((l) => l.trim()).filter(Boolean); }

// formBody reads the form into the admin API's server config: every field the form shows, an
// empty one as null (its default). It is a JSON merge patch: an edit sends it with PATCH, so
// that the fields the form does not show (NOT_IN_FORM, the sandbox's details) stay as stored;
// a new server is posted with it (a null is a field left out). The transport chosen clears
// the other transport's fields.
function formBody(form) {
  const v = (n) => (form.elements[n] ? form.elements[n].value.trim() : '');
  const orNull = (x) => (x === '' ? null : x);
  const num = (n) => (v(n) === '' ? null : Number(v(n)));
  const http = form.elements.transport.value === 'streamable-http';
  const body = { name: orNull(v('name')), transport: http ? 'streamable-http' : 'stdio', timeout_ms: num('timeout_ms') };
  const stdio = { command: null, args: null, working_dir: null, env: null, tool_host: null, sandbox: null };
  if (http) {
    Object.assign(body, stdio, { url: v('url'), bearer_token: orNull(v('bearer_token')), allow_insecure_http: form.elements.allow_insecure_http.checked });
  } else {
    const env = {};
    for (const l of lines(form.elements.env.value)) {
      const i = l.indexOf('=');
      if (i <= 0) throw Object.assign(new Error(`Environment line "${l}": write KEY=\${KEY}`), { param: 'env' });
      env[l.slice(0, i).trim()] = l.slice(i + 1).trim();
    }
    // The sandbox's enabled alone: on and off keep its stored details (network, paths, limits).
    const sandbox = { '': null, on: { enabled: true }, off: { enabled: false } }[v('sandbox')];
    Object.assign(body, { url: null, bearer_token: null, allow_insecure_http: null }, {
      command: v('command'),
      args: form.elements.args.value.split('\n').map((a) => a.replace(/\r$/, '')).filter((a) => a !== ''),
      working_dir: orNull(v('working_dir')), env, tool_host: orNull(v('tool_host')), sandbox,
    });
  }
  body.tools_allow = lines(form.elements.tools_allow.value);
  body.tools_deny = lines(form.elements.tools_deny.value);
  body.approval = v('approval') || 'none';
  body.approval_tools = lines(form.elements.approval_tools.value);
  body.approval_by = v('approval_by') || 'admin';
  body.pin_tools = v('pin_tools') !== 'false';
  body.rate_limit = orNull(v('rate_limit'));
  body.max_concurrency = num('max_concurrency');
  body.max_output_bytes = num('max_output_bytes');
  return body;
}

// NOT_IN_FORM are the config fields the form does not show: the id is the path's (derived from
// the name for a new server); enabled, expose and oauth are set through the API or zestctl. An edit,
// a merge patch, leaves them as stored.
const NOT_IN_FORM = ['id', 'enabled', 'expose', 'oauth'];

// mergePatch applies a JSON merge patch (RFC 7396) to a copy of target: what Zest does with
// formBody on PATCH, so that a test connection tries the config the edit would store.
function mergePatch(target, patch) {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out = target && typeof target === 'object' && !Array.isArray(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

// sandboxChoice is the form's choice for a server's stored sandbox: '' (the tool host's
// default), 'on' or 'off'.
function sandboxChoice(s) {
  const sb = s.sandbox;
  if (typeof sb === 'boolean') return sb ? 'on' : 'off';
  if (!sb || typeof sb !== 'object' || Object.keys(sb).length === 0) return '';
  return sb.enabled === false ? 'off' : 'on'; // an object without enabled asks for the sandbox
}

function serverForm(app, existing, onSaved) {
  const { el, field } = app;
  const s = existing || {};
  const isHTTP = s.transport === 'streamable-http';
  const radio = (value, label) => el('div', { class: 'check' },
    el('input', { type: 'radio', name: 'transport', id: `transport-${value}`, value, checked: (value === 'streamable-http') === isHTTP }),
    el('label', { for: `transport-${value}` }, label));
  const httpPart = el('div', { id: 'http-fields' },
    field('URL', el('input', { type: 'url', name: 'url', value: s.url || '', placeholder: 'https://host/mcp', autocomplete: 'off' })),
    field('Bearer token', el('input', { type: 'text', name: 'bearer_token', value: s.bearer_token || '', placeholder: '${MY_TOKEN}', autocomplete: 'off' }),
      'An environment variable reference such as ${GITHUB_TOKEN}, resolved where Zest runs. Raw tokens are refused.'),
    el('div', { class: 'check field' }, el('input', { type: 'checkbox', name: 'allow_insecure_http', id: 'allow-insecure', checked: !!s.allow_insecure_http }),
      el('label', { for: 'allow-insecure' }, 'Allow insecure HTTP (plain http to a host other than this machine)')));
  const stdioPart = el('div', { id: 'stdio-fields' },
    field('Command', el('input', { type: 'text', name: 'command', value: s.command || '', placeholder: 'npx', autocomplete: 'off' })),
    field('Working directory', el('input', { type: 'text', name: 'working_dir', value: s.working_dir || '', autocomplete: 'off' })),
    field('Arguments (one per line)', el('textarea', { name: 'args', rows: '3' }, (s.args || []).join('\n'))),
    field('Environment (one KEY=${KEY} per line)', el('textarea', { name: 'env', rows: '2' }, Object.entries(s.env || {}).map(([k, v]) => `${k}=${v}`).join('\n')),
      'Each value must be a ${VARIABLE} reference, resolved on the tool host; raw values are refused so that no secret is stored.'),
    field('Tool host', el('input', { type: 'text', name: 'tool_host', value: s.tool_host || '', autocomplete: 'off' }),
      'Empty: Zest picks a healthy tool host. A tool host name (its ZEST_TOOLHOST_NAME) pins the server to that machine, where its files are.'),
    field('Sandbox', el('select', { name: 'sandbox' },
      el('option', { value: '', selected: sandboxChoice(s) === '' }, 'The tool host\'s default (ZEST_TOOLHOST_SANDBOX)'),
      el('option', { value: 'on', selected: sandboxChoice(s) === 'on' }, 'On: confined (no network, read-only files, limits)'),
      el('option', { value: 'off', selected: sandboxChoice(s) === 'off' }, 'Off: a plain process of the tool host\'s user')),
      'Its details (network, writable paths, limits) are set through the API or zestctl and kept here.'));
  const result = el('div', { id: 'form-result', 'aria-live': 'polite' });
  // Examples fill the form with a well-known server (npx fetches it on first start).
  const example = (label, name, args) => el('button', { type: 'button', class: 'secondary small', onclick: () => {
    form.querySelector('#transport-stdio').checked = true;
    sync();
    form.elements.name.value = name;
    form.elements.command.value = 'npx';
    form.elements.args.value = args.join('\n');
    form.elements.name.focus();
    app.announce(`Filled in ${label}: press Save and connect.`);
  } }, label);
  const examples = existing ? null : el('div', { class: 'row' }, el('span', { class: 'muted' }, 'Examples:'),
    example('Everything (test server)', 'everything', ['-y', '@modelcontextprotocol/server-everything']),
    example('Memory', 'memory', ['-y', '@modelcontextprotocol/server-memory']),
    example('Filesystem (/tmp)', 'filesystem', ['-y', '@modelcontextprotocol/server-filesystem', '/tmp']));
  const form = el('form', { id: 'server-form', novalidate: true, 'aria-labelledby': 'form-h' },
    el('h2', { id: 'form-h' }, existing ? `Edit ${s.name || s.id}` : 'Add a server'),
    examples,
    el('fieldset', {}, el('legend', {}, 'Connection type'), radio('streamable-http', 'HTTP endpoint'), radio('stdio', 'Local process')),
    field('Name', el('input', { type: 'text', name: 'name', value: s.name || '', required: true, autocomplete: 'off' }),
      existing ? null : 'The id is derived from it (letters, digits, . _ -).'),
    field('Timeout (ms)', el('input', { type: 'number', name: 'timeout_ms', min: '1000', max: '300000', step: '1', value: s.timeout_ms || '' }), 'From 1000 to 300000; 30000 when empty.'),
    httpPart, stdioPart,
    el('details', { open: (s.tools_allow || []).length + (s.tools_deny || []).length > 0 }, el('summary', {}, 'Tool filters'),
      field('Allow only these tools (glob patterns, one per line)', el('textarea', { name: 'tools_allow', rows: '2' }, (s.tools_allow || []).join('\n'))),
      field('Hide these tools (glob patterns, one per line)', el('textarea', { name: 'tools_deny', rows: '2' }, (s.tools_deny || []).join('\n')))),
    el('details', { open: !!(s.approval === 'required' || (s.approval_tools || []).length || s.rate_limit || s.max_concurrency || s.max_output_bytes) },
      el('summary', {}, 'Approval and limits'),
      field('Approval', el('select', { name: 'approval' },
        el('option', { value: 'none', selected: s.approval !== 'required' }, 'None: tools run when called'),
        el('option', { value: 'required', selected: s.approval === 'required' }, 'Required: every call waits for an administrator')),
        'A held call waits until it is decided on the Approvals page (or by the MCP client, below).'),
      field('Who decides', el('select', { name: 'approval_by' },
        el('option', { value: 'admin', selected: s.approval_by !== 'client' }, 'An administrator (the admin key) on every path'),
        el('option', { value: 'client', selected: s.approval_by === 'client' }, 'The MCP client\'s user (elicitation); chats still wait for an administrator')),
        'With "client", whoever holds the API key approves their own MCP calls.'),
      field('Tools that need approval (glob patterns, one per line)', el('textarea', { name: 'approval_tools', rows: '2' }, (s.approval_tools || []).join('\n'))),
      field('Tool definitions', el('select', { name: 'pin_tools' },
        el('option', { value: 'true', selected: s.pin_tools !== false }, 'Pinned: a changed or new tool is held until it is accepted'),
        el('option', { value: 'false', selected: s.pin_tools === false }, 'Not pinned: a server\'s changes are served at once')),
        'A held tool is not listed nor callable anywhere; the Pins page shows the difference and accepts or refuses it.'),
      field('Rate limit', el('input', { type: 'text', name: 'rate_limit', value: s.rate_limit || '', placeholder: '10/s', autocomplete: 'off' }),
        'Tool calls of all callers together: N/s, N/m or N/h, with an optional burst as N/s:B. Empty: no limit of its own.'),
      field('Calls at once', el('input', { type: 'number', name: 'max_concurrency', min: '1', max: '1024', step: '1', value: s.max_concurrency || '' }),
        'From 1 to 1024. Empty: no limit of its own.'),
      field('Largest tool result (bytes)', el('input', { type: 'number', name: 'max_output_bytes', min: '1024', max: '41943040', step: '1', value: s.max_output_bytes || '' }),
        'From 1024 to 41943040. Empty: the operator\'s default (ZEST_TOOL_OUTPUT_MAX_BYTES, 1 MiB).')),
    el('div', { class: 'actions' },
      el('button', { type: 'button', class: 'secondary', id: 'test-button' }, 'Test connection'),
      el('button', { type: 'submit', id: 'save-button' }, 'Save and connect'),
      existing ? el('button', { type: 'button', class: 'secondary', onclick: () => onSaved(null) }, 'Cancel') : null),
    result);
  const sync = () => {
    const http = form.elements.transport.value === 'streamable-http';
    httpPart.hidden = !http;
    stdioPart.hidden = http;
  };
  for (const r of form.querySelectorAll('input[name="transport"]')) r.addEventListener('change', sync);
  sync();

  // showError shows what failed: a Test saves nothing, so only a Save says "Not saved".
  const showError = (e, testing) => {
    const param = e.param || '';
    if (param && app.fieldError(form, param, e.message)) {
      result.replaceChildren(el('p', { class: 'error', role: 'alert' }, testing ? `The test failed: see ${param}. Nothing was saved.` : `Not saved: see ${param}.`));
    } else if (testing) {
      result.replaceChildren(el('p', { class: 'error' }, 'The test failed. Nothing was saved.'), app.errorBox(e));
    } else result.replaceChildren(app.errorBox(e));
  };
  form.querySelector('#test-button').addEventListener('click', async () => {
    app.clearFieldErrors(form);
    result.replaceChildren(el('p', {}, 'Testing…'));
    try {
      // Editing, the config the edit would store; a state's read-only fields are ignored.
      const body = existing ? mergePatch(s, formBody(form)) : formBody(form);
      if (!body.name && !body.id) body.name = 'test';
      const r = await app.api('POST', '/internal/mcp/servers/test', body);
      const n = ((r.server && r.server.tools) || []).length;
      result.replaceChildren(el('p', { class: 'okbox' }, `Connection works: ${r.server.server_info ? r.server.server_info.name : 'the server'} answered with ${n} tool${n === 1 ? '' : 's'} (protocol ${r.server.protocol_version}). Nothing was saved.`));
      app.announce(`Test connection succeeded: ${n} tools.`);
    } catch (e) {
      showError(e, true);
      app.announce('Test connection failed.');
    }
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    app.clearFieldErrors(form);
    let saved;
    try {
      saved = existing
        ? (await app.api('PATCH', `/internal/mcp/servers/${encodeURIComponent(s.id)}`, formBody(form))).server
        : (await app.api('POST', '/internal/mcp/servers', formBody(form))).server;
    } catch (e) {
      showError(e);
      return;
    }
    result.replaceChildren();
    onSaved(saved);
  });
  return form;
}

// oauthLine is where Zest stands with a server that signs in by OAuth: "Signed in as … until …"
// or "Needs sign-in" and why (never a token: the state holds none).
function oauthLine(app, s) {
  const { el } = app;
  const st = s.oauth_state || {};
  if (st.status === 'signed_in') {
    return el('p', { class: 'muted', 'data-part': 'oauth' }, `Signed in as ${st.subject || 'unknown'}${st.expires ? ` until ${st.expires}` : ''}${st.refreshable ? ' (refreshed without you)' : ''}`);
  }
  return el('p', { class: 'error', 'data-part': 'oauth' }, el('strong', {}, 'Needs sign-in: '), st.message || 'Sign in to let Zest call this server.');
}

function serverItem(app, s, actions) {
  const { el } = app;
  const status = busy.has(s.id) ? 'connecting' : s.status;
  const tools = s.tools || [];
  const proc = s.process || null;
  const where = s.transport === 'streamable-http' ? s.url : [s.command, ...(s.args || [])].join(' ');
  const btn = (label, f, cls = 'secondary small') => el('button', { type: 'button', class: cls, onclick: f, 'aria-label': `${label} ${s.name || s.id}` }, label);
  return el('li', { id: `server-${s.id}`, tabindex: '-1', 'data-status': status, 'aria-labelledby': `server-${s.id}-name` },
    el('div', { class: 'row' },
      el('h3', { id: `server-${s.id}-name`, class: 'grow' }, s.name || s.id, ' ', el('span', { class: 'muted mono' }, `(${s.id})`)),
      badge(app, status)),
    el('p', { class: 'muted mono' }, `${s.transport === 'streamable-http' ? 'HTTP' : 'Local process'}: ${where}`),
    s.transport !== 'streamable-http' && s.placement
      ? el('p', { class: 'muted', 'data-part': 'placement' }, `Tool host: ${s.placement}${s.tool_host ? ' (pinned)' : ''}`) : null,
    s.server_info ? el('p', { class: 'muted' }, `${s.server_info.title || s.server_info.name} ${s.server_info.version || ''} · protocol ${s.protocol_version}`) : null,
    s.last_error ? el('p', { class: 'error' }, el('strong', {}, 'Last error: '), s.last_error) : null,
    s.oauth ? oauthLine(app, s) : null,
    (s.tools_allow || []).length || (s.tools_deny || []).length
      ? el('p', { class: 'muted' }, `Filters: allow ${(s.tools_allow || []).join(', ') || 'all'}; hide ${(s.tools_deny || []).join(', ') || 'none'}`) : null,
    el('details', { 'data-part': 'tools' }, el('summary', {}, `Tools (${tools.length})`),
      tools.length ? el('ul', {}, tools.map((t) => el('li', {}, el('code', {}, t.name), t.description ? ` — ${t.description}` : '', ' ',
        el('a', { href: `#/tools?server=${encodeURIComponent(s.id)}&tool=${encodeURIComponent(t.name)}`, 'aria-label': `Try ${t.name} of ${s.id}` }, 'Try'))))
        : el('p', { class: 'muted' }, s.connected ? 'No tools.' : 'Connect to discover its tools.')),
    proc && proc.stderr_tail ? el('details', { 'data-part': 'stderr' }, el('summary', {}, 'Standard error (last lines)'), el('pre', {}, proc.stderr_tail)) : null,
    proc ? el('p', { class: 'muted' }, `Process ${proc.state}${proc.pid ? `, pid ${proc.pid}` : ''}, restarts ${proc.restart_count || 0}`) : null,
    el('div', { class: 'actions' },
      btn('Edit', () => actions.edit(s)),
      btn('Refresh tools', () => actions.run(s, 'refresh-tools', 'Tools refreshed')),
      s.oauth && s.oauth.grant !== 'client_credentials' ? btn('Sign in', () => actions.signIn(s)) : null,
      s.oauth_state && s.oauth_state.status === 'signed_in' ? btn('Sign out', () => actions.signOut(s)) : null,
      s.connected ? btn('Disconnect', () => actions.run(s, 'disconnect', 'Disconnected')) : btn('Connect', () => actions.connect(s)),
      btn('Remove', () => actions.remove(s), 'danger small')));
}

export default {
  title: 'External MCP servers',
  async render(main, app) {
    const { el } = app;
    const summary = el('p', { id: 'servers-summary' });
    const list = el('ul', { class: 'plain servers', 'aria-label': 'Registered MCP servers', id: 'server-list' });
    const msg = el('div', { id: 'servers-msg' });
    const formSlot = el('div', { id: 'form-slot' });
    // An h2 over the list: each server's name is an h3 (headings go down one level at a time).
    const install = installSection(app, {
      registered: (id) => servers.some((s) => s.id === id),
      installed: async (saved) => { await actions.connect(saved, true); },
    });
    main.append(el('h2', { id: 'list-h' }, 'Registered servers'), summary, msg, list, install, formSlot);
    let servers = [];

    let drawn = '';
    const draw = () => {
      const connected = servers.filter((s) => s.status === 'connected').length;
      summary.textContent = `${connected}/${servers.length} connected`;
      // Redraw only what changed, and keep the focus and the open <details> where they were:
      // the list is polled, and a keyboard user must not lose their place.
      const sig = JSON.stringify([servers, [...busy]]);
      if (sig === drawn) return;
      drawn = sig;
      const active = document.activeElement;
      const focusKey = active && list.contains(active) ? (active.id ? `#${CSS.escape(active.id)}` : active.getAttribute('aria-label') ? `[aria-label="${CSS.escape(active.getAttribute('aria-label'))}"]` : null) : null;
      const open = [...list.querySelectorAll('details[open]')].map((d) => `${d.closest('li').id}/${d.dataset.part}`);
      list.replaceChildren(...servers.map((s) => serverItem(app, s, actions)));
      if (!servers.length) list.replaceChildren(el('li', {}, el('p', { class: 'muted' }, 'No server registered yet: add one below.')));
      for (const d of list.querySelectorAll('details')) if (open.includes(`${d.closest('li').id}/${d.dataset.part}`)) d.open = true;
      if (focusKey) {
        const again = list.querySelector(focusKey);
        if (again) again.focus();
      }
    };
    const load = async (announceChanges) => {
      const r = await app.api('GET', '/internal/mcp/servers');
      servers = r.servers || [];
      if (announceChanges) {
        for (const s of servers) {
          const before = lastStatus.get(s.id);
          if (before && before !== s.status && !busy.has(s.id)) app.announce(`${s.name || s.id}: ${(STATUS[s.status] || { text: s.status }).text}`);
        }
      }
      lastStatus = new Map(servers.map((s) => [s.id, s.status]));
      draw();
    };
    const showForm = (existing) => {
      formSlot.replaceChildren(serverForm(app, existing, async (saved) => {
        if (!saved) { showForm(null); return; }
        showForm(null);
        await actions.connect(saved, true);
      }));
    };
    const actions = {
      // The form starts from the server as stored now, not the list's copy of the last poll,
      // so that it shows what a change made since has set.
      edit: async (s) => {
        let stored = s;
        try { stored = (await app.api('GET', `/internal/mcp/servers/${encodeURIComponent(s.id)}`)).server || s; } catch (e) { /* the list's copy */ }
        showForm(stored);
        formSlot.querySelector('input[name="name"]').focus();
      },
      connect: async (s, focus) => {
        busy.add(s.id);
        await load(false).catch(() => {});
        app.announce(`${s.name || s.id}: Connecting`);
        let err = null;
        try { await app.api('POST', `/internal/mcp/servers/${encodeURIComponent(s.id)}/connect`); } catch (e) { err = e; }
        busy.delete(s.id);
        await load(false).catch(() => {});
        const now = servers.find((x) => x.id === s.id);
        app.announce(`${s.name || s.id}: ${err ? `Error: ${err.message}` : (STATUS[now && now.status] || { text: 'Connected' }).text}`);
        if (focus) {
          const item = document.getElementById(`server-${s.id}`);
          if (item) item.focus();
        }
      },
      run: async (s, what, done) => {
        try {
          await app.api('POST', `/internal/mcp/servers/${encodeURIComponent(s.id)}/${what}`);
          app.announce(`${s.name || s.id}: ${done}`);
          msg.replaceChildren();
        } catch (e) { msg.replaceChildren(app.errorBox(e)); }
        await load(false).catch(() => {});
      },
      // Sign in: the authorization server's page in this tab; it comes back to Zest's callback,
      // which says how it went and links back here.
      signIn: async (s) => {
        try {
          const r = await app.api('POST', `/internal/mcp/servers/${encodeURIComponent(s.id)}/sign-in`, { redirect_uri: `${window.location.origin}/internal/mcp/oauth/callback` });
          app.announce(`${s.name || s.id}: opening the sign-in page`);
          window.location.assign(r.authorization_url);
        } catch (e) { msg.replaceChildren(app.errorBox(e)); }
      },
      signOut: async (s) => {
        try {
          await app.api('DELETE', `/internal/mcp/servers/${encodeURIComponent(s.id)}/sign-in`);
          app.announce(`${s.name || s.id}: signed out`);
          msg.replaceChildren();
        } catch (e) { msg.replaceChildren(app.errorBox(e)); }
        await load(false).catch(() => {});
      },
      remove: async (s) => {
        if (!window.confirm(`Remove ${s.name || s.id}? Its configuration is deleted and its process stopped.`)) return;
        try {
          await app.api('DELETE', `/internal/mcp/servers/${encodeURIComponent(s.id)}`);
          app.announce(`${s.name || s.id} removed`);
        } catch (e) { msg.replaceChildren(app.errorBox(e)); }
        await load(false).catch(() => {});
        summary.focus();
      },
    };
    summary.setAttribute('tabindex', '-1');
    try {
      await load(false);
    } catch (e) {
      msg.append(app.errorBox(e));
    }
    showForm(null);
    timer = setInterval(() => { load(true).catch(() => {}); }, 3000);
  },
  leave() {
    clearInterval(timer);
    timer = null;
  },
};
