// Try a tool: pick a tool of a connected server, fill a form generated from its inputSchema (or
// edit the arguments as raw JSON), call it through the admin API and see the result rendered by
// content type. #/tools?server=ID&tool=NAME preselects a tool (the Servers view links here).
import { buildSchemaForm, readSchemaForm, summary, SchemaError } from './schemaform.js';

let aborter = null;

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
      return [head, el('pre', {}, String(c.text ?? ''))];
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
        typeof r.text === 'string' ? el('pre', {}, r.text)
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
    const pickSection = el('section', { 'aria-labelledby': 'pick-h' }, el('h2', { id: 'pick-h' }, 'Choose a tool'), missing,
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
      aborter = new AbortController();
      const signal = aborter.signal;
      callButton.disabled = true;
      resultBox.replaceChildren(el('p', {}, `Calling ${t.name}…`));
      const t0 = performance.now();
      try {
        const res = await app.api('POST', `/internal/mcp/servers/${encodeURIComponent(t.server_id)}/tools/call`, { name: t.name, arguments: args }, { signal });
        renderResult(app, resultBox, t, res, Math.round(performance.now() - t0));
      } catch (err) {
        if (err.name === 'AbortError') return;
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

    main.append(pickSection, argsSection, resultSection);
    resetTool();
    if (wanted >= 0) picker.focus();
  },
  leave() {
    if (aborter) aborter.abort();
    aborter = null;
  },
};
