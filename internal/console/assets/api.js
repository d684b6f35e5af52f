// The console's only way to the server: /v1 with the bearer token, JSON
// bodies, and the NDJSON stream of guest summaries with reconnection.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Every request but the stream gives up after TIMEOUT ms. Over plain
// HTTP/1.1 a browser opens at most six connections to a server, and each
// console tab's stream holds one: a request that finds none free waits,
// and would wait silently.
const TIMEOUT = 15000;
const STALLED = `no answer from the server in ${TIMEOUT / 1000} s. If several console tabs are open over plain HTTP, ` +
  'their live streams may hold every connection the browser allows to the server (six): close some, or serve the console over HTTPS (HTTP/2 has no such limit)';

// failed words a fetch that got no answer.
function failed(e) {
  return e && (e.name === 'TimeoutError' || e.name === 'AbortError') ? STALLED : 'the server does not answer: ' + (e && e.message);
}

// problem is the server's error: its JSON "error", its text, or the status.
function problem(res, doc, text) {
  return (doc && doc.error) || text.trim() || res.statusText;
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
    let res, text;
    try {
      res = await fetch(path, {
        method, headers: this.headers(body !== undefined), cache: 'no-store', credentials: 'omit',
        body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(TIMEOUT),
      });
      text = await res.text();
    } catch (e) {
      throw new ApiError(0, failed(e));
    }
    let doc = null;
    try { doc = text ? JSON.parse(text) : null; } catch { /* not JSON: the text is the message */ }
    if (!res.ok) {
      if (res.status === 401) this.unauthorized();
      throw new ApiError(res.status, `${res.status}: ${problem(res, doc, text)}`);
    }
    return doc;
  }

  get(path) { return this.request('GET', path); }
  post(path, body) { return this.request('POST', path, body); }
}

// whoami asks who token is, without the Api's 401 handling: sign-in says
// "token refused" itself.
export async function whoami(token) {
  let res, text;
  try {
    res = await fetch('/v1/whoami', { headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' }, cache: 'no-store', credentials: 'omit', signal: AbortSignal.timeout(TIMEOUT) });
    text = await res.text();
  } catch (e) {
    throw new ApiError(0, failed(e));
  }
  if (res.status === 401) throw new ApiError(401, 'token refused');
  let doc = null;
  try { doc = JSON.parse(text); } catch { /* not JSON */ }
  if (!res.ok) throw new ApiError(res.status, `${res.status}: ${problem(res, doc, text)}`);
  if (!doc) throw new ApiError(res.status, 'the server\'s answer is not JSON');
  return doc;
}

// openStream reads GET /v1/stream (one JSON object a line) and hands each
// to onLine; onState hears 'connecting', 'live', 'offline' and
// 'refused' (with the server's words). A stream the server ended cleanly
// after it had followed the guests for a while (the server ends each after
// 10 minutes) is reopened at once, saying nothing. Otherwise, when the
// stream ends, fails or is refused, it reconnects after a backoff that
// doubles up to 30 s and starts again at 1 s once a connection says hello.
// close() aborts it (a hidden tab gives its connection back).
export function openStream(api, onLine, onState) {
  const ctl = new AbortController();
  let closed = false;
  let delay = 1000;
  let timer;
  let quiet = false; // reconnecting at once after a clean end: no state change
  const run = async () => {
    while (!closed) {
      if (!quiet) onState('connecting');
      let followed = false; // a line came after "synced": the stream was live, not flapping
      let synced = false;
      let refused = '';
      try {
        const res = await fetch('/v1/stream', { headers: api.headers(false), cache: 'no-store', credentials: 'omit', signal: ctl.signal });
        if (res.status === 401) { api.unauthorized(); return; }
        if (!res.ok || !res.body) {
          const text = await res.text();
          let doc = null;
          try { doc = JSON.parse(text); } catch { /* not JSON */ }
          refused = `${res.status}: ${problem(res, doc, text)}`;
          throw new Error(refused);
        }
        await readLines(res.body.getReader(), (line) => {
          if (line.type === 'hello') { delay = 1000; quiet = false; onState('live'); }
          if (synced) followed = true;
          if (line.type === 'synced') synced = true;
          onLine(line);
        });
        if (closed) return;
        if (followed) { quiet = true; continue; } // a clean end: again at once
      } catch (e) {
        if (closed) return;
      }
      if (closed) return;
      quiet = false;
      if (refused) onState('refused', refused);
      else onState('offline');
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
