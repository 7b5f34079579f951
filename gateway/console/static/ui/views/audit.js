// Audit: the audit trail — every admin change and every tool call, as the registry keeps
// them for every replica — from GET /internal/mcp/audit, newest first, a page at a time, with
// filters (kind, server, who) and a download of the selection as JSON lines
// (GET /internal/mcp/audit/export, fetched with the admin key, saved through a blob URL).

const PAGE = 100;

const OUTCOMES = {
  ok: { icon: '✓', text: 'OK', cls: 'ok' },
  tool_error: { icon: '⚠', text: 'Tool error', cls: 'degraded' },
  input_required: { icon: '?', text: 'Input required', cls: 'connecting' },
};

// began is when an entry's call began: a tool call's entry is written when it ended, so its
// duration is taken off (Activity stamps the same call with its start: one time for one call).
function began(e) {
  const end = Date.parse(e.time);
  if (e.kind !== 'tool' || Number.isNaN(end)) return e.time;
  return new Date(end - (Number(e.duration_ms) || 0)).toISOString();
}

// query is the filters as URL parameters (empty ones left out), plus extra.
function query(filters, extra = {}) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...filters, ...extra })) if (v) p.set(k, v);
  const s = p.toString();
  return s ? `?${s}` : '';
}

export default {
  title: 'Audit',
  async render(main, app) {
    const { el } = app;
    let filters = { kind: '', server: '', who: '' };
    let next = '';
    let shown = 0;

    const kind = el('select', { name: 'kind' },
      el('option', { value: '' }, 'Every kind'),
      el('option', { value: 'admin' }, 'Admin changes'),
      el('option', { value: 'tool' }, 'Tool calls'),
      el('option', { value: 'trim' }, 'Trims of the trail'));
    const server = el('input', { name: 'server', type: 'text', autocomplete: 'off', spellcheck: 'false' });
    const who = el('input', { name: 'who', type: 'text', autocomplete: 'off', spellcheck: 'false' });
    const form = el('form', { class: 'filters' },
      app.field('Kind', kind),
      app.field('Server', server, 'A server id: its tool calls and the admin changes of it.'),
      app.field('Who', who, 'The 12 hex digits that name a key (printf %s KEY | sha256sum | cut -c1-12), or anonymous.'),
      el('div', { class: 'actions' },
        el('button', { type: 'submit' }, 'Show'),
        el('button', { type: 'button', class: 'secondary', id: 'audit-download' }, 'Download JSON lines')));
    const state = el('p', { class: 'help', id: 'audit-state' }, 'Loading…');
    const errBox = el('div', {});
    const tbody = el('tbody', {});
    const more = el('button', { type: 'button', class: 'secondary', hidden: true }, 'Older entries');
    const table = el('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Audit trail (scrolls sideways on narrow screens)' },
      el('table', {}, el('caption', {}, 'Audit trail, newest first'),
        el('thead', {}, el('tr', {}, ['When', 'Who', 'Kind', 'Action or tool', 'Server', 'Outcome', 'Duration'].map((h) => el('th', { scope: 'col' }, h)))),
        tbody));
    main.append(
      el('p', {}, 'Every admin change and every tool call on every path, kept in the registry for every replica. Entries older than the retention, or past their kind\'s count bound (tool calls and admin changes are bounded apart), are trimmed, and each trim says what it removed.'),
      form, state, errBox, table, el('div', { class: 'actions' }, more));

    const row = (e) => {
      const o = OUTCOMES[e.outcome] || (e.outcome ? { icon: '✕', text: e.outcome, cls: 'error' } : { icon: '•', text: 'unknown', cls: 'disconnected' });
      const what = [];
      if (e.kind === 'trim') {
        what.push(el('code', {}, e.action || ''));
        for (const t of e.trimmed || []) {
          what.push(el('br'), el('span', { class: 'muted small' }, `removed ${t.count} ${t.kind === 'admin' ? 'admin' : 'tool call'} entr${Number(t.count) === 1 ? 'y' : 'ies'} (${t.reason}) from `, app.stamp(t.from), ' to ', app.stamp(t.to)));
        }
      } else if (e.kind === 'admin') {
        what.push(el('code', {}, e.action || ''));
        if (e.target) what.push(' ', el('span', {}, e.target));
        if (e.changed && e.changed.length) what.push(el('br'), el('span', { class: 'muted small' }, `changed: ${e.changed.join(', ')}`));
      } else {
        what.push(el('code', {}, e.tool || ''), el('br'), el('span', { class: 'muted small' }, `via ${e.action || '?'}${e.preset_id ? `, preset ${e.preset_id}` : ''}`));
      }
      const outcome = [el('span', { class: `status ${o.cls}` }, el('span', { 'aria-hidden': 'true' }, o.icon), o.text)];
      if (e.error) outcome.push(el('br'), el('span', { class: 'small' }, e.error));
      if (e.arguments || e.result) {
        outcome.push(el('details', {}, el('summary', {}, `Details of ${e.id}`),
          e.arguments ? [el('p', { class: 'small' }, `Arguments${e.arguments_truncated ? ' (cut)' : ''}:`), el('pre', {}, e.arguments)] : null,
          e.result ? [el('p', { class: 'small' }, `Result${e.result_truncated ? ' (cut)' : ''}:`), el('pre', {}, e.result)] : null));
      }
      return el('tr', {},
        el('td', {}, app.stamp(began(e), e.kind === 'tool' ? `Began (ended ${e.time})` : 'At')),
        el('td', {}, el('code', {}, e.who || '')),
        el('td', {}, { admin: 'Admin change', trim: 'Trim' }[e.kind] || 'Tool call'),
        el('td', {}, what),
        el('td', {}, e.server_id || ''),
        el('td', {}, outcome),
        el('td', {}, `${Number(e.duration_ms) || 0} ms`));
    };

    const load = async (older) => {
      errBox.replaceChildren();
      try {
        const got = await app.api('GET', `/internal/mcp/audit${query(filters, { limit: String(PAGE), before: older ? next : '' })}`);
        const entries = (got && got.entries) || [];
        if (!older) {
          tbody.replaceChildren();
          shown = 0;
        }
        tbody.append(...entries.map(row));
        shown += entries.length;
        if (shown === 0) tbody.replaceChildren(el('tr', {}, el('td', { colspan: '7', class: 'muted' }, 'No entry matches.')));
        next = (got && got.next_before) || '';
        more.hidden = !next;
        const lost = Number(got && got.dropped) + Number(got && got.failed);
        state.textContent = `${shown} entr${shown === 1 ? 'y' : 'ies'} shown${next ? ' (older ones: Older entries)' : ''}` +
          (got && got.retention ? ` · kept ${got.retention.replace(/0m0s$/, '').replace(/0s$/, '')}, at most ${got.max_entries} tool calls` +
            (got.max_admin_entries ? ` and ${got.max_admin_entries} admin entries` : '') : '') +
          (got && got.details ? ' · tool arguments and results recorded' : '') +
          (lost > 0 ? ` · ${lost} entr${lost === 1 ? 'y' : 'ies'} lost by this replica (queue full or registry write failed)` : '');
        app.announce(`${entries.length} entr${entries.length === 1 ? 'y' : 'ies'} loaded.`);
      } catch (err) {
        if (err.status === 404) {
          errBox.replaceChildren(el('div', { class: 'notice', role: 'status' },
            el('p', {}, el('span', { 'aria-hidden': 'true' }, 'ℹ '), 'The audit route (GET /internal/mcp/audit) is not available on this server: it is older than the Audit view.')));
          state.textContent = '';
          table.hidden = true;
          return;
        }
        errBox.replaceChildren(app.errorBox(err));
        state.textContent = err.status === 401 || err.status === 403 ? 'The admin key is needed: set it with the Admin key button.' : '';
      }
    };

    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      filters = { kind: kind.value, server: server.value.trim(), who: who.value.trim() };
      load(false);
    });
    more.addEventListener('click', () => load(true));
    form.querySelector('#audit-download').addEventListener('click', async () => {
      errBox.replaceChildren();
      try {
        const res = await app.api('GET', `/internal/mcp/audit/export${query(filters)}`, undefined, { raw: true });
        if (!res.ok) {
          let msg = `HTTP ${res.status}`;
          try { msg = (await res.json()).error.message || msg; } catch { /* not JSON */ }
          throw new Error(msg);
        }
        const name = (/filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') || '') || [])[1] || 'zest-audit.jsonl';
        const url = URL.createObjectURL(await res.blob());
        const a = el('a', { href: url, download: name, hidden: true });
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
        app.announce(`Downloaded ${name}.`);
      } catch (err) {
        errBox.replaceChildren(app.errorBox(err));
      }
    });

    await load(false);
  },
};
