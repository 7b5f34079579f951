// Activity: the latest tool calls on every path (the admin API, /mcp, the chat loop), from
// GET /internal/mcp/activity, polled every 2 s with after= the newest id seen. New rows go on
// top; at most KEEP rows stay. A 404 means an edge older than the route.

import { Poll } from './poll.js';

const POLL_MS = 2000;
const KEEP = 200;

const loop = new Poll();

const OUTCOMES = {
  ok: { icon: '✓', text: 'OK', cls: 'ok' },
  tool_error: { icon: '⚠', text: 'Tool error', cls: 'degraded' },
  error: { icon: '✕', text: 'Error', cls: 'error' },
  input_required: { icon: '?', text: 'Input required', cls: 'connecting' },
};

export default {
  title: 'Activity',
  async render(main, app) {
    const { el } = app;
    loop.stop();
    const mine = loop.session;
    let latest = 0;
    let paused = false;
    let rows = []; // newest first
    let details = false;

    const pauseButton = el('button', { type: 'button', class: 'secondary' }, 'Pause');
    const clearButton = el('button', { type: 'button', class: 'secondary' }, 'Clear the table');
    const state = el('p', { class: 'help' }, 'Loading…');
    const errBox = el('div', {});
    const tbody = el('tbody', {});
    const caption = el('caption', {}, 'Latest tool calls, newest first');
    const table = el('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Latest tool calls (scrolls sideways on narrow screens)' }, el('table', {}, caption,
      el('thead', {}, el('tr', {}, ['Began', 'Who', 'Path', 'Server', 'Tool', 'Duration', 'Outcome'].map((h) => el('th', { scope: 'col' }, h)))),
      tbody));
    const emptyRow = () => el('tr', {}, el('td', { colspan: '7', class: 'muted' }, 'No tool calls yet: call one on the Try-a-tool page, in a chat or through /mcp.'));
    tbody.append(emptyRow());
    main.append(
      el('p', {}, `Tool calls on every path — the admin API, /mcp and the chat loop — newest first, checked every ${POLL_MS / 1000} s. The ${KEEP} newest stay in the table.`),
      el('div', { class: 'actions' }, pauseButton, clearButton),
      state, errBox, table);

    const row = (c) => {
      const o = OUTCOMES[c.outcome] || { icon: '•', text: c.outcome || 'unknown', cls: 'disconnected' };
      const tool = [el('code', {}, c.tool || '')];
      if (c.chat_name && c.chat_name !== c.tool) tool.push(el('br'), el('span', { class: 'muted small' }, `as ${c.chat_name}`));
      if (c.preset_id) tool.push(el('br'), el('span', { class: 'muted small' }, `preset ${c.preset_id}`));
      const outcome = [el('span', { class: `status ${o.cls}` }, el('span', { 'aria-hidden': 'true' }, o.icon), o.text)];
      if (c.error) outcome.push(el('br'), el('span', { class: 'small' }, c.error));
      if (details && (c.arguments || c.result)) {
        outcome.push(el('details', {}, el('summary', {}, `Details of call ${c.id}`),
          c.arguments ? [el('p', { class: 'small' }, `Arguments${c.arguments_truncated ? ' (cut)' : ''}:`), el('pre', {}, c.arguments)] : null,
          c.result ? [el('p', { class: 'small' }, `Result${c.result_truncated ? ' (cut)' : ''}:`), el('pre', {}, c.result)] : null));
      }
      return el('tr', {},
        el('td', {}, app.stamp(c.time, 'Began')),
        el('td', {}, el('code', {}, c.who || '')),
        el('td', {}, c.path || ''),
        el('td', {}, c.server_id || ''),
        el('td', {}, tool),
        el('td', {}, `${Number(c.duration_ms) || 0} ms`),
        el('td', {}, outcome));
    };

    const show = (fresh) => {
      rows = [...fresh, ...rows].slice(0, KEEP);
      if (rows.length === 0) {
        tbody.replaceChildren(emptyRow());
        return;
      }
      // Only the new rows are built; the rows past KEEP are dropped from the end.
      const newRows = fresh.map(row);
      if (tbody.firstChild && tbody.firstChild.querySelector('td[colspan]')) tbody.replaceChildren();
      tbody.prepend(...newRows);
      while (tbody.children.length > KEEP) tbody.lastChild.remove();
    };

    const poll = async (first) => {
      loop.timer = null;
      if (paused || mine !== loop.session) return;
      loop.aborter = new AbortController();
      const signal = loop.aborter.signal;
      try {
        const got = await app.api('GET', `/internal/mcp/activity?after=${encodeURIComponent(String(latest))}&limit=${KEEP}`, undefined, { signal });
        errBox.replaceChildren();
        details = !!(got && got.details);
        const calls = ((got && got.calls) || []).filter((c) => Number(c.id) > latest);
        const newest = Number(got && got.latest) || 0;
        // A restarted mcpgateway numbers from 1 again: start over.
        if (newest < latest) {
          latest = 0;
          rows = [];
          tbody.replaceChildren(emptyRow());
          loop.timer = setTimeout(() => poll(true), 0);
          return;
        }
        latest = Math.max(latest, newest, ...calls.map((c) => Number(c.id) || 0));
        show(calls);
        state.textContent = `${rows.length} call${rows.length === 1 ? '' : 's'} shown · checked at ${app.clock()}` +
          (got && got.size ? ` · the server keeps the ${got.size} latest` : '') + (details ? ' · arguments and results recorded' : '');
        if (!first && calls.length > 0) app.announce(`${calls.length} new tool call${calls.length === 1 ? '' : 's'}.`);
      } catch (err) {
        if (err.name === 'AbortError') return;
        if (err.status === 404) {
          errBox.replaceChildren(el('div', { class: 'notice', role: 'status' },
            el('p', {}, el('span', { 'aria-hidden': 'true' }, 'ℹ '), 'The activity route (GET /internal/mcp/activity) is not available on this server: it is older than the Activity view. Upgrade Zest to see the tool calls here.')));
          state.textContent = 'Not polling.';
          pauseButton.hidden = true;
          clearButton.hidden = true;
          table.hidden = true;
          return; // no more polling: the route will not appear without a restart
        }
        errBox.replaceChildren(app.errorBox(err));
        if (err.status === 401 || err.status === 403) {
          state.textContent = err.body && err.body.notConfigured ? 'Not polling.'
            : 'Not polling: the admin key is needed. Set it with the Admin key button, then come back to this page.';
          return;
        }
        state.textContent = 'The last check failed; trying again.';
      } finally {
        if (loop.aborter && loop.aborter.signal === signal) loop.aborter = null;
      }
      if (!paused && mine === loop.session) loop.timer = setTimeout(() => poll(false), POLL_MS);
    };

    pauseButton.addEventListener('click', () => {
      paused = !paused;
      pauseButton.textContent = paused ? 'Resume' : 'Pause';
      if (paused) {
        loop.halt();
        state.textContent = `Paused · ${rows.length} call${rows.length === 1 ? '' : 's'} shown.`;
        app.announce('Paused: the table is not updated.');
      } else {
        app.announce('Resumed.');
        poll(false);
      }
    });
    clearButton.addEventListener('click', () => {
      rows = [];
      tbody.replaceChildren(emptyRow());
      app.announce('The table was cleared; new calls will show.');
    });

    await poll(true);
  },
  leave() {
    loop.stop();
  },
};
