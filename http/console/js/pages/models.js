// Models: the list, and an editor that on an existing model offers only additive changes.
import * as api from '../api.js';
import { h, mount, form, table, pageHead, fmtTime, statusBadge, toast, confirm, nextId, act } from '../ui.js';

const types = ['string', 'integer', 'number', 'boolean', 'timestamp', 'object', 'array'];

export async function list(ctx) {
  const pid = ctx.params.pid;
  const rows = await api.list(`/models?project_id=${pid}`);
  mount(ctx.el, pageHead('Models', h('a', { class: 'button primary', href: `/p/${pid}/models/new`, id: 'new-model' }, 'New model')),
    h('p', { class: 'muted' }, 'A model is the shape records take: ingest checks every record against it.'),
    table([
      { label: 'Key', get: (m) => h('a', { href: `/p/${pid}/models/${m.id}` }, m.key) },
      { label: 'Name', get: (m) => m.name },
      { label: 'Fields', num: true, get: (m) => m.fields.length },
      { label: 'Unknown fields', get: (m) => m.unknown_fields },
      { label: 'Status', get: (m) => statusBadge(m.status) },
      { label: 'Updated', get: (m) => fmtTime(m.updated_at) },
    ], rows, { empty: 'No model yet.' }));
}

/** fieldEditor edits a field list; locked fields (already stored) only take a description. */
function fieldEditor(fields, locked) {
  const body = h('tbody', {});
  const el = h('div', { class: 'table-wrap' }, h('table', {}, h('caption', { class: 'sr-only' }, 'Fields'),
    h('thead', {}, h('tr', {}, ['Name', 'Type', 'Required', 'Description', ''].map((t) => h('th', { scope: 'col' }, t)))), body));
  function row(f, isLocked) {
    const id = nextId('fld');
    const tr = h('tr', { 'data-locked': isLocked ? '1' : '0' },
      h('td', {}, h('label', { class: 'sr-only', for: id }, 'Field name'), h('input', { id, class: 'f-name', value: f.name || '', disabled: isLocked, placeholder: 'amount', required: true })),
      h('td', {}, h('label', { class: 'sr-only', for: id + 't' }, 'Type'), h('select', { id: id + 't', class: 'f-type', disabled: isLocked }, types.map((t) => h('option', { value: t, selected: t === (f.type || 'string') }, t)))),
      h('td', {}, h('label', { class: 'sr-only', for: id + 'r' }, 'Required'), h('input', { id: id + 'r', type: 'checkbox', class: 'f-req', checked: !!f.required, disabled: isLocked || locked, title: locked ? 'Fields added to an existing model are optional: stored records lack them' : '' })),
      h('td', {}, h('label', { class: 'sr-only', for: id + 'd' }, 'Description'), h('input', { id: id + 'd', class: 'f-desc', value: f.description || '' })),
      h('td', {}, isLocked ? h('span', { class: 'muted small', title: 'Removing or changing a stored field is not an additive change' }, 'stored') : h('button', { type: 'button', class: 'link', onclick: () => tr.remove(), 'aria-label': 'Remove this field' }, 'Remove')));
    body.append(tr);
    return tr;
  }
  for (const f of fields) row(f, locked);
  const add = h('button', { type: 'button', id: 'add-field', onclick: () => row({}, false).querySelector('input').focus() }, '+ Add field');
  const wrap = h('div', { class: 'field', 'data-field': 'fields' }, h('label', {}, 'Fields'), el, h('div', {}, add), h('span', { class: 'help' }, locked ? 'An existing model takes additive changes only: new optional fields, names and descriptions.' : 'Field names start with a letter; names starting with _ are the system fields.'));
  wrap.value = () => [...body.querySelectorAll('tr')].map((tr) => ({
    name: tr.querySelector('.f-name').value.trim(), type: tr.querySelector('.f-type').value,
    required: tr.querySelector('.f-req').checked, description: tr.querySelector('.f-desc').value,
  }));
  return wrap;
}

export async function edit(ctx) {
  const pid = ctx.params.pid;
  const isNew = !ctx.params.id;
  const m = isNew ? { key: '', name: '', description: '', fields: [{ name: '', type: 'string' }], unknown_fields: 'reject', timestamp_field: '', warehouse_id: '' } : await api.get('/models/' + ctx.params.id);
  const warehouses = await api.list(`/warehouses?project_id=${pid}`);
  const fe = fieldEditor(m.fields, !isNew);
  const archived = m.status === 'archived';
  const f = form([
    { name: 'key', label: 'Key', required: true, value: m.key, help: isNew ? 'Lower case letters, digits and _; it names the model in ingest and queries and never changes.' : 'The key never changes.', placeholder: 'orders' },
    { name: 'name', label: 'Name', value: m.name },
    { name: 'description', label: 'Description', type: 'textarea', rows: 2, value: m.description, keepEmpty: true },
    { name: 'timestamp_field', label: 'Timestamp field', value: m.timestamp_field || '', keepEmpty: true, help: 'Optional: a timestamp field that gives record time (else the receive time).' },
    { name: 'unknown_fields', label: 'Unknown fields', type: 'select', value: m.unknown_fields, options: [{ value: 'reject', label: 'Reject the record' }, { value: 'drop', label: 'Drop the field, keep the record' }] },
    { name: 'warehouse_id', label: 'Warehouse', type: 'select', value: m.warehouse_id, options: [...(isNew ? [{ value: '', label: 'The project\'s embedded warehouse' }] : []), ...warehouses.map((w) => ({ value: w.id, label: `${w.name} (${w.type})` }))] },
  ], {
    submit: isNew ? 'Create model' : 'Save changes',
    extra: fe,
    onSubmit: async (v) => {
      const body = { ...v, fields: fe.value() };
      if (!body.warehouse_id) delete body.warehouse_id;
      if (isNew) {
        const out = await api.post('/models', { ...body, project_id: pid });
        toast(`Model ${out.key} created`);
        ctx.navigate(`/p/${pid}/models/${out.id}`, true);
      } else {
        delete body.key;
        await api.put('/models/' + m.id, body);
        toast('Model saved');
        ctx.navigate(location.pathname, true);
      }
    },
  });
  if (!isNew) f.inputs.key.input.disabled = true;
  if (archived) f.querySelectorAll('input, select, textarea, button').forEach((e) => { e.disabled = true; });
  const archive = !isNew && !archived ? h('button', { class: 'danger', onclick: act(async () => {
    if (!(await confirm('Archive model', `Archive ${m.key}? Ingest into it stops; its records and history stay.`, 'Archive'))) return;
    await api.del('/models/' + m.id);
    toast('Model archived');
    ctx.navigate(`/p/${pid}/models`);
  }) }, 'Archive') : null;
  mount(ctx.el, pageHead(isNew ? 'New model' : `Model ${m.key}`, archived ? statusBadge('archived') : null, archive),
    h('div', { class: 'card' }, f));
}
