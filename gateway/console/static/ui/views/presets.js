// Presets: saved chat setups (a model, a system prompt, 0-4 MCP providers, and how the
// providers' tools are shaped: renamed, described anew, hidden, arguments fixed or defaulted).
// The list is a table with Edit and Delete; the form creates or replaces one (POST
// /internal/mcp/presets upserts). Validation errors that name a field (err.param) are shown
// next to it. A preset with tool search offers search_tools and call_tool instead of its
// tools (shaped alike); its edit view lets a person try a search over MCP, on
// /mcp/presets/{id} (mcpclient.js), as any client would.

import { McpSession } from './mcpclient.js';

// MAX_PROVIDERS is the most providers a preset may name (mcpgateway refuses more).
const MAX_PROVIDERS = 4;

// session is Try a search's MCP session with the preset being edited (ended on leaving).
let session = null;

export default {
  title: 'Presets',
  async render(main, app) {
    const { el } = app;
    const listBox = el('div', {});
    const listSection = el('section', { 'aria-labelledby': 'presets-h' }, el('h2', { id: 'presets-h' }, 'Saved presets'), listBox);
    const formSection = el('section', { 'aria-labelledby': 'preset-form-h' });
    main.append(listSection, formSection);
    listBox.append(el('p', {}, 'Loading…'));

    // The presets first: a missing admin key is asked for once, then the rest go together.
    const [presetsR] = await Promise.allSettled([app.api('GET', '/internal/mcp/presets')]);
    const [modelsR, serversR, toolsR] = presetsR.status === 'rejected' ? [null, null, null] : await Promise.allSettled([
      app.api('GET', '/api/v1/models'),
      app.api('GET', '/internal/mcp/servers'),
      app.api('GET', '/internal/mcp/tools'),
    ]);
    if (presetsR.status === 'rejected') {
      listBox.replaceChildren(app.errorBox(presetsR.reason));
      formSection.remove();
      return;
    }
    let presets = (presetsR.value && presetsR.value.presets) || [];
    const models = modelsR.status === 'fulfilled' ? ((modelsR.value && modelsR.value.data) || []).map((m) => m.id) : null;
    const servers = serversR.status === 'fulfilled' ? (serversR.value && serversR.value.servers) || [] : null;
    // The connected servers' tools by chat_name: suggestions for a shaped tool (a tool not
    // listed may still be named: its server may be down, or list it later).
    const knownTools = toolsR.status === 'fulfilled' ? ((toolsR.value && toolsR.value.tools) || []) : [];

    // The form.
    const heading = el('h2', { id: 'preset-form-h', tabindex: '-1' }, 'New preset');
    const idInput = el('input', { type: 'text', name: 'id', required: true, pattern: '[A-Za-z0-9_.\\-]{1,96}', maxlength: '96', autocomplete: 'off', spellcheck: 'false' });
    const idHelp = 'Letters, digits, _ . and - (at most 96). Chats name the preset by it.';
    const nameInput = el('input', { type: 'text', name: 'name', autocomplete: 'off' });
    const modelControl = models
      ? el('select', { name: 'model' }, el('option', { value: '' }, '— none: each chat names its model —'), models.map((m) => el('option', { value: m }, m)))
      : el('input', { type: 'text', name: 'model', autocomplete: 'off', spellcheck: 'false' });
    const promptInput = el('textarea', { name: 'system_prompt', rows: 4 });
    const searchInput = el('input', { type: 'checkbox', id: 'preset-tool-search', name: 'tool_search' });
    const toolSearch = el('div', { class: 'field' }, el('div', { class: 'check' }, searchInput,
      el('label', { for: 'preset-tool-search' }, 'Tool search',
        el('span', { class: 'muted' }, ' — offer two tools, search_tools and call_tool, instead of every tool of the providers (for clients and small models that cannot take hundreds)'))));
    const trySection = el('section', { 'aria-labelledby': 'try-search-h', hidden: true });
    const status = el('div', {});

    // Providers.
    const limitHelp = el('p', { id: 'providers-help', class: 'help' });
    const noMcp = el('input', { type: 'checkbox', id: 'prov-none', name: 'no_mcp', value: '' });
    const provBox = el('div', {});
    let provInputs = [];
    const check = (input, label, extra) => el('div', { class: 'check' }, input, el('label', { for: input.id }, label, extra ? el('span', { class: 'muted' }, ` — ${extra}`) : null));
    const buildProviders = (chosen) => {
      const known = new Set(['lemonade']);
      const rows = [];
      const mk = (id, label, extra) => {
        const input = el('input', { type: 'checkbox', id: `prov-${id.replace(/[^A-Za-z0-9_-]/g, '_')}`, name: 'mcp_server_ids', value: id, checked: chosen.includes(id) });
        provInputs.push(input);
        rows.push(check(input, label, extra));
      };
      provInputs = [];
      mk('lemonade', 'lemonade', 'the built-in tools');
      for (const s of servers || []) {
        known.add(s.id);
        mk(s.id, s.name && s.name !== s.id ? `${s.name} (${s.id})` : s.id, s.status ? `server, ${s.status}` : 'server');
      }
      // A provider the preset names that is not listed (the list failed, or it was removed).
      for (const id of chosen) if (!known.has(id)) mk(id, id, servers ? 'not registered' : 'server');
      provBox.replaceChildren(...rows);
      noMcp.checked = chosen.length === 0;
      for (const i of provInputs) i.addEventListener('change', () => {
        if (i.checked) noMcp.checked = false;
        else if (!provInputs.some((x) => x.checked)) noMcp.checked = true;
        limits();
        refreshToolNames();
      });
      limits();
    };
    const limits = () => {
      const n = provInputs.filter((x) => x.checked).length;
      for (const i of provInputs) i.disabled = !i.checked && n >= MAX_PROVIDERS;
      limitHelp.textContent = n >= MAX_PROVIDERS
        ? `${n} providers chosen, the most a preset may have: uncheck one to choose another.`
        : `Choose up to ${MAX_PROVIDERS} providers (${n} chosen). "No MCP" means the chat gets no tools.`;
    };
    noMcp.addEventListener('change', () => {
      if (noMcp.checked) for (const i of provInputs) i.checked = false;
      limits();
    });
    const providers = el('div', { class: 'field' },
      el('fieldset', { 'aria-describedby': 'providers-help' },
        el('legend', {}, 'Providers (whose tools the chat may use)'),
        limitHelp,
        check(noMcp, 'No MCP', 'no tools'),
        provBox,
        servers ? (servers.length === 0 ? el('p', { class: 'help' }, 'No server is registered yet: ', el('a', { href: '#/servers' }, 'register one'), ' to offer its tools.') : null)
          : [el('p', { class: 'help' }, 'The registered servers could not be listed; "No MCP" and "lemonade" remain available.'), app.errorBox(serversR.reason)]));

    // Tools: one entry per shaped tool.
    const toolsBox = el('div', {});
    const toolsList = el('datalist', { id: 'preset-tool-names' });
    let toolRows = [];
    const refreshToolNames = () => {
      const chosen = provInputs.filter((x) => x.checked).map((x) => x.value);
      const names = knownTools.filter((t) => chosen.includes(t.server_id)).map((t) => t.chat_name);
      toolsList.replaceChildren(...names.map((n) => el('option', { value: n })));
    };
    const argText = (m) => (m && Object.keys(m).length ? JSON.stringify(m) : '');
    const addToolRow = (t) => {
      const n = toolRows.length;
      const tool = el('input', { type: 'text', name: `tools.${n}.tool`, list: 'preset-tool-names', autocomplete: 'off', spellcheck: 'false', value: t ? t.tool || '' : '' });
      const name = el('input', { type: 'text', name: `tools.${n}.name`, pattern: '[A-Za-z0-9_\\-]{1,64}', maxlength: '64', autocomplete: 'off', spellcheck: 'false', value: t ? t.name || '' : '' });
      const description = el('textarea', { name: `tools.${n}.description`, rows: 2 });
      description.value = t ? t.description || '' : '';
      const hidden = el('input', { type: 'checkbox', id: `tools-${n}-hidden`, name: `tools.${n}.hidden`, checked: !!(t && t.hidden) });
      const fixed = el('textarea', { name: `tools.${n}.fixed`, rows: 2, spellcheck: 'false' });
      fixed.value = argText(t && t.arguments && t.arguments.fixed);
      const defaults = el('textarea', { name: `tools.${n}.defaults`, rows: 2, spellcheck: 'false' });
      defaults.value = argText(t && t.arguments && t.arguments.defaults);
      const row = { n, tool, name, description, hidden, fixed, defaults };
      const box = el('fieldset', { class: 'shaped-tool' },
        el('legend', {}, `Shaped tool ${n + 1}`),
        app.field('Tool (its chat_name)', tool, 'As the preset lists it unshaped: mcp_<server>__<name>, or a lemonade_* built-in tool.'),
        app.field('New name', name, 'Empty: its chat_name. Letters, digits, _ and - (at most 64), not beginning with mcp_ or lemonade_.'),
        app.field('New description', description, "Empty: the server's."),
        check(hidden, 'Hidden', 'not listed, not callable through this preset'),
        app.field('Fixed arguments (JSON object)', fixed, 'Always sent, and left out of the schema the client sees, e.g. {"owner":"zestmcp"}.'),
        app.field('Default arguments (JSON object)', defaults, 'Sent when the call leaves them out; shown as defaults, e.g. {"limit":10}.'),
        el('button', { type: 'button', class: 'secondary small', 'aria-label': `Remove shaped tool ${n + 1}`, onclick: () => { row.removed = true; box.remove(); } }, 'Remove'));
      toolRows.push(row);
      toolsBox.append(box);
      return row;
    };
    const buildTools = (tools) => {
      toolRows = [];
      toolsBox.replaceChildren();
      for (const t of tools) addToolRow(t);
      refreshToolNames();
    };
    // readTools reads the entries, or reports the first argument that is not a JSON object at
    // its field and returns null.
    const readTools = () => {
      const out = [];
      for (const r of toolRows) {
        if (r.removed || !r.tool.value.trim()) continue;
        const t = { tool: r.tool.value.trim() };
        if (r.name.value.trim()) t.name = r.name.value.trim();
        if (r.description.value.trim()) t.description = r.description.value;
        if (r.hidden.checked) t.hidden = true;
        const args = {};
        for (const [key, input] of [['fixed', r.fixed], ['defaults', r.defaults]]) {
          const text = input.value.trim();
          if (!text) continue;
          let v;
          try { v = JSON.parse(text); } catch { v = null; }
          if (!v || typeof v !== 'object' || Array.isArray(v)) {
            app.fieldError(form, input.name, `Write the ${key === 'fixed' ? 'fixed' : 'default'} arguments as one JSON object, such as {"limit":10}.`);
            return null;
          }
          args[key] = v;
        }
        if (Object.keys(args).length) t.arguments = args;
        out.push(t);
      }
      return out;
    };
    const toolsSection = el('div', { class: 'field' },
      el('fieldset', { 'aria-describedby': 'tools-help' },
        el('legend', {}, 'Tools (how this preset shows its providers\' tools)'),
        el('p', { id: 'tools-help', class: 'help' }, 'Rename a tool, give it a new description, hide it, or fix and default its arguments. Clients and chats of this preset see the shaped tool; the call reaches the tool itself.'),
        toolsList, toolsBox,
        el('button', { type: 'button', class: 'secondary small', onclick: () => { const r = addToolRow(null); r.tool.focus(); } }, 'Shape a tool')));

    let editing = null;
    const saveButton = el('button', { type: 'submit' }, 'Save the preset');
    const newButton = el('button', { type: 'button', class: 'secondary', onclick: () => { fill(null); heading.focus(); } }, 'Start a new preset');
    const form = el('form', { novalidate: true, 'aria-labelledby': 'preset-form-h' },
      app.field('ID (required)', idInput, idHelp),
      app.field('Name', nameInput, 'Shown to people; the ID when empty.'),
      app.field('Model', modelControl, models ? 'The model the chat uses unless the request names one.' : 'The models could not be listed: type a model id, or leave it empty.'),
      app.field('System prompt', promptInput, 'Put first in every conversation that uses this preset.'),
      providers,
      toolsSection,
      toolSearch,
      el('div', { class: 'actions' }, saveButton, newButton),
      status);
    formSection.append(heading, form);
    main.append(trySection);

    // Try a search: search_tools of the saved preset, through its MCP endpoint. Its result's
    // _meta says how the tools were ranked (toolsearch.MetaRanking).
    const rankedBy = {
      bm25: 'Ranked by BM25 alone: no embedding model is named (ZEST_TOOL_SEARCH_EMBEDDING_MODEL), the catalog is still being embedded, or the query\'s embedding failed.',
      blended: 'Ranked by BM25 blended with the embedding model.',
    };
    const queryInput = el('input', { type: 'search', id: 'try-search-query', name: 'query', autocomplete: 'off' });
    const tryResult = el('div', { id: 'try-search-result', 'aria-live': 'polite' });
    const tryForm = el('form', { 'aria-labelledby': 'try-search-h' },
      app.field('What do you want to do?', queryInput, 'In plain words, as a person or a model would ask: the answer is what search_tools gives a client.'),
      el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Search')),
      tryResult);
    trySection.append(el('h2', { id: 'try-search-h' }, 'Try a search'), tryForm);
    const showTry = (p) => {
      trySection.hidden = !(p && p.tool_search);
      tryResult.replaceChildren();
      if (session) session.close();
      session = null;
    };
    tryForm.addEventListener('submit', async (e) => {
      e.preventDefault();
      const query = queryInput.value.trim();
      if (!query || !editing) return;
      tryResult.replaceChildren(el('p', {}, 'Searching…'));
      try {
        if (!session || session.expired) {
          session = new McpSession(app, `/mcp/presets/${encodeURIComponent(editing)}`);
          await session.open();
        }
        const got = await session.request('tools/call', { name: 'search_tools', arguments: { query } });
        const text = ((got && got.content) || []).map((c) => c.text || '').join('\n');
        if (got && got.isError) {
          tryResult.replaceChildren(app.errorBox(text));
          return;
        }
        const tools = (JSON.parse(text || '{}').tools) || [];
        tryResult.replaceChildren(tools.length === 0
          ? el('p', {}, 'No tool matched: try other words.')
          : el('ol', { class: 'found-tools' }, tools.map((t) => el('li', {},
            el('code', {}, t.name), el('span', { class: 'muted' }, ` — ${t.server}`), el('br'), t.description || ''))));
        const ranked = rankedBy[(got && got._meta && got._meta['zest/ranking']) || ''];
        if (ranked) tryResult.append(el('p', { class: 'muted', id: 'try-search-ranking' }, ranked));
        app.announce(`${tools.length} tool${tools.length === 1 ? '' : 's'} found.`);
      } catch (err) {
        tryResult.replaceChildren(app.errorBox(err));
      }
    });
    if (!models) formSection.insertBefore(app.errorBox(modelsR.reason), form);

    const fill = (p) => {
      editing = p ? p.id : null;
      app.clearFieldErrors(form);
      status.replaceChildren();
      heading.textContent = p ? `Edit preset ${p.id}` : 'New preset';
      idInput.value = p ? p.id : '';
      idInput.readOnly = !!p;
      const idHelpNode = document.getElementById(`${idInput.id}-help`);
      if (idHelpNode) idHelpNode.textContent = p ? 'The ID of a saved preset stays: to rename, save a new preset and delete this one.' : idHelp;
      nameInput.value = p && p.name !== p.id ? p.name || '' : '';
      if (models && p && p.model && !models.includes(p.model)) {
        modelControl.append(el('option', { value: p.model }, `${p.model} (not listed)`));
      }
      modelControl.value = p ? p.model || '' : '';
      promptInput.value = p ? p.system_prompt || '' : '';
      buildProviders(p ? p.mcp_server_ids || [] : []);
      buildTools(p ? p.tools || [] : []);
      searchInput.checked = !!(p && p.tool_search);
      newButton.hidden = !p;
      showTry(p);
    };

    const renderList = () => {
      if (presets.length === 0) {
        listBox.replaceChildren(el('p', {}, 'No presets yet: create one with the form below.'));
        return;
      }
      const rows = presets.map((p) => el('tr', {},
        el('th', { scope: 'row' }, p.name && p.name !== p.id ? [p.name, el('br'), el('code', {}, p.id)] : el('code', {}, p.id)),
        el('td', {}, p.model || el('span', { class: 'muted' }, 'none')),
        el('td', {}, (p.mcp_server_ids || []).length ? (p.mcp_server_ids || []).join(', ') : el('span', { class: 'muted' }, 'No MCP'),
          (p.tools || []).length ? el('span', { class: 'muted' }, ` — ${p.tools.length} tool${p.tools.length === 1 ? '' : 's'} shaped`) : null),
        el('td', {}, p.tool_search ? 'Tool search: search_tools, call_tool' : 'Every tool'),
        el('td', {}, el('div', { class: 'row' },
          el('button', { type: 'button', class: 'secondary small', 'aria-label': `Edit preset ${p.id}`, onclick: () => { fill(p); heading.focus(); } }, 'Edit'),
          el('a', { class: 'small', href: `#/chat?preset=${encodeURIComponent(p.id)}`, 'aria-label': `Chat with preset ${p.id}` }, 'Chat'),
          el('button', { type: 'button', class: 'danger small', 'aria-label': `Delete preset ${p.id}`, onclick: () => remove(p) }, 'Delete')))));
      listBox.replaceChildren(el('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Saved presets (scrolls sideways on narrow screens)' }, el('table', {},
        el('caption', { class: 'visually-hidden' }, `${presets.length} saved preset${presets.length === 1 ? '' : 's'}`),
        el('thead', {}, el('tr', {}, ['Preset', 'Model', 'Providers', 'Tools offered', 'Actions'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, rows))));
    };

    const reload = async () => {
      const got = await app.api('GET', '/internal/mcp/presets');
      presets = (got && got.presets) || [];
      renderList();
    };

    const remove = async (p) => {
      if (!window.confirm(`Delete the preset ${p.id}? Chats that name it will fail.`)) return;
      try {
        await app.api('DELETE', `/internal/mcp/presets/${encodeURIComponent(p.id)}`);
        if (editing === p.id) fill(null);
        await reload();
        app.announce(`Preset ${p.id} deleted.`);
        heading.focus();
      } catch (e) {
        listBox.prepend(app.errorBox(e));
      }
    };

    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      app.clearFieldErrors(form);
      status.replaceChildren();
      const id = idInput.value.trim();
      if (!id) {
        app.fieldError(form, 'id', 'The ID is required: letters, digits, _ . and - (at most 96).');
        return;
      }
      if (!/^[A-Za-z0-9_.-]{1,96}$/.test(id)) {
        app.fieldError(form, 'id', `"${id}" is not a valid ID: use letters, digits, _ . and - (at most 96).`);
        return;
      }
      const tools = readTools();
      if (!tools) return;
      const body = {
        id,
        name: nameInput.value.trim() || id,
        model: modelControl.value.trim(),
        system_prompt: promptInput.value,
        mcp_server_ids: provInputs.filter((x) => x.checked).map((x) => x.value),
        tools, // [] clears the shaping
        tool_search: searchInput.checked,
      };
      saveButton.disabled = true;
      try {
        const got = await app.api('POST', '/internal/mcp/presets', body);
        const saved = (got && got.preset) || body;
        await reload();
        fill(saved);
        status.replaceChildren(el('p', { class: 'okbox' }, el('span', { 'aria-hidden': 'true' }, '✓ '), `Preset ${saved.id} saved.`));
        app.announce(`Preset ${saved.id} saved. The list is updated.`);
      } catch (err) {
        if (!(err.param && app.fieldError(form, err.param, err.message))) status.replaceChildren(app.errorBox(err));
      } finally {
        saveButton.disabled = false;
      }
    });

    renderList();
    fill(null);
  },
  leave() {
    if (session) session.close();
    session = null;
  },
};
