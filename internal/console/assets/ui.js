// Small DOM helpers shared by the pages: element building, the state
// badge, keyed list updates that keep focus, notices and the confirm
// dialog. Text is always set as text, never as HTML: nothing the API
// returns can become markup.

// h builds an element: attrs are properties or attributes (on* are
// listeners, data-* and aria-* attributes); children are nodes or text.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role' || k === 'for' || k === 'scope') el.setAttribute(k, v === true ? '' : v);
    else el[k] = v;
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// The states converge reports, in the order the counts list them.
export const STATES = ['converged', 'absent', 'pending', 'acting', 'held', 'paused', 'error', 'blocked', 'rejected', 'unmanaged'];

// stateBadge shows a state as text; the colour and symbol (CSS) only
// repeat it.
export function stateBadge(state) {
  return h('span', { class: 'state ' + (STATES.includes(state) ? state : 'unknown'), text: state || 'unknown' });
}

export function fmtTime(iso) {
  if (!iso || iso.startsWith('0001-')) return '';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

// reconcile makes parent's children the rendered items, in order,
// reusing the element of every item whose signature did not change: a
// live update does not take the focus from a row it did not touch.
export function reconcile(parent, items, keyOf, sigOf, render) {
  const cache = parent._rows || (parent._rows = new Map());
  const was = [...parent.children].findIndex((c) => c.contains(document.activeElement));
  const keep = new Map();
  items.forEach((item, i) => {
    const key = keyOf(item), sig = sigOf(item);
    let row = cache.get(key);
    if (!row || row.sig !== sig) {
      const el = render(item);
      if (row) {
        // Keep the keyboard where it was: the same control in the new row.
        const id = row.el.contains(document.activeElement) && document.activeElement.dataset.focusId;
        row.el.replaceWith(el);
        const again = id && el.querySelector(`[data-focus-id="${CSS.escape(id)}"]`);
        if (again) again.focus();
      }
      row = { el, sig };
    }
    keep.set(key, row);
    if (parent.children[i] !== row.el) parent.insertBefore(row.el, parent.children[i] || null);
  });
  for (const [key, row] of cache) if (!keep.has(key)) row.el.remove();
  parent._rows = keep;
  if (was >= 0 && !parent.contains(document.activeElement)) {
    // The focused row is gone (approved, say): the keyboard goes on from
    // the row that took its place, or from the page.
    const near = parent.children[Math.min(was, parent.children.length - 1)];
    const to = near && near.querySelector('a, button:not([hidden])');
    (to || document.getElementById('main')).focus();
  }
}

let noticeTimer;
// notify shows a message in the live region; errors stay until the next
// message, others fade after a while.
export function notify(msg, bad = false) {
  const n = document.getElementById('notice');
  n.textContent = msg;
  n.classList.toggle('bad', bad);
  n.setAttribute('role', bad ? 'alert' : 'status');
  clearTimeout(noticeTimer);
  if (!bad) noticeTimer = setTimeout(() => { n.textContent = ''; }, 8000);
}

// The server takes a reason of at most this many bytes of UTF-8.
const REASON_BYTES = 1024;
let closing = null; // ends the open dialog, if any

// closeDialog closes the confirm dialog if it is open, as if cancelled
// (signing out does: it is not left over the sign-in page).
export function closeDialog() {
  if (closing) closing();
}

// refocus puts the keyboard back where it was: on el if it is still
// there and shown, else on the control of the same name (data-focus-id)
// re-rendered since, else on the row that took its place in the list it
// was in, else on the page's fallback ([data-focus-fallback], the guest
// page's status line) or the page.
function refocus(el, focusId, list, index) {
  const shown = (x) => x && x.isConnected && !x.closest('[hidden]') && x.getClientRects().length > 0;
  let to = shown(el) && el !== document.body ? el : null;
  if (!to && focusId) to = document.querySelector(`[data-focus-id="${CSS.escape(focusId)}"]`);
  if (!shown(to) && list && list.isConnected && list.children.length) {
    const near = list.children[Math.min(index, list.children.length - 1)];
    to = near.querySelector('a, button:not([hidden])');
  }
  if (!shown(to)) to = document.querySelector('#main [data-focus-fallback]') || document.getElementById('main');
  to.focus();
}

// ask opens the confirm dialog: title, text, items (lines listed under
// the text), ok (the button's label). send(reason) makes the request: the
// dialog stays open, its button reading "Sending…", until it answers.
// A refusal of the request itself (400: the reason, say) is shown in the
// dialog with the reason kept, to be corrected; any other error closes
// the dialog and goes to failed(error). Cancel and Escape close it
// (not while sending). Focus returns to the control that opened it, or
// near it when that is gone.
export function ask({ title, text, items = [], ok, send, failed }) {
  const dlg = document.getElementById('confirm');
  const form = document.getElementById('confirm-form');
  const reason = document.getElementById('confirm-reason');
  const okBtn = document.getElementById('confirm-ok');
  const cancel = document.getElementById('confirm-cancel');
  const err = document.getElementById('confirm-error');
  if (closing) closing();
  const back = document.activeElement;
  const backId = back && back.dataset ? back.dataset.focusId : undefined;
  const list = back && back.closest && back.closest('.rows, tbody');
  const index = list ? [...list.children].findIndex((c) => c.contains(back)) : -1;
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-items').replaceChildren(...items.map((i) => h('li', { text: i })));
  okBtn.textContent = ok;
  reason.value = '';
  err.textContent = '';
  return new Promise((resolve) => {
    let finished = false;
    let sending = false;
    const busy = (on) => {
      sending = on;
      okBtn.disabled = cancel.disabled = on;
      reason.readOnly = on;
      okBtn.textContent = on ? 'Sending…' : ok;
      form.setAttribute('aria-busy', on ? 'true' : 'false');
    };
    const done = (value) => {
      if (finished) return;
      finished = true;
      closing = null;
      busy(false);
      form.removeEventListener('submit', onSubmit);
      dlg.removeEventListener('cancel', onCancel);
      cancel.removeEventListener('click', onCancel);
      if (dlg.open) dlg.close();
      refocus(back, backId, list, index);
      resolve(value);
    };
    const onSubmit = async (e) => {
      e.preventDefault();
      if (sending) return;
      const text = reason.value.trim();
      const bytes = new TextEncoder().encode(text).length;
      if (bytes > REASON_BYTES) {
        err.textContent = `The reason is ${bytes} bytes of UTF-8; the server takes at most ${REASON_BYTES}. Shorten it.`;
        reason.focus();
        return;
      }
      err.textContent = '';
      if (!send) return done(text);
      busy(true);
      try {
        await send(text);
      } catch (x) {
        if (finished) return; // signed out meanwhile
        busy(false);
        if (x.status === 400) {
          err.textContent = `${x.message}. Correct the reason and confirm again, or cancel.`;
          reason.focus();
          return;
        }
        done(null);
        if (failed) failed(x);
        return;
      }
      done(text);
    };
    // Escape: "cancel" comes at once, "close" only later (a task), by when
    // the dialog may be open again for the next question.
    const onCancel = (e) => { e.preventDefault(); if (!sending) done(null); };
    closing = () => done(null);
    form.addEventListener('submit', onSubmit);
    dlg.addEventListener('cancel', onCancel);
    cancel.addEventListener('click', onCancel);
    dlg.showModal();
    reason.focus();
  });
}

// awaits is what approval a guest waits for: "guard" (an action the
// mass-change guard holds) or "destroy" (the destroy gate), "" for none.
// Servers that do not say (no awaits_approval) are read from the state.
export function awaits(g) {
  if (g.awaits_approval) return g.awaits_approval;
  if (g.state === 'held') return 'guard';
  if (g.state === 'blocked' && g.desired && g.desired.absent && /converge approve/.test(g.reason || '')) return 'destroy';
  return '';
}

// guestName is the name Proxmox shows, else the desired one.
export function guestName(g) {
  return (g.observed && g.observed.config && g.observed.config.name) || (g.desired && g.desired.name) || '';
}

export function guestTags(g) {
  const o = g.observed && g.observed.exists && g.observed.config && g.observed.config.tags;
  return (o && o.length ? o : (g.desired && g.desired.tags)) || [];
}
