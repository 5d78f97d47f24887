// Small DOM helpers: elements, forms with field errors, tables, dialogs, notices. No HTML
// strings are parsed anywhere: every string reaches the page as text.

/** h builds an element: h('button', {class: 'primary', onclick: fn}, 'Save'). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'for') el.htmlFor = v;
    else if (k === 'value' || k === 'checked' || k === 'selected' || k === 'disabled' || k === 'required' || k === 'multiple' || k === 'hidden') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** mount replaces el's children. */
export function mount(el, ...children) { el.replaceChildren(); append(el, children); return el; }

let uid = 0;
export function nextId(p = 'f') { uid += 1; return `${p}-${uid}`; }

export function toast(message, kind = 'ok') {
  const box = document.getElementById('toasts');
  const t = h('div', { class: 'toast ' + kind, role: kind === 'bad' ? 'alert' : 'status' }, message);
  box.append(t);
  setTimeout(() => t.remove(), kind === 'bad' ? 8000 : 4000);
}

export function errorText(err) {
  if (!err) return '';
  if (err.fields && err.fields.length) return err.message;
  return err.message || String(err);
}

export function badge(text, kind = '') { return h('span', { class: 'badge ' + kind }, text); }

const statusKinds = {
  active: 'ok', enabled: 'ok', delivered: 'ok', resolved: 'ok', accepted: 'ok', ready: 'ok',
  open: 'bad', critical: 'bad', dead_letter: 'bad', failed: 'bad', disabled: '', revoked: 'bad', archived: '',
  acknowledged: 'warn', warning: 'warn', pending: 'warn', delivering: 'info', waiting: 'info', standby: '', retired: '', info: 'info',
};
export function statusBadge(s) { return badge(s, statusKinds[s] || ''); }

export function fmtTime(t) {
  if (!t) return h('span', { class: 'muted' }, '—');
  const d = new Date(t);
  const secs = Math.round((Date.now() - d.getTime()) / 1000);
  let rel;
  const a = Math.abs(secs);
  if (a < 60) rel = 'just now';
  else if (a < 3600) rel = `${Math.round(a / 60)} min`;
  else if (a < 86400) rel = `${Math.round(a / 3600)} h`;
  else rel = `${Math.round(a / 86400)} d`;
  if (a >= 60) rel = secs >= 0 ? rel + ' ago' : 'in ' + rel;
  return h('time', { datetime: d.toISOString(), title: d.toISOString() }, rel);
}

export function fmtNum(n) { return n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US'); }

export function fmtBytes(n) {
  if (!n) return '0 B';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

export function pageHead(title, ...actions) {
  return h('div', { class: 'page-head' }, h('h1', {}, title), ...actions);
}

export async function copy(text) {
  try { await navigator.clipboard.writeText(text); toast('Copied to the clipboard'); }
  catch { toast('Copy failed: select the text and copy it by hand', 'bad'); }
}

export function copyButton(text, label = 'Copy') {
  return h('button', { type: 'button', onclick: () => copy(text), 'aria-label': label + ' to clipboard' }, label);
}

/** secretBox shows a secret that will never be shown again, with a copy button. */
export function secretBox(secret, what) {
  return h('div', { class: 'notice warn', 'data-secret': '' },
    h('p', {}, h('strong', {}, `Copy ${what} now. `), 'Lookout stores only a hash: it will not be shown again.'),
    h('div', { class: 'secret' }, h('code', { class: 'secret-value' }, secret), copyButton(secret)));
}

/**
 * dialog opens a modal <dialog>. actions: [{label, primary, danger, onClick(close)}]; an
 * action's promise rejection shows its error in the dialog. Returns {el, close, body}.
 */
export function dialog(title, content, actions = [{ label: 'Close' }]) {
  const err = h('div', { class: 'form-error', role: 'alert' });
  const body = h('div', { class: 'dialog-body' }, err, content);
  const d = h('dialog', { 'aria-label': title });
  const close = () => { d.close(); d.remove(); };
  // A dialog without actions (a form with its own submit button) still gets a way out for
  // someone without a keyboard, after the form: a modal dialog ignores clicks on its backdrop.
  if (!actions.length) actions = [{ label: 'Cancel' }];
  const foot = h('div', { class: 'dialog-foot' }, actions.map((a) => h('button', {
    type: 'button', class: a.primary ? 'primary' : a.danger ? 'danger' : '',
    onclick: async (ev) => {
      if (!a.onClick) return close();
      ev.target.disabled = true;
      try { await a.onClick(close); err.textContent = ''; } catch (e) { err.textContent = errorText(e); } finally { ev.target.disabled = false; }
    },
  }, a.label)));
  d.append(h('div', { class: 'dialog-head' }, h('h2', {}, title)), body, foot);
  // Focus goes back where it was; when the action redrew that part of the page, to the
  // main area rather than to the document.
  const opener = document.activeElement;
  d.addEventListener('close', () => {
    d.remove();
    if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
    else document.getElementById('main').focus();
  });
  document.body.append(d);
  d.showModal();
  return { el: d, close, body };
}

export function confirm(title, message, label = 'Confirm', danger = true) {
  return new Promise((resolve) => {
    const d = dialog(title, h('p', {}, message), [
      { label: 'Cancel', onClick: (close) => { close(); resolve(false); } },
      { label, danger, primary: !danger, onClick: (close) => { close(); resolve(true); } },
    ]);
    d.el.addEventListener('cancel', () => resolve(false));
  });
}

/**
 * form builds a labelled form from field specs and calls onSubmit(values). A rejected
 * ApiError marks the fields it names; other messages show above the buttons.
 * Field: {name, label, type, options, value, required, help, placeholder, rows, min, max}
 * types: text email password number textarea json select checkbox checks datetime.
 */
export function form(fields, { submit = 'Save', onSubmit, extra, cancel } = {}) {
  const f = h('form', { novalidate: true });
  const err = h('div', { class: 'form-error', role: 'alert' });
  const inputs = {};
  f.append(err);
  for (const spec of fields) {
    if (spec.type === 'section') { f.append(h('h3', {}, spec.label)); continue; }
    const id = nextId();
    let input;
    const wrap = h('div', { class: 'field' + (spec.type === 'checkbox' ? ' check' : ''), 'data-field': spec.name });
    const help = spec.help ? h('span', { class: 'help', id: id + '-help' }, spec.help) : null;
    const errEl = h('span', { class: 'error', id: id + '-err', role: 'alert' });
    const common = { id, name: spec.name, required: !!spec.required, 'aria-describedby': [help ? id + '-help' : '', id + '-err'].join(' ').trim(), placeholder: spec.placeholder, autocomplete: spec.autocomplete };
    switch (spec.type) {
      case 'textarea': case 'json':
        input = h('textarea', { ...common, rows: spec.rows || 5, spellcheck: 'false' });
        input.value = spec.type === 'json' && spec.value !== undefined && typeof spec.value !== 'string' ? JSON.stringify(spec.value, null, 2) : (spec.value ?? '');
        break;
      case 'select':
        input = h('select', common, (spec.options || []).map((o) => {
          const v = typeof o === 'object' ? o.value : o;
          return h('option', { value: v, selected: String(spec.value ?? '') === String(v) }, typeof o === 'object' ? o.label : o);
        }));
        break;
      case 'checkbox':
        input = h('input', { ...common, type: 'checkbox', checked: !!spec.value });
        break;
      case 'checks': {
        const sel = new Set(spec.value || []);
        input = h('div', { class: 'checks', role: 'group', 'aria-labelledby': id + '-l', 'data-checks': spec.name },
          (spec.options || []).map((o) => {
            const v = typeof o === 'object' ? o.value : o;
            return h('label', {}, h('input', { type: 'checkbox', value: v, checked: sel.has(v), name: spec.name + '[]' }), typeof o === 'object' ? o.label : o);
          }));
        if (!(spec.options || []).length) input.append(h('span', { class: 'muted' }, spec.emptyText || 'Nothing to choose from yet.'));
        break;
      }
      default:
        // Dates are typed as text (RFC 3339 or a plain date): the native picker draws its
        // icon from a data: URL, which the console's same-origin rule does not allow.
        input = h('input', { ...common, type: spec.type === 'datetime' ? 'text' : (spec.type || 'text'), min: spec.min, max: spec.max, step: spec.step, placeholder: spec.type === 'datetime' ? 'e.g. 2027-01-31 or 2027-01-31T12:00:00Z' : spec.placeholder });
        if (spec.value !== undefined && spec.value !== null) input.value = spec.value;
    }
    inputs[spec.name] = { spec, input, wrap, errEl };
    if (spec.type === 'checkbox') append(wrap, [input, h('label', { for: id }, spec.label), help, errEl]);
    else if (spec.type === 'checks') append(wrap, [h('span', { id: id + '-l', class: 'label' }, h('label', {}, spec.label)), input, help, errEl]);
    else append(wrap, [h('label', { for: id }, spec.label, spec.required ? h('span', { 'aria-hidden': 'true' }, ' *') : ''), input, help, errEl]);
    f.append(wrap);
  }
  if (extra) f.append(extra);
  const btn = h('button', { type: 'submit', class: 'primary' }, submit);
  f.append(h('div', { class: 'row' }, btn, cancel ? h('button', { type: 'button', onclick: cancel }, 'Cancel') : null));
  f.values = () => {
    const out = {};
    for (const [name, { spec, input }] of Object.entries(inputs)) {
      switch (spec.type) {
        case 'checkbox': out[name] = input.checked; break;
        case 'checks': out[name] = [...input.querySelectorAll('input:checked')].map((c) => c.value); break;
        case 'number': if (input.value !== '') out[name] = Number(input.value); break;
        case 'json':
          if (input.value.trim() === '') break;
          try { out[name] = JSON.parse(input.value); } catch (e) { throw fieldError(name, 'is not valid JSON: ' + e.message); }
          break;
        case 'datetime': {
          const t = input.value.trim();
          if (!t) break;
          const d = new Date(/^\d{4}-\d{2}-\d{2}$/.test(t) ? t + 'T00:00:00Z' : t);
          if (Number.isNaN(d.getTime())) throw fieldError(name, 'is not a date: write 2027-01-31 or 2027-01-31T12:00:00Z');
          out[name] = d.toISOString();
          break;
        }
        default: if (input.value.trim() !== '' || spec.keepEmpty) out[name] = spec.type === 'password' ? input.value : input.value.trim();
      }
    }
    return out;
  };
  f.showError = (e) => {
    for (const { wrap, errEl } of Object.values(inputs)) { wrap.classList.remove('invalid'); errEl.textContent = ''; }
    const unplaced = [];
    for (const fe of (e && e.fields) || []) {
      const key = Object.keys(inputs).find((n) => fe.field === n || fe.field.startsWith(n + '.') || fe.field.startsWith(n + '['));
      if (key) { inputs[key].wrap.classList.add('invalid'); inputs[key].errEl.textContent = `${fe.field} ${fe.message}`; }
      else unplaced.push(`${fe.field} ${fe.message}`);
    }
    err.textContent = e ? (unplaced.length ? unplaced.join('; ') : (e.fields && e.fields.length ? 'Check the fields marked below.' : errorText(e))) : '';
    const first = f.querySelector('.invalid input, .invalid select, .invalid textarea');
    if (first) first.focus();
  };
  f.inputs = inputs;
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    btn.disabled = true;
    try {
      f.showError(null);
      await onSubmit(f.values());
    } catch (e) {
      f.showError(e);
    } finally {
      btn.disabled = false;
    }
  });
  return f;
}

function fieldError(field, message) {
  const e = new Error(`${field} ${message}`);
  e.fields = [{ field, message }];
  return e;
}

/** table renders rows with columns [{label, get(row), num}]; onRow makes rows links. */
export function table(columns, rows, { empty = 'Nothing here yet.', caption } = {}) {
  if (!rows.length) return h('div', { class: 'table-wrap' }, h('div', { class: 'empty' }, empty));
  return h('div', { class: 'table-wrap' }, h('table', {},
    caption ? h('caption', { class: 'sr-only' }, caption) : null,
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.num ? 'num' : '' }, c.label)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, columns.map((c) => h('td', { class: c.num ? 'num' : '' }, c.get(r))))))));
}

/** kv renders a definition list from [label, value] pairs. */
export function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

/** tabs renders a tab list; panels: [{label, render() -> Node}]. */
export function tabs(panels) {
  const body = h('div', { role: 'tabpanel' });
  const buttons = panels.map((p, i) => h('button', {
    type: 'button', role: 'tab', 'aria-selected': i === 0 ? 'true' : 'false',
    onclick: () => select(i),
    onkeydown: (e) => {
      if (e.key === 'ArrowRight') { select((i + 1) % panels.length); buttons[(i + 1) % panels.length].focus(); }
      if (e.key === 'ArrowLeft') { select((i + panels.length - 1) % panels.length); buttons[(i + panels.length - 1) % panels.length].focus(); }
    },
  }, p.label));
  function select(i) {
    buttons.forEach((b, j) => { b.setAttribute('aria-selected', i === j ? 'true' : 'false'); b.tabIndex = i === j ? 0 : -1; });
    mount(body, panels[i].render());
  }
  const el = h('div', {}, h('div', { class: 'tabs', role: 'tablist' }, buttons), body);
  select(0);
  return el;
}

/**
 * act wraps a button's async work: the button is disabled while it runs and a refusal
 * shows as a notice instead of an uncaught rejection (a 401 already leads to sign-in).
 */
export function act(fn) {
  return async (ev) => {
    const b = ev && ev.currentTarget;
    if (b) b.disabled = true;
    try { await fn(ev); } catch (e) { if (e.status !== 401) toast(errorText(e), 'bad'); } finally { if (b && b.isConnected) b.disabled = false; }
  };
}

// In-page links (the skip link) move focus to their target. This listener runs before the
// router's (this module loads first) and claims the click: the router would take the link
// as a navigation to the same page, draw it again and leave focus on the link.
document.addEventListener('click', (e) => {
  const a = e.target.closest('a[href^="#"]');
  const target = a && document.getElementById(a.getAttribute('href').slice(1));
  if (!target || e.defaultPrevented) return;
  e.preventDefault();
  target.focus();
});
