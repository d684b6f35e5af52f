// The console's entry: sign-in, the token, the live stream of guest
// summaries, the hash router (#/, #/guest/VMID, #/approvals) and the
// operator's requests. The token lives in memory and sessionStorage only.
import { Api, openStream, whoami } from './api.js';
import { h, notify, ask, closeDialog, awaits, guestName } from './ui.js';
import * as guestsPage from './guests.js';
import * as guestPage from './guest.js';
import * as approvalsPage from './approvals.js';

const KEY = 'converge.token';
const main = document.getElementById('main');
const state = { token: '', who: null, cluster: '', guests: new Map(), synced: false };
const api = new Api(() => state.token, () => signOut('token refused'));
let stream = null;
let page = null;
let scheduled = false;
let seen = new Map(); // guests a (re)connection has sent before "synced"

// Verbs of POST /v1/{command}: what the dialog and the notice say.
const COMMANDS = {
  approve: { label: 'Approve', what: 'releases what waits for approval (the mass-change guard, the destroy gate)' },
  pause: { label: 'Pause', what: 'stops converge acting on the guest until resumed' },
  resume: { label: 'Resume', what: 'lets converge act on the guest again' },
  release: { label: 'Release', what: 'hands the guest back: unmanaged until a new desired state' },
};

// what names what a request acts on: the guest, and for an approval what
// it releases now (the destroy, or the held step and why it is held). The
// server approves what waits when the request arrives; the dialog says
// what waits as it is shown.
function what(command, g, vmid) {
  const name = g && guestName(g) ? ` (${guestName(g)})` : '';
  const guest = `guest ${vmid}${name}`;
  if (command !== 'approve' || !g) return { short: guest, why: '' };
  const waits = awaits(g);
  if (waits === 'destroy') return { short: `the destroy of ${guest}`, why: g.reason || '' };
  if (waits === 'guard') {
    const step = (g.next || []).find((s) => s.op === 'hold');
    const held = step && step.holds ? `held ${step.holds}` : 'held action';
    return { short: `the ${held} of ${guest}`, why: (step && step.reason) || g.reason || '' };
  }
  return { short: `${guest} (nothing waits for approval now)`, why: '' };
}

const ctx = {
  state, api,
  canWrite: () => state.who && state.who.scope === 'write',
  // act asks for a reason and posts the request; the dialog shows it
  // being sent, and the answer (its journal sequence) or the error is
  // shown. A reason the server refuses (400) stays in the dialog.
  async act(command, vmids) {
    const c = COMMANDS[command];
    const items = vmids.map((v) => what(command, state.guests.get(v), v));
    const which = vmids.length === 1 ? `guest ${vmids[0]}` : `${vmids.length} guests (${vmids.join(', ')})`;
    const title = items.length === 1 ? `${c.label} ${items[0].short}` : `${c.label} ${items.length} guests`;
    const lines = items.length === 1 ? (items[0].why ? [items[0].why] : []) : items.map((i) => i.short + (i.why ? `: ${i.why}` : ''));
    await ask({
      title, text: `${c.label} ${c.what}. The request is journalled with your token's name.`, items: lines, ok: c.label,
      async send(reason) {
        const body = { vmids };
        if (reason) body.reason = reason;
        const r = await api.post('/v1/' + command, body);
        notify(`${c.label} of ${which} accepted: journal sequence ${r && r.seq}`);
      },
      failed(e) { notify(`${c.label} of ${which} refused: ${e.message}`, true); },
    });
  },
};

function schedule() {
  if (scheduled) return;
  scheduled = true;
  queueMicrotask(() => {
    scheduled = false;
    const n = [...state.guests.values()].filter((g) => awaits(g)).length;
    document.getElementById('approvals-count').textContent = n ? String(n) : '';
    if (page && page.update) page.update();
  });
}

function onLine(line) {
  switch (line.type) {
    case 'hello':
      state.cluster = line.cluster || state.cluster;
      document.getElementById('cluster').textContent = state.cluster ? `cluster ${state.cluster}` : '';
      seen = new Map();
      break;
    case 'guest':
      if (line.guest && line.guest.vmid) {
        state.guests.set(line.guest.vmid, line.guest);
        seen.set(line.guest.vmid, true);
      }
      break;
    case 'synced':
      // Everything the server has was sent: what it did not send is gone.
      for (const vmid of state.guests.keys()) if (!seen.has(vmid)) state.guests.delete(vmid);
      state.synced = true;
      break;
    case 'cluster':
      state.clusterInfo = line;
      break;
    default: // ping, and kinds this console does not know yet
      return;
  }
  schedule();
}

function onStreamState(s, why) {
  const live = document.getElementById('live');
  live.textContent = {
    connecting: 'connecting…', live: 'live', offline: 'offline, reconnecting',
    refused: `stream refused: ${why}; retrying`, hidden: 'paused while the tab is hidden',
  }[s];
  live.className = 'live ' + (s === 'live' ? 'on' : s === 'offline' || s === 'refused' ? 'off' : '');
}

// A hidden tab closes its stream and reopens it when shown again (a full
// resync: hello, every guest, synced). Over plain HTTP/1.1 a browser
// opens at most six connections to a server: six tabs' streams would
// hold them all, and every other request of every tab would wait.
function onVisibility() {
  if (!state.who) return;
  if (document.visibilityState === 'hidden') {
    if (stream) stream.close();
    stream = null;
    onStreamState('hidden');
  } else if (!stream) {
    stream = openStream(api, onLine, onStreamState);
  }
}

function signedIn(token, who) {
  state.token = token;
  state.who = who;
  state.cluster = who.cluster || '';
  sessionStorage.setItem(KEY, token);
  document.getElementById('who').textContent = `${who.name} (${who.scope === 'write' ? 'write' : 'read only'})`;
  document.getElementById('cluster').textContent = state.cluster ? `cluster ${state.cluster}` : '';
  document.getElementById('nav').hidden = false;
  document.getElementById('signout').hidden = false;
  document.body.dataset.scope = who.scope;
  if (document.visibilityState === 'hidden') onStreamState('hidden');
  else stream = openStream(api, onLine, onStreamState);
  route(true);
}

function signOut(message) {
  closeDialog(); // not left open over the sign-in page
  state.token = '';
  state.who = null;
  state.guests = new Map();
  state.synced = false;
  sessionStorage.removeItem(KEY);
  if (stream) stream.close();
  stream = null;
  if (page && page.unmount) page.unmount();
  page = null;
  for (const id of ['who', 'cluster', 'live', 'approvals-count']) document.getElementById(id).textContent = '';
  document.getElementById('nav').hidden = true;
  document.getElementById('signout').hidden = true;
  delete document.body.dataset.scope;
  showSignIn(message);
}

function showSignIn(message) {
  document.title = 'Sign in · converge';
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', spellcheck: false, required: true, 'aria-describedby': 'token-help' });
  const err = h('p', { id: 'signin-error', class: 'error', role: 'alert' }, message || '');
  const submit = h('button', { type: 'submit', class: 'primary', text: 'Sign in' });
  const form = h('form', {
    async onsubmit(e) {
      e.preventDefault(); // never submitted: the token stays out of any URL
      const token = input.value.trim();
      if (!token) return;
      submit.disabled = true;
      err.textContent = '';
      try {
        signedIn(token, await whoami(token));
      } catch (x) {
        err.textContent = x.status === 401 ? 'token refused' : x.message;
        submit.disabled = false;
        input.select();
      }
    },
  },
  h('label', { for: 'token', text: 'API token' }), input,
  h('p', { id: 'token-help', class: 'muted', text: 'Kept in this browser tab only (memory and sessionStorage, never a cookie) and sent as Authorization: Bearer. Tokens are in the server\'s --http-tokens file (docs/http.md).' }),
  h('div', { class: 'buttons' }, submit), err);
  main.replaceChildren(h('section', { class: 'signin' }, h('h1', { text: 'Sign in to converge' }), form));
  input.focus();
}

// route shows the page the hash names; hashes not starting with #/ (the
// skip link's) are not routes.
function route(initial) {
  const hash = location.hash || '#/';
  if (!hash.startsWith('#/')) return;
  if (!state.who) return;
  if (page && page.unmount) page.unmount();
  let m;
  if (hash === '#/') page = guestsPage.mount(main, ctx);
  else if ((m = hash.match(/^#\/guest\/(\d+)$/))) page = guestPage.mount(main, ctx, Number(m[1]));
  else if (hash === '#/approvals') page = approvalsPage.mount(main, ctx);
  else {
    page = null;
    main.replaceChildren(h('h1', { text: 'No such page' }), h('p', {}, h('a', { href: '#/', text: 'All guests' })));
  }
  const current = hash === '#/approvals' ? 'approvals' : hash === '#/' ? 'guests' : '';
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === current) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!initial) {
    window.scrollTo(0, 0);
    main.focus();
  }
}

async function start() {
  document.getElementById('signout').addEventListener('click', () => signOut(''));
  document.getElementById('skip').addEventListener('click', (e) => { e.preventDefault(); main.focus(); });
  window.addEventListener('hashchange', () => route(false));
  document.addEventListener('visibilitychange', onVisibility);
  const token = sessionStorage.getItem(KEY);
  if (!token) return showSignIn('');
  try {
    signedIn(token, await whoami(token));
  } catch (x) {
    sessionStorage.removeItem(KEY);
    showSignIn(x.status === 401 ? 'token refused' : x.message);
  }
}

start();
