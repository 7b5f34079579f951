// Chat playground: a streamed chat through POST /api/v1/chat/completions, with a preset's tools.
// The tool loop's events (chunks with no choices and a zest_event object, sent as the body asks
// with zest_events) are shown inline as
// they happen; the last chunk's zest_warnings are shown under the answer. The history stays in
// memory (this page only). #/chat?preset=ID preselects a preset.
//
// The built-in model builtin-llm calls a tool only when tool_choice names it, with the last JSON
// object of the user's message as the arguments: the "Tool to call" select sets tool_choice.

// What stays while the console is open, when the view is left and shown again: the
// conversation (its log, tool-call cards included, and its history), the answer being
// streamed, and the model, preset and tool chosen. Only New chat (or a reload) clears it.
let aborter = null;
let history = [];
// generation counts the New chat clicks: an answer of an older chat is not kept.
let generation = 0;
let log = null; // the conversation's element, reused by each render
const chosen = { model: null, preset: null, tool: null };
// ui is the current render's controls, which an answer begun under an earlier render updates.
let ui = null;

function hashQuery() {
  const i = location.hash.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : location.hash.slice(i + 1));
}

// presetTools lists the chat names of a preset's tools: the connected servers' tools from the
// admin list, and the built-in (lemonade) tools from a tools/list of the preset's MCP endpoint
// in MCP 2026-07-28 (one stateless request; it is also the fallback when the admin list failed).
// A preset that shapes its tools (renamed, hidden) is listed by its endpoint alone: the names
// a chat of it may call are the shaped ones.
async function presetTools(app, preset, adminTools) {
  const ids = preset.mcp_server_ids || [];
  const names = [];
  const shaped = (preset.tools || []).length > 0;
  if (adminTools && !shaped) for (const t of adminTools) if (ids.includes(t.server_id)) names.push({ name: t.chat_name, label: `${t.chat_name} (${t.server_name || t.server_id})` });
  if (!adminTools || shaped || ids.includes('lemonade')) {
    const v = '2026-07-28';
    try {
      // The built-in tools alone are /mcp's own (unless ZEST_MCP_PRESET names a preset there).
      const endpoint = preset.id.startsWith('@') ? '/mcp' : `/mcp/presets/${encodeURIComponent(preset.id)}`;
      const got = await app.api('POST', endpoint,
        { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': v, 'io.modelcontextprotocol/clientCapabilities': {} } } },
        { headers: { Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': v, 'Mcp-Method': 'tools/list' } });
      const known = new Set(names.map((n) => n.name));
      for (const t of (got && got.result && got.result.tools) || []) {
        if (!known.has(t.name)) names.push({ name: t.name, label: t.name });
      }
    } catch {
      // The list stays as the admin API gave it; the chat works without a chosen tool.
    }
  }
  return names.sort((a, b) => a.name.localeCompare(b.name));
}

// readSSE calls onData with each data: payload of an event stream until [DONE] or the end.
async function readSSE(res, onData) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data === '[DONE]') return;
      if (data) onData(data);
    }
  }
}

export default {
  title: 'Chat playground',
  async render(main, app) {
    const { el } = app;
    const q = hashQuery();
    const setupStatus = el('div', {});
    // Presets and the tools list are admin routes: asked only with an admin key, so that a chat
    // needs none (and no key dialog opens unasked).
    const admin = !!app.adminKey();
    const [modelsR, presetsR, toolsR] = await Promise.allSettled([
      app.api('GET', '/api/v1/models'),
      admin ? app.api('GET', '/internal/mcp/presets') : Promise.resolve({ presets: [] }),
      admin ? app.api('GET', '/internal/mcp/tools') : Promise.resolve(null),
    ]);
    const models = modelsR.status === 'fulfilled' ? ((modelsR.value && modelsR.value.data) || []).map((m) => m.id) : [];
    const presets = presetsR.status === 'fulfilled' ? (presetsR.value && presetsR.value.presets) || [] : [];
    const adminTools = toolsR.status === 'fulfilled' && toolsR.value ? toolsR.value.tools || [] : null;
    if (modelsR.status === 'rejected') setupStatus.append(app.errorBox(modelsR.reason));
    if (!admin) {
      setupStatus.append(el('p', { class: 'help' }, 'Presets need the admin key: without it, chats run without MCP tools. ',
        el('button', { type: 'button', class: 'secondary small', onclick: async () => {
          if (await app.askKey('admin')) window.dispatchEvent(new HashChangeEvent('hashchange'));
        } }, 'Give the admin key')));
    }
    if (presetsR.status === 'rejected') {
      setupStatus.append(el('p', { class: 'help' }, 'The presets could not be listed, so chats run without MCP tools:'), app.errorBox(presetsR.reason));
    }

    const modelSel = el('select', { name: 'model' },
      el('option', { value: '' }, '— the preset\'s model —'),
      models.map((m) => el('option', { value: m }, m)));
    modelSel.value = models.includes('builtin-llm') ? 'builtin-llm' : (models[0] || '');
    // "No MCP" and the built-in lemonade tools need no preset (nor the admin key): the chat
    // names them with mcp_server_ids.
    const LEMONADE = '@lemonade';
    const builtin = { id: LEMONADE, mcp_server_ids: ['lemonade'] };
    const presetSel = el('select', { name: 'preset' },
      el('option', { value: '' }, 'No MCP (no tools)'),
      el('option', { value: LEMONADE }, 'lemonade — the built-in tools, no preset'),
      presets.map((p) => el('option', { value: p.id }, p.name && p.name !== p.id ? `${p.name} (${p.id})` : p.id)));
    const toolSel = el('select', { name: 'tool' }, el('option', { value: '' }, '— let the model choose —'));
    const toolHelpText = 'Sets tool_choice: builtin-llm calls a tool only when it is named here, with the last JSON object of your message as its arguments, e.g. {"message":"hi"}.';

    // toolsLine says what the next message runs with, so that no preset is lost unseen.
    const toolsLine = el('p', { id: 'chat-tools', class: 'help' });
    const loadTools = async () => {
      const p = presetSel.value === LEMONADE ? builtin : presets.find((x) => x.id === presetSel.value);
      toolSel.replaceChildren(el('option', { value: '' }, '— let the model choose —'));
      toolSel.disabled = !p;
      if (!p) {
        toolsLine.textContent = 'No MCP: the next message runs without tools.';
        return;
      }
      if (p.model && models.includes(p.model)) modelSel.value = p.model;
      const names = await presetTools(app, p, adminTools);
      if (presetSel.value !== p.id) return;
      for (const n of names) toolSel.append(el('option', { value: n.name }, n.label));
      toolsLine.textContent = `The next message runs with ${names.length} tool${names.length === 1 ? '' : 's'} of ${p === builtin ? 'the built-in lemonade tools' : `preset ${p.id}`}.`;
      app.announce(`${p === builtin ? 'The built-in tools' : `Preset ${p.id}`}: ${names.length} tool${names.length === 1 ? '' : 's'} available.`);
    };
    presetSel.addEventListener('change', loadTools);
    const hasPreset = (id) => id === LEMONADE || presets.some((p) => p.id === id);
    if (q.get('preset') && presets.some((p) => p.id === q.get('preset'))) presetSel.value = q.get('preset');
    else if (chosen.preset && hasPreset(chosen.preset)) presetSel.value = chosen.preset;
    if (chosen.model && models.includes(chosen.model)) modelSel.value = chosen.model;
    presetSel.addEventListener('change', () => { chosen.preset = presetSel.value; chosen.tool = null; });
    modelSel.addEventListener('change', () => { chosen.model = modelSel.value; });
    toolSel.addEventListener('change', () => { chosen.tool = toolSel.value; });

    const setup = el('section', { 'aria-labelledby': 'setup-h' }, el('h2', { id: 'setup-h' }, 'Setup'),
      el('div', { class: 'cards' },
        app.field('Model', modelSel, 'builtin-llm runs offline and can call tools.'),
        app.field('Preset', presetSel, 'A preset brings its system prompt and MCP providers.'),
        app.field('Tool to call', toolSel, toolHelpText)),
      toolsLine, setupStatus);

    // The conversation.
    const empty = () => el('p', { class: 'help' }, 'No messages yet.');
    if (!log) {
      log = el('div', { class: 'chat-log', role: 'region', 'aria-label': 'Messages', tabindex: '0' });
      log.append(empty());
    }
    const input = el('textarea', { name: 'message', rows: 4 });
    const send = el('button', { type: 'submit' }, 'Send');
    const stop = el('button', { type: 'button', class: 'secondary', disabled: true }, 'Stop');
    const fresh = el('button', { type: 'button', class: 'secondary' }, 'New chat');
    const status = el('p', { class: 'help', id: 'chat-status' });
    const form = el('form', { novalidate: true, 'aria-labelledby': 'conv-h' },
      app.field('Message', input, 'Ctrl+Enter sends.'),
      el('div', { class: 'actions' }, send, stop, fresh), status);
    const conv = el('section', { 'aria-labelledby': 'conv-h' }, el('h2', { id: 'conv-h' }, 'Conversation'), log, form);
    main.append(setup, conv);

    const scroll = () => { log.scrollTop = log.scrollHeight; };
    const bubble = (who, cls) => {
      if (log.firstChild && log.firstChild.classList && log.firstChild.classList.contains('help')) log.replaceChildren();
      const body = el('div', { class: 'msg-body' });
      const m = el('div', { class: `msg ${cls}` }, el('p', { class: 'who' }, who), body);
      log.append(m);
      scroll();
      return body;
    };
    ui = { send, stop, status };
    if (aborter) {
      send.disabled = true;
      stop.disabled = false;
      status.textContent = 'Answering…';
    }

    fresh.addEventListener('click', () => {
      if (aborter) aborter.abort();
      generation += 1;
      history = [];
      log.replaceChildren(empty());
      status.textContent = '';
      app.announce('New chat: the history was cleared.');
      input.focus();
    });
    stop.addEventListener('click', () => { if (aborter) aborter.abort(); });
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        form.requestSubmit();
      }
    });

    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      app.clearFieldErrors(form);
      const text = input.value.trim();
      if (!text) {
        app.fieldError(form, 'message', 'Type a message first.');
        return;
      }
      if (!modelSel.value && !presetSel.value) {
        app.fieldError(form, 'message', 'Choose a model, or a preset that names one.');
        return;
      }
      const body = { messages: [...history, { role: 'user', content: text }], stream: true, zest_events: true };
      if (modelSel.value) body.model = modelSel.value;
      if (presetSel.value === LEMONADE) body.mcp_server_ids = ['lemonade'];
      else if (presetSel.value) body.preset = presetSel.value;
      if (toolSel.value) body.tool_choice = { type: 'function', function: { name: toolSel.value } };
      history.push({ role: 'user', content: text });
      bubble('You', 'user').append(el('p', { class: 'msg-text' }, text));
      input.value = '';

      const out = bubble('Assistant', 'assistant');
      let textNode = null; // the paragraph model text goes to (a new one after each tool block)
      let answer = '';
      const calls = new Map();
      const addText = (s) => {
        if (!textNode) {
          textNode = el('p', { class: 'msg-text' });
          out.append(textNode);
        }
        textNode.textContent += s;
        answer += s;
        scroll();
      };
      const onEvent = (ev) => {
        textNode = null;
        if (ev.type === 'tool_call') {
          const state = el('p', { class: 'status connecting' }, el('span', { 'aria-hidden': 'true' }, '◌'), 'Running');
          const block = el('div', { class: 'toolcall' },
            el('p', {}, el('span', { 'aria-hidden': 'true' }, '⚙ '), 'Tool call ', el('code', {}, ev.name), ev.server_id ? ` on ${ev.server_id}` : '', ev.round ? ` (round ${ev.round})` : ''),
            el('p', { class: 'small' }, 'Arguments:'), el('pre', {}, ev.arguments || '{}'), state);
          calls.set(ev.id, { block, state });
          out.append(block);
          app.announce(`Calling the tool ${ev.name}.`);
        } else if (ev.type === 'tool_result') {
          let c = calls.get(ev.id);
          if (!c) {
            const block = el('div', { class: 'toolcall' }, el('p', {}, el('span', { 'aria-hidden': 'true' }, '⚙ '), 'Tool result of ', el('code', {}, ev.name)));
            out.append(block);
            c = { block, state: null };
          }
          const st = ev.is_error
            ? el('p', { class: 'status error' }, el('span', { 'aria-hidden': 'true' }, '⚠'), `The tool reported an error · took ${ev.duration_ms || 0} ms`)
            : el('p', { class: 'status ok' }, el('span', { 'aria-hidden': 'true' }, '✓'), `Done · took ${ev.duration_ms || 0} ms`);
          if (c.state) c.state.replaceWith(st);
          else c.block.append(st);
          c.state = null;
          c.block.append(el('p', { class: 'small' }, `Output (${ev.output_bytes || 0} bytes${ev.truncated ? ', truncated for the model' : ''}):`), el('pre', {}, ev.output || ''));
          app.announce(`${ev.name} ${ev.is_error ? 'reported an error' : 'answered'} in ${ev.duration_ms || 0} ms.`);
        } else if (ev.type === 'approval_required' && calls.get(ev.id)) {
          // The call waits for an administrator (the Approvals view decides it).
          const c = calls.get(ev.id);
          // A new tab: leaving this view would end the chat, and withdraw the call.
          const st = el('p', { class: 'status connecting' }, el('span', { 'aria-hidden': 'true' }, '⏸'), 'Waits for approval · ',
            // rel=opener: the new tab gets a copy of this tab's sessionStorage, the admin key
            // with it (a noopener tab, the default for _blank, starts without it).
            el('a', { href: '#/approvals', target: '_blank', rel: 'opener' }, 'decide in Approvals (new tab)'));
          c.state.replaceWith(st);
          c.state = st;
          app.announce(`${ev.name} waits for an administrator's approval.`);
        } else {
          out.append(el('div', { class: 'toolcall' }, el('p', {}, el('strong', {}, `${ev.type || 'event'}: `), ev.message || JSON.stringify(ev))));
        }
        scroll();
      };
      const onDone = (m) => {
        const warnings = m.zest_warnings || [];
        if (warnings.length) {
          out.append(el('div', { class: 'notice' }, el('p', {}, el('span', { 'aria-hidden': 'true' }, '⚠ '), el('strong', {}, `Warning${warnings.length === 1 ? '' : 's'}:`)),
            el('ul', {}, warnings.map((w) => el('li', {}, w)))));
        }
        const handed = m.choices && m.choices[0] && m.choices[0].delta && m.choices[0].delta.tool_calls;
        if (handed && handed.length) {
          out.append(el('div', { class: 'toolcall' }, el('p', {}, 'The model asked for tool calls the loop did not run:'), el('pre', {}, JSON.stringify(handed, null, 2))));
        }
      };

      const gen = generation;
      aborter = new AbortController();
      const signal = aborter.signal;
      ui.send.disabled = true;
      ui.stop.disabled = false;
      ui.status.textContent = 'Answering…';
      let failed = false;
      try {
        let res = await app.api('POST', '/api/v1/chat/completions', body, { raw: true, signal, headers: { Accept: 'text/event-stream' } });
        if (res.status === 401) {
          const msg = await res.text();
          if (await app.askKey('api', /"message"\s*:\s*"([^"]+)"/.exec(msg)?.[1] || 'The API key was refused')) {
            res = await app.api('POST', '/api/v1/chat/completions', body, { raw: true, signal, headers: { Accept: 'text/event-stream' } });
          }
        }
        if (!res.ok) {
          const t = await res.text();
          let msg = `HTTP ${res.status}`;
          let j = null;
          try {
            j = JSON.parse(t);
            msg = (j.error && (j.error.message || j.error)) || msg;
          } catch {
            if (t) msg = t;
          }
          const err = new app.ApiError(res.status, String(msg), j && j.error && j.error.param, j);
          err.request = 'POST /api/v1/chat/completions';
          throw err;
        }
        await readSSE(res, (data) => {
          let m;
          try {
            m = JSON.parse(data);
          } catch {
            return;
          }
          if (m.error) {
            failed = true;
            // An error in the stream: its message for a person, the error as sent under Details.
            const err = new app.ApiError(m.error.status_code, String(m.error.message || 'The answer failed'), m.error.param, m);
            err.request = 'POST /api/v1/chat/completions';
            out.append(app.errorBox(err));
            return;
          }
          if (m.zest_event) onEvent(m.zest_event);
          const ch = m.choices && m.choices[0];
          if (ch && ch.delta && typeof ch.delta.content === 'string' && ch.delta.content) addText(ch.delta.content);
          if (m.zest_warnings || m.zest_tool_calls || (ch && ch.finish_reason)) onDone(m);
        });
        ui.status.textContent = failed ? 'The answer failed.' : 'Done.';
        if (!failed) app.announce(answer ? `Answer: ${answer.slice(0, 300)}` : 'The answer is complete.');
      } catch (err) {
        if (err.name === 'AbortError') {
          for (const c of calls.values()) {
            if (c.state && c.state.isConnected) c.state.replaceWith(el('p', { class: 'status disconnected' }, el('span', { 'aria-hidden': 'true' }, '■'), 'Stopped before its result'));
          }
          out.append(el('p', { class: 'status disconnected' }, el('span', { 'aria-hidden': 'true' }, '■'), 'Stopped'));
          ui.status.textContent = 'Stopped.';
          app.announce('Stopped.');
        } else {
          failed = true;
          out.append(app.errorBox(err));
          ui.status.textContent = 'The request failed.';
        }
      } finally {
        const same = gen === generation; // else New chat was clicked meanwhile
        if (same && answer) history.push({ role: 'assistant', content: answer });
        else if (same && failed) history.pop(); // the question got no answer: sending again repeats it
        ui.send.disabled = false;
        ui.stop.disabled = true;
        if (aborter && aborter.signal === signal) aborter = null;
        scroll();
      }
    });

    await loadTools();
    if (chosen.tool && [...toolSel.options].some((o) => o.value === chosen.tool)) toolSel.value = chosen.tool;
  },
  // Leaving keeps the conversation and lets an answer run on (a call waiting for approval is
  // decided in Approvals, maybe in this tab): Stop and New chat end it.
  leave() {},
};
