// The console's only way to the server: /v1 with the bearer token, JSON
// bodies, and the NDJSON stream of guest summaries with reconnection.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class Api {
  // token() is the current token; unauthorized() is called on a 401 (the
  // token was revoked or the server restarted with other tokens).
  constructor(token, unauthorized) {
    this.token = token;
    this.unauthorized = unauthorized;
  }

  headers(json) {
    const h = { Authorization: 'Bearer ' + this.token(), Accept: 'application/json' };
    if (json) h['Content-Type'] = 'application/json';
    return h;
  }

  async request(method, path, body) {
    let res;
    try {
      res = await fetch(path, {
        method, headers: this.headers(body !== undefined), cache: 'no-store',
        credentials: 'omit', body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(0, 'the server does not answer: ' + e.message);
    }
    const text = await res.text();
    let doc = null;
    try { doc = text ? JSON.parse(text) : null; } catch { /* not JSON: the text is the message */ }
    if (!res.ok) {
      if (res.status === 401) this.unauthorized();
      const msg = (doc && doc.error) || text.trim() || res.statusText;
      throw new ApiError(res.status, `${res.status}: ${msg}`);
    }
    return doc;
  }

  get(path) { return this.request('GET', path); }
  post(path, body) { return this.request('POST', path, body); }
}

// whoami asks who token is, without the Api's 401 handling: sign-in says
// "token refused" itself.
export async function whoami(token) {
  const res = await fetch('/v1/whoami', { headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' }, cache: 'no-store', credentials: 'omit' });
  if (res.status === 401) throw new ApiError(401, 'token refused');
  if (!res.ok) throw new ApiError(res.status, `${res.status}: ${(await res.text()).trim() || res.statusText}`);
  return res.json();
}

// openStream reads GET /v1/stream (one JSON object a line) and hands each
// to onLine; onState hears 'connecting', 'live' and 'offline'. When the
// stream ends or fails it reconnects after a backoff that doubles up to
// 30 s and starts again at 1 s once a connection says hello.
export function openStream(api, onLine, onState) {
  const ctl = new AbortController();
  let closed = false;
  let delay = 1000;
  let timer;
  const run = async () => {
    while (!closed) {
      onState('connecting');
      try {
        const res = await fetch('/v1/stream', { headers: api.headers(false), cache: 'no-store', credentials: 'omit', signal: ctl.signal });
        if (res.status === 401) { api.unauthorized(); return; }
        if (!res.ok || !res.body) throw new Error(`${res.status}`);
        await readLines(res.body.getReader(), (line) => {
          if (line.type === 'hello') { delay = 1000; onState('live'); }
          onLine(line);
        });
      } catch (e) {
        if (closed) return;
      }
      if (closed) return;
      onState('offline');
      await new Promise((r) => { timer = setTimeout(r, delay); });
      delay = Math.min(delay * 2, 30000);
    }
  };
  run();
  return { close() { closed = true; clearTimeout(timer); ctl.abort(); } };
}

async function readLines(reader, each) {
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const raw = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!raw) continue;
      let line;
      try { line = JSON.parse(raw); } catch { continue; } // a torn line: skip it, the next summary repairs
      each(line);
    }
  }
}
