// Approvals: the tool calls that wait for an administrator's decision (their server's
// approval is "required", or approval_tools names the tool), from GET /internal/mcp/approvals,
// polled every 2 s. Each shows its arguments and who asked; Approve runs the call, Deny fails it
// with the reason typed beside it (the model reads it). A 404 means an edge older than the route.

import { Poll } from './poll.js';

const POLL_MS = 2000;

const loop = new Poll();

// pretty indents a JSON text; one that does not parse (cut at 16 KiB) is shown as it is.
function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

export default {
  title: 'Approvals',
  async render(main, app) {
    const { el } = app;
    loop.stop();
    const mine = loop.session;
    const state = el('p', { class: 'help' }, 'Loading…');
    const errBox = el('div', {});
    const list = el('div', { role: 'region', 'aria-label': 'Tool calls waiting for approval' });
    let shown = null; // the ids shown, to rebuild only when they change (a reason being typed stays)
    main.append(
      el('p', {}, 'Tool calls that wait for an administrator\'s decision: their server\'s approval is "required", or its approval_tools name the tool. ' +
        `Approve runs the call; Deny fails it, and the model is told why. Checked every ${POLL_MS / 1000} s.`),
      state, errBox, list);

    const decide = async (a, verb, reasonInput, buttons) => {
      buttons.forEach((b) => { b.disabled = true; });
      try {
        const reason = reasonInput.value.trim();
        await app.api('POST', `/internal/mcp/approvals/${encodeURIComponent(a.id)}/${verb}`, reason ? { reason } : {});
        app.announce(`${verb === 'approve' ? 'Approved' : 'Denied'}: ${a.tool} of ${a.server_id}.`);
        shown = null;
        loop.halt();
        poll(false);
      } catch (err) {
        buttons.forEach((b) => { b.disabled = false; });
        errBox.replaceChildren(app.errorBox(err));
        if (err.status === 404 || err.status === 400) { shown = null; loop.halt(); poll(false); }
      }
    };

    const card = (a) => {
      const short = a.id.slice(0, 8);
      const reasonId = `reason-${a.id}`;
      const reason = el('input', { type: 'text', id: reasonId, maxlength: '500', autocomplete: 'off' });
      const approve = el('button', { type: 'button', 'aria-label': `Approve ${a.tool} of ${a.server_id} (${short})` }, 'Approve');
      const deny = el('button', { type: 'button', class: 'danger', 'aria-label': `Deny ${a.tool} of ${a.server_id} (${short})` }, 'Deny');
      approve.addEventListener('click', () => decide(a, 'approve', reason, [approve, deny]));
      deny.addEventListener('click', () => decide(a, 'deny', reason, [approve, deny]));
      return el('section', { 'aria-labelledby': `title-${a.id}` },
        el('h2', { id: `title-${a.id}` }, el('code', {}, a.tool), ` of ${a.server_id}`),
        el('p', { class: 'muted' },
          a.chat_name && a.chat_name !== a.tool ? [`Called as `, el('code', {}, a.chat_name), ' · '] : null,
          'Asked by ', el('code', {}, a.who || 'anonymous'),
          a.preset_id ? ` · preset ${a.preset_id}` : '',
          ' · at ', app.stamp(a.created, 'Asked'),
          ' · fails as expired at ', app.stamp(a.expires, 'Expires'),
          ` · approval ${short}`),
        el('p', { class: 'muted' }, 'Arguments:'),
        el('pre', {}, pretty(a.arguments || '{}')),
        el('div', { class: 'field' }, el('label', { for: reasonId }, 'Reason (optional; told to the model with a denial)'), reason),
        el('div', { class: 'actions' }, approve, deny));
    };

    const poll = async (first) => {
      loop.timer = null;
      if (mine !== loop.session) return;
      loop.aborter = new AbortController();
      const signal = loop.aborter.signal;
      try {
        const got = await app.api('GET', '/internal/mcp/approvals', undefined, { signal });
        const pending = (got && got.approvals) || [];
        const ids = pending.map((a) => a.id).join(',');
        if (ids !== shown) {
          const before = shown ? shown.split(',') : [];
          const fresh = pending.filter((a) => !before.includes(a.id)).length;
          shown = ids;
          list.replaceChildren(...(pending.length ? pending.map(card)
            : [el('p', { class: 'muted' }, 'No tool call waits for approval.')]));
          if (!first && fresh > 0) app.announce(`${fresh} tool call${fresh === 1 ? '' : 's'} now wait${fresh === 1 ? 's' : ''} for approval.`);
        }
        errBox.replaceChildren();
        const timeout = Number(got && got.timeout_ms) || 0;
        state.textContent = `${pending.length} waiting · checked at ${app.clock()}` +
          (timeout ? ` · a call waits at most ${Math.round(timeout / 1000)} s (ZEST_APPROVAL_TIMEOUT)` : '');
      } catch (err) {
        if (err.name === 'AbortError') return;
        if (err.status === 404) {
          errBox.replaceChildren(el('div', { class: 'notice', role: 'status' },
            el('p', {}, el('span', { 'aria-hidden': 'true' }, 'ℹ '), 'The approvals route (GET /internal/mcp/approvals) is not available on this server: it is older than this view.')));
          state.textContent = 'Not polling.';
          return;
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
      if (mine === loop.session) loop.timer = setTimeout(() => poll(false), POLL_MS);
    };
    await poll(true);
  },
  leave() {
    loop.stop();
  },
};
