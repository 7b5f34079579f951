// Try a tool: pick a tool of a connected server, fill a form generated from its inputSchema (or
// edit the arguments as raw JSON), call it and see the result rendered by content type, with
// its progress (a bar) and a Cancel; list and read the server's resources, list its prompts
// and get one with arguments; and answer the server's sampling and elicitation requests in
// the page, as the MCP Inspector does. The tools are listed by the admin API; everything else
// is MCP, spoken by the page to the server's public endpoint /mcp/servers/{id} (mcpclient.js).
// #/tools?server=ID&tool=NAME preselects a tool (the Servers view links here).
import { buildSchemaForm, readSchemaForm, summary, SchemaError } from './schemaform.js';
import { McpSession } from './mcpclient.js';

let aborter = null;
// One MCP session per server, opened on first use, closed when the view is left.
const sessions = new Map();

function closeSessions() {
  for (const s of sessions.values()) s.then((x) => x.close(), () => {});
  sessions.clear();
}

// hashQuery reads ?server=&tool= from the location's fragment.
function hashQuery() {
  const i = location.hash.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : location.hash.slice(i + 1));
}

function setHashQuery(t) {
  const q = new URLSearchParams({ server: t.server_id, tool: t.name });
  history.replaceState(null, '', `${location.pathname}${location.search}#/tools?${q}`);
}

// Tabs: the ARIA tabs pattern (arrow keys, Home and End move between the tabs).
function tabs(app, items, onSelect) {
  const { el } = app;
  const buttons = [];
  const list = el('div', { class: 'tabs', role: 'tablist', 'aria-label': 'How to give the arguments' });
  const select = (i, focus) => {
    if (onSelect(items[i].key) === false) return;
    buttons.forEach((b, j) => {
      b.setAttribute('aria-selected', String(i === j));
      b.tabIndex = i === j ? 0 : -1;
      items[j].panel.hidden = i !== j;
    });
    if (focus) buttons[i].focus();
  };
  items.forEach((it, i) => {
    const b = el('button', { type: 'button', role: 'tab', id: `tab-${it.key}`, 'aria-controls': `panel-${it.key}`, 'aria-selected': String(i === 0), tabindex: i === 0 ? '0' : '-1',
      onclick: () => select(i, false),
      onkeydown: (e) => {
        const n = items.length;
        let j = null;
        if (e.key === 'ArrowRight') j = (i + 1) % n;
        else if (e.key === 'ArrowLeft') j = (i - 1 + n) % n;
        else if (e.key === 'Home') j = 0;
        else if (e.key === 'End') j = n - 1;
        if (j !== null) {
          e.preventDefault();
          select(j, true);
        }
      } }, it.label);
    buttons.push(b);
    list.append(b);
    it.panel.id = `panel-${it.key}`;
    it.panel.setAttribute('role', 'tabpanel');
    it.panel.setAttribute('aria-labelledby', b.id);
    it.panel.hidden = i !== 0;
  });
  return { list, select };
}

// renderContent renders one item of a CallToolResult's content.
function renderContent(app, c, i, n, toolName) {
  const { el } = app;
  const type = c && typeof c.type === 'string' ? c.type : 'unknown';
  const head = el('h3', {}, `Content ${i + 1} of ${n}: ${type}`);
  switch (type) {
    case 'text':
      return [head, el('pre', { tabindex: '0' }, String(c.text ?? ''))];
    case 'image':
      return [head, el('figure', {},
        el('img', { src: `data:${c.mimeType || 'image/png'};base64,${c.data || ''}`, alt: `Image returned by the tool ${toolName}` }),
        el('figcaption', { class: 'help' }, c.mimeType || 'image'))];
    case 'audio':
      return [head, el('audio', { controls: true, src: `data:${c.mimeType || 'audio/wav'};base64,${c.data || ''}`, 'aria-label': `Audio returned by the tool ${toolName}` }),
        el('p', { class: 'help' }, c.mimeType || 'audio')];
    case 'resource': {
      const r = c.resource || {};
      return [head,
        el('p', {}, 'Resource ', el('code', { class: 'url' }, r.uri || '(no uri)'), r.mimeType ? ` (${r.mimeType})` : ''),
        typeof r.text === 'string' ? el('pre', { tabindex: '0' }, r.text)
          : typeof r.blob === 'string' ? el('p', { class: 'help' }, `Binary content (${Math.floor(r.blob.length * 3 / 4)} bytes, base64) not shown.`)
            : el('p', { class: 'help' }, 'No content given.')];
    }
    case 'resource_link':
      return [head,
        el('p', {}, 'Link to the resource ', el('code', { class: 'url' }, c.uri || '(no uri)'), c.mimeType ? ` (${c.mimeType})` : ''),
        c.name || c.title ? el('p', {}, c.title || c.name) : null,
        c.description ? el('p', { class: 'help' }, c.description) : null];
    default:
      return [head, el('pre', {}, JSON.stringify(c, null, 2))];
  }
}

function renderResult(app, box, t, res, ms) {
  const { el } = app;
  const r = (res && res.result) || {};
  const content = Array.isArray(r.content) ? r.content : [];
  const took = `took ${ms} ms`;
  const parts = [];
  if (r.isError) {
    parts.push(el('div', { class: 'error', role: 'alert' },
      el('p', {}, el('span', { 'aria-hidden': 'true' }, '⚠ '), el('strong', {}, 'The tool reported an error'), ` (${took}).`)));
  } else {
    parts.push(el('p', {}, el('span', { class: 'status ok' }, el('span', { 'aria-hidden': 'true' }, '✓'), 'Success'), ` ${t.name} on ${t.server_name || t.server_id} ${took}.`));
  }
  const body = el('div', { class: r.isError ? 'result tool-error' : 'result' });
  if (content.length === 0) body.append(el('p', { class: 'help' }, 'The result has no content.'));
  content.forEach((c, i) => body.append(...renderContent(app, c, i, content.length, t.name).filter(Boolean)));
  if (r.structuredContent !== undefined && r.structuredContent !== null) {
    body.append(el('h3', {}, 'Structured content'), el('pre', {}, JSON.stringify(r.structuredContent, null, 2)));
  }
  const raw = JSON.stringify(res, null, 2);
  body.append(el('details', {}, el('summary', {}, 'Raw answer (JSON)'), el('div', { class: 'actions' }, app.copyButton(raw, 'Copy the answer')), el('pre', {}, raw)));
  parts.push(body);
  box.replaceChildren(...parts);
  if (!r.isError) app.announce(`${t.name} answered with ${content.length} content item${content.length === 1 ? '' : 's'}, ${took}.`);
}

// samplingForm asks the person for the model's answer to a sampling/createMessage.
function samplingForm(app, m, resolve, reject) {
  const { el } = app;
  const p = m.params || {};
  const text = (c) => (c && c.type === 'text' ? c.text : JSON.stringify(c));
  const answer = el('textarea', { name: 'sampling-answer', rows: 4 });
  const model = el('input', { type: 'text', name: 'sampling-model', value: 'a person in the Zest console' });
  const form = el('form', { class: 'card server-request', 'aria-labelledby': 'sampling-h', novalidate: true },
    el('h3', { id: 'sampling-h' }, 'The server asks for a model\'s answer (sampling)'),
    p.systemPrompt ? el('p', {}, el('strong', {}, 'System prompt: '), p.systemPrompt) : null,
    el('ol', { class: 'plain' }, (p.messages || []).map((x) => el('li', {}, el('strong', {}, `${x.role}: `), text(x.content)))),
    el('p', { class: 'help' }, `At most ${p.maxTokens || '?'} tokens${p.temperature !== undefined ? `, temperature ${p.temperature}` : ''}. You answer in the model's place.`),
    app.field('Answer', answer), app.field('Model (as reported to the server)', model),
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Send the answer'),
      el('button', { type: 'button', class: 'secondary', onclick: () => reject({ code: -1, message: 'The person in the console declined the sampling request' }) }, 'Decline')));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    app.clearFieldErrors(form);
    if (!answer.value.trim()) {
      app.fieldError(form, 'sampling-answer', 'Type the answer, or Decline.');
      return;
    }
    resolve({ role: 'assistant', content: { type: 'text', text: answer.value }, model: model.value || 'console', stopReason: 'endTurn' });
  });
  return form;
}

// elicitationForm asks the person for the input an elicitation/create requests: a form built
// from its requestedSchema (or, in URL mode, a link to open); Accept, Decline or Cancel.
function elicitationForm(app, m, resolve) {
  const { el } = app;
  const p = m.params || {};
  const box = p.mode === 'url' ? null : buildSchemaForm(p.requestedSchema || { type: 'object' }, { prefix: 'elicit' });
  const form = el('form', { class: 'card server-request', 'aria-labelledby': 'elicit-h', novalidate: true },
    el('h3', { id: 'elicit-h' }, 'The server asks for your input (elicitation)'),
    el('p', {}, p.message || ''),
    p.mode === 'url' ? el('p', {}, el('a', { href: p.url, target: '_blank', rel: 'noopener noreferrer' }, p.url)) : box,
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Accept'),
      el('button', { type: 'button', class: 'secondary', onclick: () => resolve({ action: 'decline' }) }, 'Decline'),
      el('button', { type: 'button', class: 'secondary', onclick: () => resolve({ action: 'cancel' }) }, 'Cancel')));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    app.clearFieldErrors(form);
    if (!box) {
      resolve({ action: 'accept' });
      return;
    }
    try {
      resolve({ action: 'accept', content: readSchemaForm(box) });
    } catch (err) {
      if (!(err instanceof SchemaError && app.fieldError(form, err.param, err.message))) form.append(app.errorBox(err));
    }
  });
  return form;
}

// resourcesPart lists the current tool's server's resources (resources/list) and reads one
// (resources/read).
function resourcesPart(app, current, sessionFor) {
  const { el } = app;
  const box = el('div', { id: 'resources' });
  const reset = () => box.replaceChildren(el('p', { class: 'help' }, 'List the resources of the chosen tool\'s server.'));
  const list = async () => {
    const t = current();
    box.replaceChildren(el('p', {}, 'Listing…'));
    try {
      const s = await sessionFor(t.server_id);
      if (!s.capabilities.resources) {
        box.replaceChildren(el('p', { class: 'help' }, `${t.server_name || t.server_id} offers no resources.`));
        return;
      }
      const got = await s.request('resources/list', {});
      const items = got.resources || [];
      const out = el('div', { id: 'resource-content' });
      box.replaceChildren(el('p', {}, `${items.length} resource${items.length === 1 ? '' : 's'} of ${t.server_name || t.server_id}${got.nextCursor ? ' (the first page)' : ''}.`),
        el('div', { class: 'table-wrap' }, el('table', {}, el('caption', { class: 'visually-hidden' }, 'Resources'),
          el('thead', {}, el('tr', {}, ['Name', 'URI', 'Type', ''].map((h, i) => el(i === 3 ? 'td' : 'th', i === 3 ? {} : { scope: 'col' }, h)))),
          el('tbody', {}, items.map((r) => el('tr', {},
            el('td', {}, r.title || r.name || ''), el('td', {}, el('code', {}, r.uri)), el('td', {}, r.mimeType || ''),
            el('td', {}, el('button', { type: 'button', class: 'secondary small', 'aria-label': `Read ${r.name || r.uri}`, onclick: async () => {
              out.replaceChildren(el('p', {}, `Reading ${r.uri}…`));
              try {
                const read = await s.request('resources/read', { uri: r.uri });
                const contents = read.contents || [];
                out.replaceChildren(el('h3', {}, `Read ${r.name || r.uri}`), ...contents.flatMap((c, i) => renderContent(app, { type: 'resource', resource: c }, i, contents.length, r.uri)));
                app.announce(`${r.name || r.uri} read: ${contents.length} content item${contents.length === 1 ? '' : 's'}.`);
              } catch (err) {
                out.replaceChildren(app.errorBox(err));
              }
            } }, 'Read'))))))), out);
    } catch (err) {
      box.replaceChildren(app.errorBox(err));
    }
  };
  const section = el('section', { 'aria-labelledby': 'res-h' }, el('h2', { id: 'res-h' }, 'Resources'),
    el('div', { class: 'actions' }, el('button', { type: 'button', class: 'secondary', id: 'list-resources', onclick: list }, 'List resources')), box);
  reset();
  return { section, reset };
}

// promptsPart lists the current tool's server's prompts (prompts/list) and gets one with the
// arguments a person gives (prompts/get).
function promptsPart(app, current, sessionFor) {
  const { el } = app;
  const box = el('div', { id: 'prompts' });
  const reset = () => box.replaceChildren(el('p', { class: 'help' }, 'List the prompts of the chosen tool\'s server.'));
  const use = (s, pr, out) => {
    const form = el('form', { class: 'card', 'aria-labelledby': 'prompt-h', novalidate: true, id: 'prompt-form' },
      el('h3', { id: 'prompt-h' }, `Get the prompt ${pr.name}`),
      pr.description ? el('p', { class: 'help' }, pr.description) : null,
      (pr.arguments || []).map((a) => app.field(`${a.name}${a.required ? ' (required)' : ''}`,
        el('input', { type: 'text', name: `prompt-${a.name}`, required: !!a.required }), a.description)),
      el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Get the prompt')));
    const result = el('div', { id: 'prompt-result' });
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      app.clearFieldErrors(form);
      const args = {};
      for (const a of pr.arguments || []) {
        const v = form.elements[`prompt-${a.name}`].value;
        if (v) args[a.name] = v;
        else if (a.required) {
          app.fieldError(form, `prompt-${a.name}`, `${a.name} is required.`);
          return;
        }
      }
      result.replaceChildren(el('p', {}, 'Getting…'));
      try {
        const got = await s.request('prompts/get', { name: pr.name, arguments: args });
        const msgs = got.messages || [];
        result.replaceChildren(el('p', {}, `${msgs.length} message${msgs.length === 1 ? '' : 's'}${got.description ? `: ${got.description}` : ''}`),
          ...msgs.map((m2, i) => el('div', { class: 'msg' }, el('p', { class: 'who' }, m2.role), ...renderContent(app, m2.content, i, msgs.length, pr.name).slice(1))));
        app.announce(`The prompt ${pr.name}: ${msgs.length} messages.`);
      } catch (err) {
        result.replaceChildren(app.errorBox(err));
      }
    });
    out.replaceChildren(form, result);
    const first = form.querySelector('input');
    if (first) first.focus();
  };
  const list = async () => {
    const t = current();
    box.replaceChildren(el('p', {}, 'Listing…'));
    try {
      const s = await sessionFor(t.server_id);
      if (!s.capabilities.prompts) {
        box.replaceChildren(el('p', { class: 'help' }, `${t.server_name || t.server_id} offers no prompts.`));
        return;
      }
      const got = await s.request('prompts/list', {});
      const items = got.prompts || [];
      const out = el('div', {});
      box.replaceChildren(el('p', {}, `${items.length} prompt${items.length === 1 ? '' : 's'} of ${t.server_name || t.server_id}.`),
        el('ul', { class: 'plain prompt-list' }, items.map((pr) => el('li', { class: 'row' },
          el('button', { type: 'button', class: 'secondary small', 'aria-label': `Use the prompt ${pr.name}`, onclick: () => use(s, pr, out) }, 'Use'),
          el('code', {}, pr.name), pr.arguments && pr.arguments.length ? el('span', { class: 'muted small' }, `${pr.arguments.length} argument${pr.arguments.length === 1 ? '' : 's'}`) : null,
          pr.description ? el('span', { class: 'help' }, pr.description) : null))), out);
    } catch (err) {
      box.replaceChildren(app.errorBox(err));
    }
  };
  const section = el('section', { 'aria-labelledby': 'prompts-h' }, el('h2', { id: 'prompts-h' }, 'Prompts'),
    el('div', { class: 'actions' }, el('button', { type: 'button', class: 'secondary', id: 'list-prompts', onclick: list }, 'List prompts')), box);
  reset();
  return { section, reset };
}

export default {
  title: 'Try a tool',
  async render(main, app) {
    const { el } = app;
    const q = hashQuery();
    const loading = el('p', {}, 'Loading the tools…');
    main.append(loading);
    let tools;
    try {
      tools = ((await app.api('GET', '/internal/mcp/tools')) || {}).tools || [];
    } catch (e) {
      loading.remove();
      main.append(app.errorBox(e));
      return;
    } finally {
      loading.remove();
    }
    if (tools.length === 0) {
      main.append(el('div', { class: 'notice' }, el('p', {}, 'No connected server has tools yet. ', el('a', { href: '#/servers' }, 'Register and connect a server'), ', then come back.')));
      return;
    }

    // The picker, grouped by server.
    const groups = new Map();
    tools.forEach((t, i) => {
      const key = t.server_id;
      if (!groups.has(key)) groups.set(key, { label: t.server_name && t.server_name !== t.server_id ? `${t.server_name} (${t.server_id})` : t.server_id, items: [] });
      groups.get(key).items.push([t, i]);
    });
    const picker = el('select', { name: 'tool' },
      [...groups.values()].map((g) => el('optgroup', { label: g.label },
        g.items.map(([t, i]) => el('option', { value: String(i) }, `${t.title && t.title !== t.name ? `${t.name} — ${t.title}` : t.name} (${summary(t.inputSchema)})`)))));
    const wanted = tools.findIndex((t) => t.server_id === q.get('server') && t.name === q.get('tool'));
    const missing = q.get('tool') && wanted < 0
      ? el('div', { class: 'notice' }, el('p', {}, `The tool ${q.get('tool')} of ${q.get('server') || 'that server'} is not among the connected servers' tools; pick another.`))
      : null;
    picker.value = String(wanted >= 0 ? wanted : 0);
    const about = el('div', {});
    // Search: the picker keeps the tools whose name, title, description or server holds every
    // word typed; the first of them is chosen when the chosen one no longer matches.
    const search = el('input', { type: 'search', name: 'tool-search', autocomplete: 'off' });
    const matches = el('p', { class: 'help', id: 'tool-search-count', 'aria-live': 'polite' });
    search.addEventListener('input', () => {
      const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      let n = 0;
      for (const o of picker.querySelectorAll('option')) {
        const t = tools[Number(o.value)];
        const hay = [t.name, t.title, t.description, t.server_id, t.server_name].filter(Boolean).join(' ').toLowerCase();
        o.hidden = o.disabled = !words.every((w) => hay.includes(w));
        if (!o.hidden) n += 1;
      }
      for (const g of picker.querySelectorAll('optgroup')) g.hidden = !g.querySelector('option:not([hidden])');
      matches.textContent = words.length ? `${n} of ${tools.length} tools match.` : '';
      const first = picker.querySelector('option:not([hidden])');
      if (first && picker.selectedOptions[0] && picker.selectedOptions[0].hidden) {
        picker.value = first.value;
        picker.dispatchEvent(new Event('change'));
      }
    });
    const pickSection = el('section', { 'aria-labelledby': 'pick-h' }, el('h2', { id: 'pick-h' }, 'Choose a tool'), missing,
      app.field('Search the tools', search, 'By name, title, description or server.'), matches,
      app.field('Tool', picker, `${tools.length} tool${tools.length === 1 ? '' : 's'} of ${groups.size} connected server${groups.size === 1 ? '' : 's'}, grouped by server.`), about);

    // The arguments: a generated form and a Raw JSON tab.
    const formPanel = el('div', {});
    const rawArea = el('textarea', { name: 'arguments', rows: 10, class: 'mono', spellcheck: 'false' });
    const rawPanel = el('div', {}, app.field('Arguments (a JSON object)', rawArea, 'Always works, whatever the schema: the object is sent as the call\'s arguments.'));
    let mode = 'form';
    let schemaBox = null;
    const form = el('form', { novalidate: true, 'aria-labelledby': 'args-h' });
    const callButton = el('button', { type: 'submit' }, 'Call the tool');
    const resultBox = el('div', { id: 'tool-result' });
    const resultSection = el('section', { 'aria-labelledby': 'result-h' }, el('h2', { id: 'result-h' }, 'Result'), resultBox);
    resultBox.append(el('p', { class: 'help' }, 'The result shows here after a call.'));

    const current = () => tools[Number(picker.value)];
    const showTool = (values) => {
      const t = current();
      about.replaceChildren(
        el('p', {}, el('strong', {}, t.title || t.name), ` on ${t.server_name || t.server_id}`, t.chat_name ? [' · in chats: ', el('code', {}, t.chat_name)] : null),
        t.description ? el('p', { class: 'help' }, t.description) : null);
      schemaBox = buildSchemaForm(t.inputSchema, { values, prefix: 'arg' });
      formPanel.replaceChildren(schemaBox);
    };
    const tabbar = tabs(app, [{ key: 'form', label: 'Form', panel: formPanel }, { key: 'raw', label: 'Raw JSON', panel: rawPanel }], (key) => {
      app.clearFieldErrors(form);
      if (key === mode) return true;
      if (key === 'raw') {
        try {
          rawArea.value = JSON.stringify(readSchemaForm(schemaBox), null, 2);
        } catch {
          // Keep the raw text as it was: the form's value could not be read.
        }
      } else {
        let v;
        try {
          v = rawArea.value.trim() ? JSON.parse(rawArea.value) : {};
        } catch (e) {
          app.fieldError(form, 'arguments', `Not valid JSON: ${e.message}. Fix it to go back to the form.`);
          return false;
        }
        if (!v || typeof v !== 'object' || Array.isArray(v)) {
          app.fieldError(form, 'arguments', 'The arguments must be a JSON object ({…}).');
          return false;
        }
        showTool(v);
      }
      mode = key;
      return true;
    });
    form.append(tabbar.list, formPanel, rawPanel, el('div', { class: 'actions' }, callButton));
    const argsSection = el('section', { 'aria-labelledby': 'args-h' }, el('h2', { id: 'args-h' }, 'Arguments'), form);

    const resetTool = () => {
      showTool(undefined);
      rawArea.value = JSON.stringify(readDefaults(), null, 2);
      tabbar.select(0, false);
      resultBox.replaceChildren(el('p', { class: 'help' }, 'The result shows here after a call.'));
    };
    const readDefaults = () => {
      try {
        return readSchemaForm(schemaBox);
      } catch {
        return {};
      }
    };
    picker.addEventListener('change', () => {
      setHashQuery(current());
      resetTool();
      if (missing) missing.remove();
    });

    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      app.clearFieldErrors(form);
      const t = current();
      let args;
      if (mode === 'raw') {
        try {
          args = rawArea.value.trim() ? JSON.parse(rawArea.value) : {};
        } catch (err) {
          app.fieldError(form, 'arguments', `Not valid JSON: ${err.message}`);
          return;
        }
        if (!args || typeof args !== 'object' || Array.isArray(args)) {
          app.fieldError(form, 'arguments', 'The arguments must be a JSON object ({…}).');
          return;
        }
      } else {
        try {
          args = readSchemaForm(schemaBox);
        } catch (err) {
          if (err instanceof SchemaError && app.fieldError(form, err.param, err.message)) return;
          resultBox.replaceChildren(app.errorBox(err));
          return;
        }
      }
      if (aborter) aborter.abort();
      const controller = new AbortController();
      aborter = controller;
      const signal = controller.signal;
      callButton.disabled = true;
      // The progress the server sends (notifications/progress), and Cancel
      // (notifications/cancelled: the server is told, and no answer comes).
      const bar = el('progress', { id: 'call-progress', 'aria-label': `Progress of ${t.name}` });
      const progressText = el('p', { class: 'help', id: 'progress-text', 'aria-live': 'polite' }, 'Running; no progress reported yet.');
      const cancelButton = el('button', { type: 'button', class: 'secondary', id: 'cancel-call' }, 'Cancel the call');
      resultBox.replaceChildren(el('p', {}, `Calling ${t.name}…`), el('div', { class: 'progress' }, bar, progressText), el('div', { class: 'actions' }, cancelButton));
      let reqId = null;
      let cancelled = false;
      const t0 = performance.now();
      cancelButton.addEventListener('click', async () => {
        cancelButton.disabled = true;
        cancelled = true;
        try {
          if (reqId !== null) await (await sessions.get(t.server_id)).cancel(reqId, 'Cancelled by the person in the console');
        } catch (err) {
          // The call is abandoned all the same: its answer is not waited for.
        }
        controller.abort();
        resultBox.replaceChildren(el('p', {}, el('span', { class: 'status disconnected' }, el('span', { 'aria-hidden': 'true' }, '■'), 'Cancelled'),
          ` ${t.name} was cancelled after ${Math.round(performance.now() - t0)} ms: the server was told (notifications/cancelled).`));
        app.announce(`${t.name} cancelled.`);
      });
      try {
        const session = await sessionFor(t.server_id);
        const result = await session.request('tools/call', { name: t.name, arguments: args }, {
          signal,
          onId: (id) => { reqId = id; },
          onProgress: (progress, total, message) => {
            if (total) {
              bar.max = Number(total);
              bar.value = Number(progress);
            }
            progressText.textContent = `${total ? `${progress} of ${total}` : `${progress} done`}${message ? `: ${message}` : ''}`;
          },
        });
        renderResult(app, resultBox, t, { result }, Math.round(performance.now() - t0));
      } catch (err) {
        if (err.name === 'AbortError' || cancelled) return; // Cancel says what happened
        if (err.param && err.param !== 'name' && mode === 'form' && app.fieldError(form, err.param, err.message)) {
          resultBox.replaceChildren();
          return;
        }
        resultBox.replaceChildren(app.errorBox(err));
      } finally {
        callButton.disabled = false;
        if (aborter && aborter.signal === signal) aborter = null;
      }
    });

    // The server's requests of a call (sampling, elicitation), answered by a person here.
    const requestsBox = el('div', { id: 'server-requests' });
    resultSection.append(requestsBox);
    const onRequest = (m) => new Promise((resolve, reject) => {
      const done = (f, v) => { box.remove(); f(v); };
      let box;
      if (m.method === 'sampling/createMessage') box = samplingForm(app, m, (v) => done(resolve, v), (v) => done(reject, v));
      else if (m.method === 'elicitation/create') box = elicitationForm(app, m, (v) => done(resolve, v));
      else if (m.method === 'roots/list') { resolve({ roots: [] }); return; }
      else { reject({ code: -32601, message: `${m.method} is not answered by the console` }); return; }
      requestsBox.append(box);
      app.announce(`The server asks: ${m.method === 'sampling/createMessage' ? 'a model\'s answer' : 'your input'}.`);
      const first = box.querySelector('textarea, input, select, button');
      if (first) first.focus();
    });
    // sessionFor opens a server's session once; a session Zest no longer knows (404, e.g.
    // after a restart) is opened again on the next use.
    const sessionFor = async (id) => {
      const open = sessions.has(id) ? await sessions.get(id).catch(() => null) : null;
      if (!open || open.expired) {
        sessions.delete(id);
        const s = new McpSession(app, `/mcp/servers/${encodeURIComponent(id)}`, { onRequest, onError: (e) => requestsBox.append(app.errorBox(e)) });
        sessions.set(id, s.open().then(() => s));
        sessions.get(id).catch(() => sessions.delete(id));
      }
      return sessions.get(id);
    };

    const resourcesSection = resourcesPart(app, () => current(), sessionFor);
    const promptsSection = promptsPart(app, () => current(), sessionFor);
    picker.addEventListener('change', () => { resourcesSection.reset(); promptsSection.reset(); });

    main.append(pickSection, argsSection, resultSection, resourcesSection.section, promptsSection.section);
    resetTool();
    if (wanted >= 0) picker.focus();
  },
  leave() {
    if (aborter) aborter.abort();
    aborter = null;
    closeSessions();
  },
};
