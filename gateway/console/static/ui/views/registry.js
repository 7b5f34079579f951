// Install from the MCP Registry: a search of the registry through Zest's admin route
// (GET /internal/mcp/registry/servers: mcpgateway reads the registry, the page never does),
// each server with what it would run (the command line or the URL, and the environment
// variables it refers to) or why Zest cannot install it; Install saves the plan's config as a
// new server (POST /internal/mcp/servers, never over a registered one) and connects it.

// installSection builds the section. registered(id) says whether an id is taken; installed(saved)
// is called with the stored config once saved.
export function installSection(app, { registered, installed }) {
  const { el, field } = app;
  const results = el('ul', { class: 'plain servers', id: 'registry-results', 'aria-label': 'Servers found in the MCP Registry' });
  const status = el('div', { id: 'registry-status', 'aria-live': 'polite' });
  const more = el('button', { type: 'button', class: 'secondary', id: 'registry-more', hidden: true }, 'More results');
  const form = el('form', { id: 'registry-form', role: 'search', 'aria-labelledby': 'registry-h' },
    field('Search the registry', el('input', { type: 'search', name: 'registry-search', placeholder: 'memory', autocomplete: 'off' }),
      'Matches server names, e.g. "memory" or "io.github.modelcontextprotocol". Empty: every server.'),
    field('Working directory (optional)', el('input', { type: 'text', name: 'registry-working-dir', autocomplete: 'off' }),
      'Where a local process runs on the tool host (npx runs a package installed there). Empty: the tool host\'s own.'),
    el('div', { class: 'actions' }, el('button', { type: 'submit', id: 'registry-search-button' }, 'Search')));
  let cursor = '';
  let query = '';

  const install = async (rs, out) => {
    const cfg = { ...rs.plan.config };
    const dir = form.elements['registry-working-dir'].value.trim();
    if (dir && cfg.transport !== 'streamable-http') cfg.working_dir = dir;
    if (registered(cfg.id)) {
      out.replaceChildren(el('p', { class: 'error', role: 'alert' },
        `A server with id ${cfg.id} is registered already: remove it first, or add this one by hand with another id below.`));
      return;
    }
    out.replaceChildren(el('p', {}, 'Installing…'));
    try {
      const saved = (await app.api('POST', '/internal/mcp/servers', cfg)).server;
      out.replaceChildren(el('p', { class: 'okbox' }, `Installed as ${saved.id}: it is in the list above, connecting.`));
      app.announce(`${rs.name} installed as ${saved.id}.`);
      await installed(saved);
    } catch (e) {
      out.replaceChildren(app.errorBox(e));
    }
  };

  const item = (rs, i) => {
    const p = rs.plan;
    const out = el('div', { 'aria-live': 'polite' });
    const hid = `registry-${i}-name`;
    const vars = p ? (p.variables || []) : [];
    return el('li', { 'aria-labelledby': hid, 'data-name': rs.name },
      el('h3', { id: hid }, rs.title || rs.name, ' ', el('span', { class: 'muted mono' }, `${rs.name} ${rs.version}`)),
      rs.description ? el('p', {}, rs.description) : null,
      p ? el('dl', { class: 'plan' },
        el('dt', {}, 'From'), el('dd', { class: 'mono' }, p.source),
        p.command_line ? [el('dt', {}, 'Runs'), el('dd', { class: 'mono', 'data-part': 'command' }, p.command_line)] : null,
        p.url ? [el('dt', {}, 'Connects to'), el('dd', { class: 'mono', 'data-part': 'url' }, p.url)] : null,
        p.config.bearer_token ? [el('dt', {}, 'Sends'), el('dd', { class: 'mono' }, `Authorization: Bearer ${p.config.bearer_token}`)] : null,
        vars.length ? [el('dt', {}, 'Environment'), el('dd', {}, el('ul', {}, vars.map((v) => el('li', {},
          el('code', {}, v.in_config ? `${v.name}=\${${v.name}}` : v.name), ' — ',
          v.in_config ? 'required: set it where the server runs' : 'optional, left out',
          v.secret ? '; secret, never stored' : '', v.default_value ? `; default ${v.default_value}` : '',
          v.description ? `. ${v.description}` : ''))))] : null,
        el('dt', {}, 'Saved as'), el('dd', { class: 'mono' }, p.config.id))
        : el('p', { class: 'notice', 'data-part': 'refused' }, rs.refused),
      p ? el('div', { class: 'actions' }, el('button', { type: 'button', 'aria-label': `Install ${rs.name}`, onclick: () => install(rs, out) }, 'Install')) : null,
      out);
  };

  const search = async (next) => {
    status.replaceChildren(el('p', {}, 'Searching…'));
    try {
      const params = new URLSearchParams({ search: query });
      if (next) params.set('cursor', cursor);
      const r = await app.api('GET', `/internal/mcp/registry/servers?${params}`);
      const found = r.servers || [];
      const start = next ? results.children.length : 0;
      const items = found.map((rs, i) => item(rs, start + i));
      if (next) results.append(...items); else results.replaceChildren(...items);
      cursor = r.next_cursor || '';
      more.hidden = !cursor;
      const n = results.children.length;
      status.replaceChildren(el('p', { class: 'muted' }, n ? `${n} server${n === 1 ? '' : 's'} from ${r.registry_url}${cursor ? ', more to come' : ''}.` : `Nothing found in ${r.registry_url}.`));
    } catch (e) {
      status.replaceChildren(app.errorBox(e));
    }
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    query = form.elements['registry-search'].value.trim();
    search(false);
  });
  more.addEventListener('click', () => search(true));
  return el('section', { 'aria-labelledby': 'registry-h', id: 'registry' },
    el('h2', { id: 'registry-h' }, 'Install from the MCP Registry'),
    el('p', { class: 'muted' }, 'Zest reads the registry (ZEST_MCP_REGISTRY_URL) and shows what each server would run before you install it. Secrets stay ${VARIABLE} references.'),
    form, status, results, more);
}
