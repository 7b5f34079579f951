export default { title: 'External MCP servers', async render(main, app) { main.append(app.el('p', {}, 'Loading…')); } };
