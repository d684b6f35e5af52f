// The approvals page (#/approvals): what waits for an operator in one
// place: actions the mass-change guard holds, destroys the destroy gate
// stops, and paused guests. Each row offers the requests that apply;
// "Approve all listed" approves a section's guests at once.
import { h, stateBadge, reconcile, awaits, guestName } from './ui.js';

function row(g, ctx) {
  const btn = (command, label) => h('button', {
    type: 'button', hidden: !ctx.canWrite(), 'data-write': true, 'data-command': command,
    'data-focus-id': `${command}-${g.vmid}`, 'aria-label': `${label} guest ${g.vmid}`,
    onclick: () => ctx.act(command, [g.vmid]),
  }, label + '…');
  const paused = g.state === 'paused';
  return h('li', { 'data-vmid': g.vmid },
    h('a', { href: `#/guest/${g.vmid}`, 'data-focus-id': `link-${g.vmid}` }, `Guest ${g.vmid}`, guestName(g) ? ` · ${guestName(g)}` : ''),
    stateBadge(g.state),
    h('span', { class: 'reason', text: g.reason || '' }),
    h('span', { class: 'buttons' },
      paused ? btn('resume', 'Resume') : btn('approve', 'Approve'),
      paused ? '' : btn('pause', 'Pause'),
      btn('release', 'Release')));
}

export function mount(main, ctx) {
  document.title = 'Approvals · converge';
  const sections = [
    { id: 'held', title: 'Held by the mass-change guard', pick: (g) => awaits(g) === 'guard', none: 'Nothing is held.' },
    { id: 'gated', title: 'Destroys waiting at the destroy gate', pick: (g) => awaits(g) === 'destroy', none: 'No destroy waits.' },
    { id: 'paused', title: 'Paused', pick: (g) => g.state === 'paused' && !awaits(g), none: 'No guest is paused.' },
  ].map((s) => {
    s.list = h('ul', { class: 'rows', id: `${s.id}-rows`, 'aria-labelledby': `${s.id}-h` });
    s.empty = h('p', { class: 'muted' });
    s.all = h('button', {
      type: 'button', hidden: true, 'data-write': true, 'data-focus-id': `all-${s.id}`,
      onclick: () => ctx.act(s.id === 'paused' ? 'resume' : 'approve', s.vmids),
    }, s.id === 'paused' ? 'Resume all listed…' : 'Approve all listed…');
    s.el = h('section', { 'aria-labelledby': `${s.id}-h` }, h('h2', { id: `${s.id}-h`, text: s.title }), s.empty, s.list,
      h('div', { class: 'buttons' }, s.all));
    return s;
  });
  main.replaceChildren(h('h1', { text: 'Approvals' }),
    ctx.canWrite() ? '' : h('p', { class: 'muted', text: 'Read-only token: you can see what waits, not approve, pause, resume or release it.' }),
    ...sections.map((s) => s.el));

  function update() {
    const all = [...ctx.state.guests.values()].sort((a, b) => a.vmid - b.vmid);
    for (const s of sections) {
      const gs = all.filter(s.pick);
      s.vmids = gs.map((g) => g.vmid);
      s.empty.textContent = gs.length ? '' : (ctx.state.synced ? s.none : 'loading…');
      s.all.hidden = !ctx.canWrite() || gs.length < 2;
      reconcile(s.list, gs, (g) => g.vmid, (g) => `${g.state}|${g.reason}|${guestName(g)}|${awaits(g)}`, (g) => row(g, ctx));
    }
  }
  update();
  return { update };
}
