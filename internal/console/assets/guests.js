// The guests page (#/): every guest converge knows, filtered by state,
// node, tag and free text, with a count per state; rows update in place
// as the stream brings new summaries.
import { h, stateBadge, reconcile, STATES, guestName, guestTags } from './ui.js';

// The filters outlive the page: back from a guest, the same view.
const filters = { state: '', node: '', tag: '', text: '' };

function matches(g, f) {
  if (f.state && g.state !== f.state) return false;
  const o = g.observed || {};
  if (f.node && o.node !== f.node) return false;
  const tags = guestTags(g);
  if (f.tag && !tags.includes(f.tag)) return false;
  if (f.text) {
    const hay = [g.vmid, guestName(g), g.state, o.node, o.kind, g.reason, ...tags].join(' ').toLowerCase();
    for (const word of f.text.toLowerCase().split(/\s+/)) if (word && !hay.includes(word)) return false;
  }
  return true;
}

function row(g) {
  const o = g.observed || {};
  const tags = guestTags(g);
  return h('tr', { 'data-vmid': g.vmid },
    h('td', { 'data-label': 'VMID' }, h('a', { href: `#/guest/${g.vmid}`, 'data-focus-id': `guest-${g.vmid}`, text: String(g.vmid) })),
    h('td', { 'data-label': 'State' }, stateBadge(g.state)),
    h('td', { 'data-label': 'Kind', text: o.kind || (g.desired && g.desired.kind) || '' }),
    h('td', { 'data-label': 'Node', text: o.node || '' }),
    h('td', { 'data-label': 'Name', text: guestName(g) }),
    h('td', { 'data-label': 'Tags' }, tags.map((t) => h('span', { class: 'tag', text: t }))),
    h('td', { 'data-label': 'Reason', class: 'reason', text: g.reason || '' }));
}

function options(select, values, all) {
  const want = [''].concat(values);
  const have = [...select.options].map((o) => o.value);
  if (want.join('\n') === have.join('\n')) return;
  const keep = select.value;
  select.replaceChildren(...want.map((v) => h('option', { value: v, text: v || all })));
  select.value = want.includes(keep) ? keep : '';
}

export function mount(main, ctx) {
  document.title = 'Guests · converge';
  const field = (id, label, control) => h('div', {}, h('label', { for: id, text: label }), control);
  const state = h('select', { id: 'f-state' });
  const node = h('select', { id: 'f-node' });
  const tag = h('select', { id: 'f-tag' });
  const text = h('input', { id: 'f-text', type: 'search', placeholder: 'vmid, name, reason…', autocomplete: 'off', value: filters.text });
  options(state, STATES, 'any state');
  const onChange = () => {
    Object.assign(filters, { state: state.value, node: node.value, tag: tag.value, text: text.value.trim() });
    update();
  };
  for (const c of [state, node, tag]) c.addEventListener('change', onChange);
  text.addEventListener('input', onChange);
  const counts = h('ul', { class: 'counts', 'aria-label': 'Guests per state' });
  const shown = h('p', { id: 'shown', class: 'muted', role: 'status' });
  const tbody = h('tbody', { id: 'guest-rows' });
  const empty = h('p', { class: 'muted' });
  main.replaceChildren(
    h('h1', { text: 'Guests' }),
    h('div', { class: 'filters', role: 'search', 'aria-label': 'Filter guests' },
      field('f-state', 'State', state), field('f-node', 'Node', node), field('f-tag', 'Tag', tag), field('f-text', 'Search', text)),
    counts, shown,
    h('div', { class: 'tablebox' }, h('table', { class: 'guests' },
      h('thead', {}, h('tr', {}, ['VMID', 'State', 'Kind', 'Node', 'Name', 'Tags', 'Reason'].map((c) => h('th', { scope: 'col', text: c })))),
      tbody)),
    empty);

  function update() {
    const all = [...ctx.state.guests.values()].sort((a, b) => a.vmid - b.vmid);
    options(node, [...new Set(all.map((g) => (g.observed || {}).node).filter(Boolean))].sort(), 'any node');
    options(tag, [...new Set(all.flatMap(guestTags))].sort(), 'any tag');
    state.value = filters.state;
    node.value = filters.node;
    tag.value = filters.tag;
    const per = new Map();
    for (const g of all) per.set(g.state, (per.get(g.state) || 0) + 1);
    const countRows = STATES.filter((s) => per.has(s)).map((s) => ({ s, n: per.get(s) }));
    reconcile(counts, countRows, (c) => c.s, (c) => `${c.n} ${filters.state === c.s}`, (c) => h('li', {},
      h('button', {
        type: 'button', 'aria-pressed': String(filters.state === c.s), 'data-focus-id': `count-${c.s}`,
        onclick() { filters.state = filters.state === c.s ? '' : c.s; update(); },
      }, stateBadge(c.s), ` ${c.n}`)));
    const rows = all.filter((g) => matches(g, filters));
    const says = ctx.state.synced || all.length
      ? (rows.length === all.length ? `${all.length} guests` : `showing ${rows.length} of ${all.length} guests`)
      : 'loading…';
    if (shown.textContent !== says) shown.textContent = says; // a live region: said only when it changes
    reconcile(tbody, rows, (g) => g.vmid, (g) => JSON.stringify(g), row);
    empty.textContent = all.length && !rows.length ? 'No guest matches the filters.' : '';
  }
  update();
  return { update };
}
