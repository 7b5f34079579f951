// schemaform: a form built from a tool's inputSchema (JSON Schema), and the arguments read back.
// It covers what tools use in practice (strings, numbers, integers, booleans, enums, nested
// objects, arrays); anything else (anyOf, oneOf, free-form objects, arrays of objects) gets a
// JSON textarea for that one field, and the Try-a-tool view keeps a Raw JSON tab for the rest.
//
// Each control's name is its path in the arguments joined with "." (e.g. "options.limit"),
// which is also what readSchemaForm's errors carry as param, so a view can hand them to
// app.fieldError(form, param, message).
import { el, field } from '../app.js';

// What each container was built from, for readSchemaForm.
const built = new WeakMap();

// Past this many characters a string gets a textarea rather than a one-line input.
const LONG_STRING = 200;
// Formats an <input> renders better than a text box; any other format gets a textarea.
const INPUT_FORMATS = { email: 'email', uri: 'url', url: 'url', 'date-time': 'text', date: 'date', time: 'text', uuid: 'text', hostname: 'text', ipv4: 'text', ipv6: 'text', regex: 'text' };

// SchemaError names the field (param) whose value cannot be read.
export class SchemaError extends Error {
  constructor(param, message) {
    super(message);
    this.param = param;
  }
}

// kind says how a (sub)schema is edited: string, number, integer, boolean, enum, object,
// lines (an array of primitives, one per line) or json.
export function kind(s) {
  if (!s || typeof s !== 'object') return 'json';
  if (Array.isArray(s.enum) && s.enum.length > 0) return 'enum';
  let t = s.type;
  if (Array.isArray(t)) {
    const real = t.filter((x) => x !== 'null');
    t = real.length === 1 ? real[0] : undefined;
  }
  if (!t && s.properties) t = 'object';
  switch (t) {
    case 'string': case 'number': case 'integer': case 'boolean':
      return t;
    case 'object':
      return s.properties && Object.keys(s.properties).length > 0 ? 'object' : 'json';
    case 'array': {
      const it = s.items && !Array.isArray(s.items) ? kind(s.items) : 'json';
      return ['string', 'number', 'integer', 'enum'].includes(it) ? 'lines' : 'json';
    }
    default:
      return 'json';
  }
}

// summary counts the top-level inputs and the required ones: "3 inputs · 1 required".
export function summary(schema) {
  const n = schema && schema.properties ? Object.keys(schema.properties).length : 0;
  const req = schema && Array.isArray(schema.required) ? schema.required.length : 0;
  return `${n} input${n === 1 ? '' : 's'} · ${req} required`;
}

function safeId(s) {
  return s.replace(/[^A-Za-z0-9_-]/g, '_');
}

function labelText(name, s, required) {
  const t = s && typeof s.title === 'string' && s.title ? s.title : name;
  return required ? `${t} (required)` : t;
}

function helpText(s, extra) {
  const parts = [];
  if (s && typeof s.description === 'string' && s.description) parts.push(s.description);
  if (extra) parts.push(extra);
  return parts.join(' ');
}

function isLongString(name, s, value) {
  if (s.format && !(s.format in INPUT_FORMATS)) return true;
  if (typeof s.maxLength === 'number' && s.maxLength > LONG_STRING) return true;
  if (typeof value === 'string' && (value.includes('\n') || value.length > 80)) return true;
  return s.contentMediaType !== undefined;
}

// control builds the labelled control of one field.
function control(path, name, s, required, value, prefix) {
  const id = `${prefix}-${safeId(path)}`;
  const k = kind(s);
  const common = { id, name: path, required: required && k !== 'boolean' ? true : null, 'data-kind': k };
  const label = labelText(name, s, required);
  switch (k) {
    case 'boolean': {
      const input = el('input', { ...common, type: 'checkbox', checked: value === true });
      const help = helpText(s);
      const hid = `${id}-help`;
      if (help) input.setAttribute('aria-describedby', hid);
      return el('div', { class: 'field' },
        el('div', { class: 'check' }, input, el('label', { for: id }, label)),
        help ? el('p', { id: hid, class: 'help' }, help) : null);
    }
    case 'enum': {
      const sel = el('select', common,
        // An optional enum may stay unset; a required one without a default is chosen on purpose.
        !required ? el('option', { value: '' }, '— not set —') : value === undefined ? el('option', { value: '' }, '— choose one —') : null,
        s.enum.map((v, i) => el('option', { value: String(i), selected: value !== undefined && JSON.stringify(v) === JSON.stringify(value) }, v === null ? 'null' : String(v))));
      if (value === undefined) sel.value = '';
      return field(label, sel, helpText(s));
    }
    case 'number': case 'integer': {
      const input = el('input', { ...common, type: 'number', step: k === 'integer' ? '1' : 'any', inputmode: k === 'integer' ? 'numeric' : 'decimal',
        min: typeof s.minimum === 'number' ? s.minimum : null, max: typeof s.maximum === 'number' ? s.maximum : null,
        value: typeof value === 'number' ? String(value) : null });
      return field(label, input, helpText(s, k === 'integer' ? 'A whole number.' : ''));
    }
    case 'string': {
      const v = typeof value === 'string' ? value : null;
      const limits = { minlength: typeof s.minLength === 'number' ? s.minLength : null, maxlength: typeof s.maxLength === 'number' ? s.maxLength : null };
      const c = isLongString(name, s, v)
        ? el('textarea', { ...common, ...limits, rows: 4, value: v })
        : el('input', { ...common, ...limits, type: INPUT_FORMATS[s.format] || 'text', value: v, autocomplete: 'off', spellcheck: 'false' });
      return field(label, c, helpText(s, s.format ? `Format: ${s.format}.` : ''));
    }
    case 'lines': {
      const it = s.items;
      const ik = kind(it);
      const allowed = ik === 'enum' ? ` Allowed: ${it.enum.map((x) => String(x)).join(', ')}.` : '';
      const what = ik === 'integer' ? 'whole number' : ik === 'number' ? 'number' : 'item';
      const ta = el('textarea', { ...common, rows: 3, 'data-items': ik, value: Array.isArray(value) ? value.map((x) => String(x)).join('\n') : null });
      return field(label, ta, helpText(s, `One ${what} per line.${allowed}`));
    }
    case 'object': {
      const req = new Set(Array.isArray(s.required) ? s.required : []);
      const obj = value && typeof value === 'object' && !Array.isArray(value) ? value : {};
      const help = helpText(s);
      const hid = `${id}-help`;
      return el('fieldset', { id, 'data-path': path, 'aria-describedby': help ? hid : null },
        el('legend', {}, label),
        help ? el('p', { id: hid, class: 'help' }, help) : null,
        Object.entries(s.properties).map(([n, sub]) => control(`${path}.${n}`, n, sub, req.has(n), pick(obj, n, sub), prefix)));
    }
    default: {
      const ta = el('textarea', { ...common, rows: 4, class: 'mono', spellcheck: 'false', value: value === undefined ? null : JSON.stringify(value, null, 2) });
      return field(label, ta, helpText(s, 'Enter a JSON value.'));
    }
  }
}

// pick is the value to prefill: the one given, else the schema's default.
function pick(values, name, s) {
  if (values && Object.prototype.hasOwnProperty.call(values, name)) return values[name];
  return s && typeof s === 'object' ? s.default : undefined;
}

// buildSchemaForm returns an element holding the fields of schema (an object schema), prefilled
// with values (an arguments object, e.g. from the Raw JSON tab) or else the defaults. prefix
// keeps the control ids unique on the page.
export function buildSchemaForm(schema, { values = {}, prefix = 'arg' } = {}) {
  const s = schema && typeof schema === 'object' ? schema : {};
  const props = s.properties && typeof s.properties === 'object' ? s.properties : {};
  const req = new Set(Array.isArray(s.required) ? s.required : []);
  const box = el('div', { class: 'schema-form' });
  const names = Object.keys(props);
  if (names.length === 0) {
    box.append(el('p', { class: 'help' }, 'This tool takes no inputs.'));
  }
  for (const n of names) box.append(control(n, n, props[n], req.has(n), pick(values, n, props[n]), prefix));
  built.set(box, { schema: s, prefix });
  return box;
}

// readSchemaForm reads the arguments back from a container made by buildSchemaForm: numbers as
// numbers, empty optional fields left out, required ones checked. It throws a SchemaError
// naming the field for a value it cannot read.
export function readSchemaForm(box) {
  const info = built.get(box);
  if (!info) throw new Error('readSchemaForm: not a form built by buildSchemaForm');
  const out = readObject(box, '', info.schema, true);
  return out === undefined ? {} : out;
}

function readObject(box, base, s, required) {
  const props = s.properties || {};
  const req = new Set(Array.isArray(s.required) ? s.required : []);
  const out = {};
  for (const [n, sub] of Object.entries(props)) {
    const path = base ? `${base}.${n}` : n;
    const v = readField(box, path, n, sub, req.has(n));
    if (v !== undefined) out[n] = v;
  }
  if (!required && Object.keys(out).length === 0) return undefined;
  return out;
}

function readField(box, path, name, s, required) {
  const k = kind(s);
  if (k === 'object') return readObject(box, path, s, required);
  const c = box.querySelector(`[name="${CSS.escape(path)}"]`);
  if (!c) return undefined;
  const label = labelText(name, s, false);
  const missing = () => new SchemaError(path, `${label} is required.`);
  if (k === 'boolean') {
    const def = typeof s.default === 'boolean' ? s.default : false;
    return required || c.checked !== def ? c.checked : undefined;
  }
  const raw = c.value;
  if (k === 'enum') {
    if (raw === '') {
      if (required) throw missing();
      return undefined;
    }
    return s.enum[Number(raw)];
  }
  if (k === 'string') {
    if (raw === '') {
      if (required) throw missing();
      return undefined;
    }
    return raw;
  }
  if (raw.trim() === '') {
    if (required) throw missing();
    return undefined;
  }
  if (k === 'number' || k === 'integer') return toNumber(path, label, raw, k);
  if (k === 'lines') {
    const ik = c.dataset.items;
    const items = raw.split('\n').map((x) => x.trim()).filter((x) => x !== '');
    if (ik === 'number' || ik === 'integer') return items.map((x, i) => toNumber(path, `${label}, line ${i + 1}`, x, ik));
    if (ik === 'enum') {
      return items.map((x, i) => {
        const found = s.items.enum.find((e) => String(e) === x);
        if (found === undefined) throw new SchemaError(path, `${label}, line ${i + 1}: "${x}" is not one of ${s.items.enum.map(String).join(', ')}.`);
        return found;
      });
    }
    return items;
  }
  try {
    return JSON.parse(raw);
  } catch (e) {
    throw new SchemaError(path, `${label} is not valid JSON: ${e.message}`);
  }
}

function toNumber(path, label, raw, k) {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) throw new SchemaError(path, `${label} must be a number, not "${raw}".`);
  if (k === 'integer' && !Number.isInteger(n)) throw new SchemaError(path, `${label} must be a whole number, not ${raw}.`);
  return n;
}
