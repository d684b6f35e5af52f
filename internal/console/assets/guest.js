// The guest page (#/guest/VMID): desired and observed side by side with
// the differences marked, who published the desired state and how it was
// signed, the last action and its Proxmox task, what the planner would do
// now, the operator's requests, and the journal's timeline, newest first.
import { h, stateBadge, fmtTime, awaits, guestName } from './ui.js';
import { timeline } from './timeline.js';

const show = (v) => (v === undefined || v === null || v === '' ? '' : Array.isArray(v) ? v.join(', ')
  : typeof v === 'object' ? Object.entries(v).map(([k, x]) => `${k}: ${typeof x === 'object' ? JSON.stringify(x) : x}`).join('\n') : String(v));

// The fields compared: label (as the planner's drift names it), desired
// value, observed value. An absent desired value is not managed.
function fields(g) {
  const d = g.desired || {};
  const o = g.observed || {};
  const c = o.config || {};
  return [
    ['power', d.absent ? 'absent' : d.power, o.exists === false ? 'absent' : o.status],
    ['kind', d.kind, o.kind],
    ['node', d.node, o.node],
    ['name', d.name, c.name],
    ['description', d.description, c.description],
    ['tags', d.tags, c.tags],
    ['cores', d.cores, c.cores],
    ['memory_mib', d.memory_mib, c.memory_mib],
    ['onboot', d.onboot, c.onboot],
    ['pool', d.pool, o.pool],
    ['disks', d.disks, c.disks],
    ['net', d.net, c.net],
  ];
}

// driftRow is the row a drift entry of the planner is about: its field,
// up to the first ':' or '.' ("disks.scsi0: want 20 GiB, have 10 GiB" is
// the disks row), or the row of the planner's few other wordings.
function driftRow(entry) {
  if (entry.startsWith('guest exists')) return 'power'; // "guest exists: want absent"
  if (entry.startsWith('desired pool')) return 'pool'; // "desired pool "a", guest is in "b""
  return entry.match(/^[^:.]*/)[0].trim();
}

// compare shows desired and observed side by side. Which rows differ is
// the planner's drift alone (it normalises tags, descriptions, disks and
// NICs as it plans): the console never disagrees with it, and each marked
// row says the drift in the planner's words.
function compare(g) {
  const drift = new Map();
  for (const d of g.drift || []) {
    const row = driftRow(d);
    drift.set(row, [...(drift.get(row) || []), d]);
  }
  const rows = fields(g).filter(([label, want, have]) => show(want) !== '' || show(have) !== '' || drift.has(label));
  return h('table', { class: 'compare', 'aria-label': 'Desired and observed' },
    h('colgroup', {}, h('col', { class: 'c-field' }), h('col'), h('col'), h('col', { class: 'c-mark' })),
    h('thead', {}, h('tr', {}, ['Field', 'Desired', 'Observed', 'Drift'].map((c) => h('th', { scope: 'col', text: c })))),
    h('tbody', {}, rows.map(([label, want, have]) => {
      const says = drift.get(label) || [];
      return h('tr', { class: says.length ? 'differs' : '', 'data-field': label },
        h('th', { scope: 'row', text: label }),
        want === undefined ? h('td', { class: 'muted', 'data-label': 'Desired' }, '—', h('span', { class: 'sr', text: 'not managed' }))
          : h('td', { class: 'mono', 'data-label': 'Desired', text: show(want) }),
        h('td', { class: 'mono', 'data-label': 'Observed', text: show(have) }),
        h('td', { class: 'mark' }, says.length ? [h('strong', { text: '≠ differs' }), ...says.map((d) => h('div', { class: 'drift mono', text: d }))] : ''));
    })));
}

function fact(dt, dd) {
  return dd === '' || dd === undefined || dd === null ? [] : [h('dt', { text: dt }), h('dd', {}, dd)];
}

function provenance(g) {
  const how = g.signed_by ? `signed by trusted key ${g.signed_by}`
    : (g.publisher || '').startsWith('token:') ? 'not signed; authenticated by its HTTP API token'
      : 'not signed; the publisher is as the publisher claims';
  return h('dl', { class: 'facts' },
    fact('Revision', g.desired_revision ? String(g.desired_revision) : ''),
    fact('Published by', g.publisher || ''), fact('Signature', g.desired ? how : ''), fact('At', fmtTime(g.desired_at)));
}

function lastAction(g) {
  const a = g.last_action;
  if (!a) return h('p', { class: 'muted', text: 'No action yet.' });
  return h('dl', { class: 'facts' },
    fact('Operation', a.op), fact('Why', a.reason), fact('Result', a.result || (a.op === 'hold' ? 'held: waits for approval' : 'running')),
    fact('Proxmox task', a.upid ? h('code', { text: a.upid }) : ''), fact('Error', a.error || ''),
    fact('Warnings', a.warnings ? String(a.warnings) : ''), fact('At', fmtTime(a.at)));
}

function next(g) {
  if (!g.next || !g.next.length) return h('p', { class: 'muted', text: 'Nothing: no step is planned.' });
  return h('ol', { class: 'steps' }, g.next.map((s) => h('li', {},
    h('strong', { text: s.op }), s.node ? ` on ${s.node}` : '', ': ', s.reason || '',
    s.set ? h('div', { class: 'mono', text: Object.entries(s.set).map(([k, v]) => `${k}=${v}`).join(' ') }) : '',
    s.delete && s.delete.length ? h('div', { class: 'mono', text: 'delete ' + s.delete.join(', ') }) : '')));
}

function actions(g, ctx) {
  const btn = (command, label, show) => h('button', {
    type: 'button', hidden: !show || !ctx.canWrite(), 'data-write': true, 'data-command': command, 'data-focus-id': `${command}-${g.vmid}`,
    onclick: () => ctx.act(command, [g.vmid]),
  }, label);
  const waits = awaits(g);
  return h('div', { class: 'buttons actions', role: 'group', 'aria-label': 'Requests' },
    btn('approve', waits === 'destroy' ? 'Approve destroy…' : 'Approve…', waits !== ''),
    btn('pause', 'Pause…', g.state !== 'paused'),
    btn('resume', 'Resume…', g.state === 'paused'),
    btn('release', 'Release…', g.state !== 'unmanaged'));
}

export function mount(main, ctx, vmid) {
  document.title = `Guest ${vmid} · converge`;
  const head = h('div');
  const body = h('div');
  const tl = timeline(ctx.api, vmid);
  main.replaceChildren(h('p', {}, h('a', { href: '#/', text: '← All guests' })), head, body,
    h('section', { 'aria-labelledby': 'tl-h' }, h('h2', { id: 'tl-h', text: 'Timeline' }), tl.el));
  let sig = '';
  let fetched = false;

  function render(g) {
    const s = JSON.stringify(g);
    if (s === sig) return;
    sig = s;
    const waits = awaits(g);
    const heldFocus = document.activeElement && head.contains(document.activeElement) ? document.activeElement.dataset.focusId : '';
    head.replaceChildren(
      h('h1', {}, `Guest ${vmid}`, guestName(g) ? ` · ${guestName(g)}` : ''),
      // The status line: where the keyboard goes when the control it was
      // on goes (Approve, once approved).
      h('p', { id: 'guest-status', tabIndex: -1, 'data-focus-fallback': true }, stateBadge(g.state), ' ', g.reason || ''),
      waits ? h('p', { class: 'error', text: waits === 'guard' ? 'Held by the mass-change guard: waits for approval.' : 'Destroy gated: waits for approval.' }) : '',
      ctx.canWrite() ? '' : h('p', { class: 'muted', text: 'Read-only token: approve, pause, resume and release are not offered.' }),
      actions(g, ctx)); // hidden for a read token (the server refuses its writes anyway)
    if (heldFocus) {
      const again = head.querySelector(`[data-focus-id="${CSS.escape(heldFocus)}"]`);
      if (again && !again.hidden) again.focus();
      else head.querySelector('#guest-status').focus();
    }
    // Drift of no row above (cloud-init, say) is listed under the table.
    const labels = new Set(fields(g).map(([label]) => label));
    const elsewhere = (g.drift || []).filter((d) => !labels.has(driftRow(d)));
    body.replaceChildren(
      h('div', { class: 'sides' },
        h('section', { 'aria-labelledby': 'cmp-h' }, h('h2', { id: 'cmp-h', text: 'Desired and observed' }), compare(g),
          h('p', { class: 'muted', text: '— : not in the desired state (converge leaves it as it is).' }),
          elsewhere.length ? h('ul', { 'aria-label': 'Other drift' }, elsewhere.map((d) => h('li', { text: d }))) : '',
          h('p', { class: 'muted', text: g.observed ? `Observed ${fmtTime(g.observed.read_at)}` : 'Not observed yet.' })),
        h('section', { 'aria-labelledby': 'prov-h' }, h('h2', { id: 'prov-h', text: 'Desired state' }), provenance(g),
          h('h2', { text: 'Last action' }), lastAction(g),
          g.last_error ? h('p', { class: 'error', text: 'Last error: ' + g.last_error }) : '',
          h('h2', { text: 'What plan would do now' }), next(g))));
    tl.refresh();
  }

  function update() {
    const g = ctx.state.guests.get(vmid);
    if (g) return render(g);
    if (fetched) return;
    fetched = true; // not streamed (yet): ask for it once
    // The stream may have brought the guest while this was asked (and
    // rendered nothing, if it came with no change after): render the
    // newer of the two, never nothing.
    // A failure says so only while nothing was rendered: the stream may
    // have brought the guest meanwhile (seen under load: a 404 overwrote
    // the page the stream had just rendered).
    ctx.api.get(`/v1/guests/${vmid}`).then((doc) => render(ctx.state.guests.get(vmid) || doc),
      (e) => {
        const g = ctx.state.guests.get(vmid);
        if (g) return render(g);
        if (sig === '') head.replaceChildren(h('h1', { text: `Guest ${vmid}` }), h('p', { class: 'error', text: e.message }));
      });
  }
  update();
  return { update, unmount: () => tl.close() };
}
