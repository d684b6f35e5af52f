// A guest's timeline from GET /v1/guests/{vmid}/timeline, newest first,
// a page at a time ("Older entries" asks for the page before the oldest
// shown). While only the newest page is shown it follows the guest: the
// guest page refreshes it when the guest's summary changes.
import { h, fmtTime } from './ui.js';

const LIMIT = 25;

function entry(e) {
  const who = e.kind === 'desired' ? `published by ${e.who}` : e.who;
  return h('li', { 'data-seq': e.seq },
    h('div', { class: 'when' }, `#${e.seq} · ${fmtTime(e.time)}`, who ? ` · ${who}` : ''),
    h('div', {}, h('span', { class: 'entry-kind', text: e.kind }), ': ', e.summary || ''),
    e.task_id ? h('div', {}, 'Proxmox task ', h('code', { text: e.task_id })) : '',
    e.rejected ? h('div', { class: 'error', text: 'rejected: ' + e.rejected }) : '',
    e.error ? h('div', { class: 'error', text: e.error }) : '',
    e.result && e.result.error ? h('div', { class: 'error', text: e.result.error }) : '',
    e.changes && e.changes.length ? h('ul', {}, e.changes.map((c) => h('li', { class: 'mono', text: c }))) : '',
    e.correlation_id ? h('div', { class: 'when' }, 'correlation ', h('code', { text: e.correlation_id })) : '');
}

export function timeline(api, vmid) {
  const list = h('ol', { class: 'timeline', 'aria-label': `Timeline of guest ${vmid}` });
  const status = h('p', { class: 'muted', role: 'status' });
  const older = h('button', { type: 'button', hidden: true, text: 'Older entries', onclick: () => load(true) });
  const el = h('div', {}, list, status, older);
  let before = 0;
  let paged = false;
  let gen = 0; // answers to a superseded request are dropped
  let closed = false;
  let again = false;
  let busy = false;

  async function load(more) {
    if (busy) { again = !more; return; }
    busy = true;
    const mine = ++gen;
    const q = `limit=${LIMIT}` + (more && before ? `&before=${before}` : '');
    try {
      const doc = await api.get(`/v1/guests/${vmid}/timeline?${q}`);
      if (closed || mine !== gen) return;
      const items = (doc && doc.entries) || [];
      if (more) { paged = true; list.append(...items.map(entry)); }
      else list.replaceChildren(...items.map(entry));
      before = (doc && doc.next_before) || 0;
      older.hidden = !before;
      status.textContent = list.children.length ? '' : 'No entries in the journal.';
    } catch (e) {
      if (!closed) status.textContent = 'Timeline: ' + e.message;
    } finally {
      busy = false;
      if (again && !closed) { again = false; load(false); }
    }
  }
  load(false);
  return {
    el,
    refresh() { if (!paged) load(false); },
    close() { closed = true; },
  };
}
