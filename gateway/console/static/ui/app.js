// The Zest console: a hash router over views (one module each in views/), and what they share:
// el() to build DOM (never innerHTML with data), api() for the same-origin HTTP API with the
// keys kept in sessionStorage (this tab only), announce() for the polite live region, and
// small widgets (copy button, error box, field errors).
import dashboard from './views/dashboard.js';
import servers from './views/servers.js';
import tools from './views/tools.js';
import presets from './views/presets.js';
import chat from './views/chat.js';
import activity from './views/activity.js';
import audit from './views/audit.js';
import approvals from './views/approvals.js';
import pins from './views/pins.js';

const views = { '#/': dashboard, '#/servers': servers, '#/tools': tools, '#/presets': presets, '#/chat': chat, '#/activity': activity, '#/audit': audit, '#/approvals': approvals, '#/pins': pins };

const ADMIN_KEY = 'zest.adminKey';
const API_KEY = 'zest.apiKey';

// el('button', {type: 'button', onclick: f}, 'text', child…): attributes starting with "on"
// are listeners; aria-*, data-* and the rest are attributes; null and false are skipped.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else if (k === 'class') node.className = v;
    else if (k === 'value' && 'value' in node) node.value = v;
    else if (k === 'checked' || k === 'selected' || k === 'open') node[k] = !!v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// announce says text in the polite live region (cleared first so a repeat is read again).
export function announce(text) {
  const live = document.getElementById('live');
  live.textContent = '';
  setTimeout(() => { live.textContent = text; }, 50);
}

export function origin() { return window.location.origin; }

export function adminKey() { return sessionStorage.getItem(ADMIN_KEY) || ''; }
export function apiKey() { return sessionStorage.getItem(API_KEY) || ''; }

// ApiError is a failed answer of the API: status, message, and the field it names (param).
export class ApiError extends Error {
  constructor(status, message, param, body) {
    super(message);
    this.status = status;
    this.param = param || '';
    this.body = body;
  }
}

// errorMessage finds the message in Zest's error shapes ({"error":"…"},
// {"error":{"message":"…"}}, JSON-RPC errors).
function errorMessage(body, status) {
  if (body && typeof body.error === 'string') return body.error;
  if (body && body.error && body.error.message) return body.error.message;
  return `HTTP ${status}`;
}

// api calls the same-origin API. Admin routes (/internal/mcp) send the admin key; the others
// the API key when one is kept. A 401 asks for the key and tries once more.
export async function api(method, path, body, opts = {}) {
  const admin = path.startsWith('/internal/mcp');
  const headers = { Accept: 'application/json', ...(opts.headers || {}) };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const key = admin ? adminKey() : apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: opts.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    const err = new ApiError(0, `Could not reach Zest at ${origin()}: ${e.message}`);
    err.request = `${method} ${path}`;
    throw err;
  }
  if (opts.raw) return res;
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { error: text }; }
  if (res.ok) return data;
  const msg = errorMessage(data, res.status);
  if (res.status === 401 && !opts.retried) {
    const got = await askKey(admin ? 'admin' : 'api', msg);
    if (got) return api(method, path, body, { ...opts, retried: true });
  }
  if (res.status === 403 && admin && /requires LEMONADE_ADMIN_API_KEY/.test(msg)) {
    throw new ApiError(403, msg, '', { notConfigured: true });
  }
  const err = new ApiError(res.status, msg, data && data.error && data.error.param, data);
  err.request = `${method} ${path}`;
  throw err;
}

// askKey opens the key dialog; it resolves true once a key was given.
export function askKey(kind = 'admin', why = '') {
  const dialog = document.getElementById('key-dialog');
  const input = document.getElementById('key-input');
  const title = document.getElementById('key-title');
  const text = document.getElementById('key-why');
  title.textContent = kind === 'admin' ? 'Admin key' : 'API key';
  document.querySelector('label[for="key-input"]').textContent = title.textContent;
  text.textContent = (why ? `${why}. ` : '') + (kind === 'admin'
    ? 'The admin API needs the server\'s admin key (LEMONADE_ADMIN_API_KEY). It is kept for this browser tab only.'
    : 'This server needs its API key (LEMONADE_API_KEY). It is kept for this browser tab only.');
  input.value = '';
  dialog.dataset.kind = kind;
  return new Promise((resolve) => {
    const done = (ok) => {
      dialog.removeEventListener('close', onClose);
      resolve(ok);
    };
    const onClose = () => {
      if (dialog.returnValue === 'save' && input.value) {
        sessionStorage.setItem(kind === 'admin' ? ADMIN_KEY : API_KEY, input.value);
        updateKeyButton();
        announce(`${title.textContent} saved for this tab.`);
        done(true);
      } else done(false);
    };
    dialog.addEventListener('close', onClose);
    dialog.returnValue = '';
    dialog.showModal();
    input.focus();
  });
}

function updateKeyButton() {
  const b = document.getElementById('key-button');
  b.textContent = adminKey() ? 'Admin key ✓' : 'Admin key';
  b.setAttribute('aria-label', adminKey() ? 'Admin key (set for this tab)' : 'Admin key (not set)');
}

// copyButton copies text (the clipboard API, or a selection when it is not allowed).
export function copyButton(text, label = 'Copy') {
  const b = el('button', { type: 'button', class: 'secondary small', onclick: async () => {
    try {
      await navigator.clipboard.writeText(typeof text === 'function' ? text() : text);
      b.textContent = 'Copied';
      announce('Copied to the clipboard.');
    } catch {
      b.textContent = 'Select and copy';
      announce('The browser did not allow copying: select the text and copy it.');
    }
    setTimeout(() => { b.textContent = label; }, 2000);
  } }, label);
  return b;
}

// headline is what a failed request means to a person, by its status (and a timeout by its
// message while the API still answers it 502). Empty: the API refused the request itself, and
// its message (which names the field and the fix) is the one to show.
function headline(err) {
  const s = err.status;
  const rpc = rpcCode(err);
  if (/deadline exceeded|timed out|timeout/i.test(err.message) && (s === 0 || s === 408 || s >= 500 || rpc !== null)) {
    return /\/mcp/.test(err.request || '') ? 'The MCP server did not answer in time: try again, or give it a longer timeout on the Servers page.'
      : 'No answer came in time: try again; the details say what timed out.';
  }
  if (rpc === -32603) return 'The MCP server failed to complete this: its status and last error are on the Servers page.';
  if (rpc === -32601) return 'The MCP server does not offer this.';
  if (s === 0) return `Zest did not answer at ${origin()}: check that it is running, then try again.`;
  if (s === 401) return 'The key was refused: give the right one with the Admin key button.';
  if (s === 403) return 'The key given may not do this.';
  if (s === 404) return 'Not found: it may have been removed meanwhile. Reload the view to see what is there now.';
  if (s === 429) return 'Too many requests: wait a moment, then try again.';
  if ((s === 502 || s === 503) && /\/mcp/.test(err.request || '')) return 'The MCP server could not complete this: its status and last error are on the Servers page.';
  if (s === 502 || s === 503) return 'What Zest relies on for this (a model, a service) could not complete it: try again; the details say what failed.';
  if (s >= 500) return 'Zest could not complete this request: try again; the details say what failed.';
  return '';
}

// rpcCode is the JSON-RPC error code of an MCP answer, or null.
function rpcCode(err) {
  const e = err.body && err.body.error;
  return e && typeof e.code === 'number' ? e.code : null;
}

// errorBox shows an error as an alert: a person's message, and the raw answer (status, request,
// body) under Details, closed. An error of the API that it refused (4xx) shows the API's own
// message, which names the field and the fix. notConfigured gets the fix.
export function errorBox(err) {
  if (err && err.body && err.body.notConfigured) {
    return el('div', { class: 'notice', role: 'alert' },
      el('p', {}, el('strong', {}, 'This server has no admin key configured, '), 'so registering servers and presets is off. Start it with one:'),
      el('pre', {}, 'export LEMONADE_ADMIN_API_KEY="$(openssl rand -hex 16)"\nmake run'),
      el('p', {}, 'Chats keep working with "No MCP" or the built-in lemonade tools.'));
  }
  const msg = String(err && err.message ? err.message : err);
  if (!(err instanceof ApiError)) return el('div', { class: 'error', role: 'alert' }, el('p', {}, msg));
  const head = headline(err);
  const own = (err.status >= 400 && err.status < 500 || (rpcCode(err) !== null && rpcCode(err) !== -32603)) && !/deadline exceeded|timed out|timeout/i.test(msg);
  const how = err.status === undefined ? 'An error in the answer\'s stream' : `HTTP ${err.status || '(no answer)'}`;
  const raw = [`${how}${err.request ? ` · ${err.request}` : ''}`, msg];
  if (err.body && typeof err.body === 'object') raw.push(JSON.stringify(err.body, null, 2));
  return el('div', { class: 'error', role: 'alert' },
    head ? el('p', {}, el('strong', {}, head)) : null,
    own || !head ? el('p', {}, msg) : null,
    el('details', {}, el('summary', {}, 'Details'), el('pre', {}, raw.join('\n'))));
}

// stamp shows a time (RFC 3339) in the console's one format, local "YYYY-MM-DD HH:MM:SS",
// as a <time> whose title is the exact UTC time. title adds what the time is.
export function stamp(iso, title = '') {
  const d = new Date(iso);
  if (!iso || Number.isNaN(d.getTime())) return el('span', {}, iso || '');
  const p = (n) => String(n).padStart(2, '0');
  const text = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  return el('time', { datetime: d.toISOString(), title: `${title ? `${title}: ` : ''}${d.toISOString()}` }, text);
}

// clock is the time of day now, in the format of stamp.
export function clock() {
  return stamp(new Date().toISOString()).textContent.slice(11);
}

// fieldError shows msg under the input of a form (aria-invalid, aria-errormessage) and
// returns whether the form had that field.
export function fieldError(form, name, msg) {
  const input = form.querySelector(`[name="${name}"]`);
  if (!input) return false;
  const id = `${input.id || name}-error`;
  let box = form.querySelector(`#${CSS.escape(id)}`);
  if (!box) {
    box = el('p', { id, class: 'field-error' });
    (input.closest('.field') || input.parentElement).append(box);
  }
  box.textContent = msg;
  input.setAttribute('aria-invalid', 'true');
  input.setAttribute('aria-errormessage', id);
  // Also described by it: screen readers that ignore aria-errormessage read it this way.
  const described = (input.getAttribute('aria-describedby') || '').split(' ').filter((x) => x && x !== id);
  input.setAttribute('aria-describedby', [id, ...described].join(' '));
  input.focus();
  return true;
}

export function clearFieldErrors(form) {
  for (const box of form.querySelectorAll('.field-error')) box.remove();
  for (const i of form.querySelectorAll('[aria-invalid]')) {
    const id = i.getAttribute('aria-errormessage');
    const rest = (i.getAttribute('aria-describedby') || '').split(' ').filter((x) => x && x !== id);
    if (rest.length) i.setAttribute('aria-describedby', rest.join(' '));
    else i.removeAttribute('aria-describedby');
    i.removeAttribute('aria-invalid');
    i.removeAttribute('aria-errormessage');
  }
}

// field wraps a labelled control: field('Name', input, 'help text').
let fieldSeq = 0;
export function field(label, control, help) {
  if (!control.id) control.id = `f${++fieldSeq}`;
  const parts = [el('label', { for: control.id }, label), control];
  if (help) {
    const hid = `${control.id}-help`;
    control.setAttribute('aria-describedby', hid);
    parts.push(el('p', { id: hid, class: 'help' }, help));
  }
  return el('div', { class: 'field' }, parts);
}

export const app = { el, api, announce, askKey, copyButton, errorBox, stamp, clock, fieldError, clearFieldErrors, field, origin, adminKey, apiKey, ApiError };

let current = null;
async function route() {
  const hash = views[location.hash] ? location.hash : (location.hash.split('?')[0] in views ? location.hash.split('?')[0] : '#/');
  const view = views[hash];
  if (current && current.leave) current.leave();
  current = view;
  for (const a of document.querySelectorAll('nav a')) {
    if (a.getAttribute('href') === hash) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const main = document.getElementById('main');
  main.replaceChildren(el('h1', {}, view.title));
  document.title = `${view.title} · Zest console`;
  try {
    await view.render(main, app);
  } catch (e) {
    main.append(errorBox(e));
  }
  main.dataset.ready = hash;
}

function init() {
  // A key handed in the URL's fragment (make run prints such a link; a fragment never
  // reaches a server) is kept for the tab and removed from the address bar.
  // (#key=K, or #key=K&/servers to open a view.)
  const m = /^#key=([^&]+)(?:&(#?\/.*))?$/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(ADMIN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, '', `${location.pathname}#${(m[2] || '/').replace(/^#/, '')}`);
  }
  document.getElementById('key-button').addEventListener('click', () => askKey('admin'));
  document.getElementById('key-cancel').addEventListener('click', () => document.getElementById('key-dialog').close('cancel'));
  document.getElementById('key-forget').addEventListener('click', () => {
    sessionStorage.removeItem(ADMIN_KEY);
    updateKeyButton();
    document.getElementById('key-dialog').close('cancel');
    announce('The admin key was forgotten.');
  });
  updateKeyButton();
  window.addEventListener('hashchange', route);
  route();
}

init();
