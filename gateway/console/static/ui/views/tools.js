// Placeholder while the view is being written.
export default { title: 'tools', async render(main, app) { main.append(app.el('p', {}, 'Not built yet.')); } };
