// McpSession: an MCP client in the page, as the Inspector is one, for Try a tool. It speaks
// Streamable HTTP in the session era to one of Zest's own endpoints (/mcp/servers/{id}): the
// same public endpoint every MCP client uses, so a call from here goes through the same
// pipeline. It declares sampling and elicitation, so a server's requests of a call reach the
// page (onRequest answers them), reads each POST's SSE stream (progress, requests, the answer),
// and cancels a request with notifications/cancelled.

// PROTOCOL is the revision asked for in initialize; the server may answer an older one.
export const PROTOCOL = '2025-11-25';

// mcpError is a JSON-RPC error of an MCP answer (its body holds code, message, data), or an
// HTTP failure of the endpoint (status), as the console's ApiError, so that errorBox words it.
export function mcpError(app, status, message, body, request) {
  const err = new app.ApiError(status, message, '', body);
  err.request = request;
  return err;
}

export class McpSession {
  // endpoint: the path (/mcp/servers/ID); handlers.onRequest(msg) resolves to the result of a
  // server's request (sampling/createMessage, elicitation/create, roots/list), or throws
  // {code, message} to answer an error.
  constructor(app, endpoint, handlers = {}) {
    this.app = app;
    this.endpoint = endpoint;
    this.handlers = handlers;
    this.sessionId = '';
    this.protocol = PROTOCOL;
    this.nextId = 1;
    this.serverInfo = null;
    this.capabilities = {};
    this.expired = false; // Zest answered 404 for the session: open another
  }

  headers(extra = {}) {
    const h = { Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json', 'MCP-Protocol-Version': this.protocol, ...extra };
    if (this.sessionId) h['Mcp-Session-Id'] = this.sessionId;
    const key = this.app.apiKey();
    if (key) h.Authorization = `Bearer ${key}`;
    return h;
  }

  // post sends one JSON-RPC message; a 401 asks for the API key once and sends it again.
  async post(msg, signal, retried = false) {
    let res;
    try {
      res = await fetch(this.endpoint, { method: 'POST', headers: this.headers(), body: JSON.stringify(msg), signal });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw mcpError(this.app, 0, `Could not reach Zest at ${this.app.origin()}: ${e.message}`, null, `POST ${this.endpoint} ${msg.method || 'response'}`);
    }
    if (res.status === 401 && !retried) {
      if (await this.app.askKey('api', 'The MCP endpoint needs the API key')) return this.post(msg, signal, true);
    }
    if (res.status === 404 && this.sessionId) this.expired = true;
    if (!res.ok && res.status !== 202) {
      const text = await res.text();
      let body = null;
      try { body = JSON.parse(text); } catch { body = text ? { error: text } : null; }
      const m = body && body.error && (body.error.message || body.error);
      throw mcpError(this.app, res.status, typeof m === 'string' && m ? m : `HTTP ${res.status}`, body, `POST ${this.endpoint} ${msg.method || 'response'}`);
    }
    return res;
  }

  async open() {
    const res = await this.request('initialize', {
      protocolVersion: PROTOCOL,
      capabilities: { sampling: {}, elicitation: { form: {} }, roots: {} },
      clientInfo: { name: 'zest-console', version: '1' },
    }, {}, (r) => {
      const sid = r.headers.get('Mcp-Session-Id');
      if (sid) this.sessionId = sid;
    });
    this.protocol = res.protocolVersion || PROTOCOL;
    this.serverInfo = res.serverInfo || null;
    this.capabilities = res.capabilities || {};
    await this.notify('notifications/initialized', {});
    return res;
  }

  async notify(method, params) {
    const res = await this.post({ jsonrpc: '2.0', method, params });
    await res.body?.cancel();
  }

  // request sends a request and resolves to its result. opts.onProgress(progress, total,
  // message) asks for progress; opts.signal aborts the wait (cancel() tells the server).
  // It returns the request's id in opts.onId before the answer.
  async request(method, params = {}, opts = {}, onResponse = null) {
    const id = this.nextId++;
    const p = { ...params };
    if (opts.onProgress) p._meta = { ...(p._meta || {}), progressToken: `console-${id}` };
    if (opts.onId) opts.onId(id);
    const msg = { jsonrpc: '2.0', id, method, params: p };
    const res = await this.post(msg, opts.signal);
    if (onResponse) onResponse(res);
    const type = res.headers.get('Content-Type') || '';
    let answer = null;
    const handle = async (m) => {
      if (m.id === id && (m.result !== undefined || m.error !== undefined)) {
        answer = m;
        return true;
      }
      if (m.method === 'notifications/progress' && opts.onProgress && m.params) {
        opts.onProgress(m.params.progress, m.params.total, m.params.message);
      } else if (m.method && m.id !== undefined) {
        this.answerServer(m);
      } else if (m.method && this.handlers.onNotification) {
        this.handlers.onNotification(m);
      }
      return false;
    };
    if (type.includes('text/event-stream')) {
      await readEvents(res, handle);
    } else {
      const text = await res.text();
      if (text) await handle(JSON.parse(text));
    }
    if (!answer) throw mcpError(this.app, res.status, `The stream of ${method} ended without its answer`, null, `POST ${this.endpoint} ${method}`);
    if (answer.error) {
      throw mcpError(this.app, res.status, `${answer.error.message} (JSON-RPC ${answer.error.code})`, answer, `POST ${this.endpoint} ${method}`);
    }
    return answer.result;
  }

  // answerServer answers a server's request with what the page's handler gives.
  async answerServer(m) {
    let reply;
    try {
      if (!this.handlers.onRequest) throw { code: -32601, message: `${m.method} is not supported here` };
      const result = await this.handlers.onRequest(m);
      reply = { jsonrpc: '2.0', id: m.id, result };
    } catch (e) {
      reply = { jsonrpc: '2.0', id: m.id, error: { code: e.code || -32603, message: e.message || String(e) } };
    }
    try {
      const res = await this.post(reply);
      await res.body?.cancel();
    } catch (e) {
      if (this.handlers.onError) this.handlers.onError(e);
    }
  }

  async cancel(id, reason) {
    await this.notify('notifications/cancelled', { requestId: id, reason });
  }

  // close ends the session (DELETE); errors are of no use to anyone by then.
  close() {
    if (!this.sessionId) return;
    fetch(this.endpoint, { method: 'DELETE', headers: this.headers() }).catch(() => {});
    this.sessionId = '';
  }
}

// readEvents calls onMessage with each JSON-RPC message of an event stream, until it returns
// true or the stream ends.
async function readEvents(res, onMessage) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line === '') {
        const text = data.join('\n');
        data = [];
        if (!text) continue;
        let m;
        try { m = JSON.parse(text); } catch { continue; }
        if (await onMessage(m)) {
          await reader.cancel();
          return;
        }
      } else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
  }
}
