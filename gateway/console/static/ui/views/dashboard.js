export default { title: 'MCP endpoint', async render(main, app) { main.append(app.el('p', {}, 'Loading…')); } };
