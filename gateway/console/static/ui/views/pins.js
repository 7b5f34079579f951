// Pins: the tool definitions an MCP server changed after Zest pinned them (or tools it added
// since), held — not listed, not callable anywhere — until an administrator decides, from
// GET /internal/mcp/pins, polled every 2 s. Each held change shows the pinned definition beside
// the one the server lists now, word by word for the texts and line by line for the schemas;
// Accept pins the new definition (the tool is served again), Refuse keeps it hidden.

import { Poll } from './poll.js';

const POLL_MS = 2000;
// MAX_DIFF_CELLS bounds the table of a diff (tokens of one side × the other's): beyond it the
// two sides are shown whole, one above the other.
const MAX_DIFF_CELLS = 400000;

const loop = new Poll();

// diff is the longest common subsequence diff of a and b: a list of [op, token], op one of
// ' ' (both), '-' (only a), '+' (only b); null when the table would be over MAX_DIFF_CELLS.
export function diff(a, b) {
  if (a.length * b.length > MAX_DIFF_CELLS) return null;
  const n = a.length; const m = b.length;
  const t = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      t[i][j] = a[i] === b[j] ? t[i + 1][j + 1] + 1 : Math.max(t[i + 1][j], t[i][j + 1]);
    }
  }
  const out = [];
  let i = 0; let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push([' ', a[i]]); i += 1; j += 1; } else if (t[i + 1][j] >= t[i][j + 1]) { out.push(['-', a[i]]); i += 1; } else { out.push(['+', b[j]]); j += 1; }
  }
  while (i < n) { out.push(['-', a[i]]); i += 1; }
  while (j < m) { out.push(['+', b[j]]); j += 1; }
  return out;
}

// pretty is a JSON value indented, or '' for none.
function pretty(v) { return v === undefined || v === null ? '' : JSON.stringify(v, null, 2); }

export default {
  title: 'Pins',
  async render(main, app) {
    const { el } = app;
    loop.stop();
    const mine = loop.session;
    const state = el('p', { class: 'help' }, 'Loading…');
    const errBox = el('div', {});
    const list = el('div', { role: 'region', 'aria-label': 'Held tool definitions' });
    let shown = null; // the held changes shown (server, tool, hash), rebuilt only when they change
    main.append(
      el('p', {}, 'Tool definitions that changed after Zest pinned them, or tools a server added since. A held tool is not listed and not callable on any endpoint, nor in chats, ' +
        `until you decide. Accept pins the new definition; Refuse keeps it hidden (a later change is held again). Checked every ${POLL_MS / 1000} s.`),
      state, errBox, list);

    // shownDiff renders the change of one member, words (a text: each word with the spaces
    // after it) or lines (JSON): a run removed in <del>, a run added in <ins>, which the
    // stylesheet names for screen readers ("removed:", "added:").
    const shownDiff = (label, before, after, words) => {
      const split = (s) => (words ? s.match(/\S+\s*|\s+/g) || [] : s.split('\n').map((l) => `${l}\n`));
      const ops = diff(split(before), split(after));
      if (ops === null) {
        return el('div', { class: 'field' }, el('h3', {}, label),
          el('p', { class: 'muted' }, 'Pinned:'), el('pre', {}, before), el('p', { class: 'muted' }, 'Now:'), el('pre', {}, after));
      }
      const runs = []; // [op, text], consecutive tokens of one op joined
      for (const [op, tok] of ops) {
        if (runs.length && runs[runs.length - 1][0] === op) runs[runs.length - 1][1] += tok;
        else runs.push([op, tok]);
      }
      return el('div', { class: 'field' }, el('h3', {}, label),
        el('pre', { class: 'diff' }, ...runs.map(([op, text]) => (op === ' ' ? text : el(op === '-' ? 'del' : 'ins', {}, text)))));
    };

    const decide = async (server, tools, verb, buttons) => {
      buttons.forEach((b) => { b.disabled = true; });
      try {
        const got = await app.api('POST', `/internal/mcp/servers/${encodeURIComponent(server)}/pins/${verb}`, { tools });
        const names = ((got && got.decided) || []).map((h) => h.name).join(', ');
        app.announce(`${verb === 'accept' ? 'Accepted' : 'Refused'}: ${names} of ${server}.`);
        shown = null;
        loop.halt();
        poll(false);
      } catch (err) {
        buttons.forEach((b) => { b.disabled = false; });
        errBox.replaceChildren(app.errorBox(err));
        if (err.status === 404) { shown = null; loop.halt(); poll(false); }
      }
    };

    const card = (server, h) => {
      const id = `held-${server}-${h.name}`.replace(/[^A-Za-z0-9_-]/g, '_');
      const before = h.old_definition || {};
      const after = h.new_definition || {};
      const accept = el('button', { type: 'button', 'aria-label': `Accept the new definition of ${h.name} of ${server}` }, 'Accept');
      const refuse = el('button', { type: 'button', class: 'danger', 'aria-label': `Refuse the new definition of ${h.name} of ${server}` }, 'Refuse');
      accept.addEventListener('click', () => decide(server, [h.name], 'accept', [accept, refuse]));
      refuse.addEventListener('click', () => decide(server, [h.name], 'refuse', [accept, refuse]));
      const parts = [];
      if (!h.old_definition) {
        parts.push(el('p', {}, 'A new tool: it was not among the tools pinned.'), el('pre', {}, pretty(after)));
      } else {
        for (const k of ['title', 'description']) {
          if ((before[k] || '') !== (after[k] || '')) parts.push(shownDiff(k === 'title' ? 'Title' : 'Description', before[k] || '', after[k] || '', true));
        }
        for (const k of ['inputSchema', 'outputSchema', 'annotations']) {
          if (pretty(before[k]) !== pretty(after[k])) parts.push(shownDiff(k, pretty(before[k]), pretty(after[k]), false));
        }
        parts.push(el('details', {}, el('summary', {}, 'The whole definitions'),
          el('p', { class: 'muted' }, 'Pinned:'), el('pre', {}, pretty(before)),
          el('p', { class: 'muted' }, 'Now:'), el('pre', {}, pretty(after))));
      }
      return el('section', { 'aria-labelledby': id, class: h.state === 'refused' ? 'refused' : '' },
        el('h2', { id }, el('code', {}, h.name), ` of ${server}`),
        el('p', { class: 'muted' },
          h.state === 'refused' ? `Refused by ${h.decided_by || 'an administrator'} · ` : 'Waiting for a decision · ',
          'seen at ', app.stamp(h.held_at, 'Held'),
          ' · sha256 ', el('code', {}, (h.new_sha256 || '').slice(0, 12)),
          h.old_sha256 ? [' (pinned ', el('code', {}, h.old_sha256.slice(0, 12)), ')'] : null),
        ...parts,
        el('div', { class: 'actions' }, accept, h.state === 'refused' ? null : refuse));
    };

    const poll = async (first) => {
      loop.timer = null;
      if (mine !== loop.session) return;
      loop.aborter = new AbortController();
      const signal = loop.aborter.signal;
      try {
        const got = await app.api('GET', '/internal/mcp/pins', undefined, { signal });
        const servers = (got && got.servers) || [];
        const held = servers.flatMap((p) => (p.held || []).map((h) => [p.server_id, h]));
        const key = held.map(([s, h]) => `${s}/${h.name}@${h.new_sha256}:${h.state}`).join(',');
        if (key !== shown) {
          const fresh = held.filter(([, h]) => h.state === 'pending').length;
          shown = key;
          const sections = [];
          for (const p of servers) {
            const pending = (p.held || []).filter((h) => h.state === 'pending');
            if (pending.length > 1) {
              const all = el('button', { type: 'button', class: 'secondary' }, `Accept all ${pending.length} of ${p.server_id}`);
              all.addEventListener('click', () => decide(p.server_id, [], 'accept', [all]));
              sections.push(el('div', { class: 'actions' }, all));
            }
            for (const h of p.held || []) sections.push(card(p.server_id, h));
          }
          list.replaceChildren(...(sections.length ? sections : [el('p', { class: 'muted' }, 'No tool definition is held.')]));
          if (!first && fresh > 0) app.announce(`${fresh} changed tool definition${fresh === 1 ? '' : 's'} held.`);
        }
        errBox.replaceChildren();
        const pinned = servers.reduce((n, p) => n + (p.pinned || []).length, 0);
        state.textContent = `${held.length} held · ${pinned} tools pinned on ${servers.length} server${servers.length === 1 ? '' : 's'} · checked at ${app.clock()}`;
      } catch (err) {
        if (err.name === 'AbortError') return;
        errBox.replaceChildren(app.errorBox(err));
        if (err.status === 401 || err.status === 403 || err.status === 404) {
          state.textContent = err.status === 404 ? 'Not polling: this server has no pins route (GET /internal/mcp/pins).'
            : 'Not polling: the admin key is needed. Set it with the Admin key button, then come back to this page.';
          return;
        }
        state.textContent = 'The last check failed; trying again.';
      } finally {
        if (loop.aborter && loop.aborter.signal === signal) loop.aborter = null;
      }
      if (mine === loop.session) loop.timer = setTimeout(() => poll(false), POLL_MS);
    };
    await poll(true);
  },
  leave() {
    loop.stop();
  },
};
