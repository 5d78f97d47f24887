// Alerts: the list, the editor built from /alerts/metadata with a live simulation, and the
// assistant that turns plain words into a draft (js/assistant.js, no service behind it).
import * as api from '../api.js';
import { h, mount, form, table, pageHead, fmtTime, statusBadge, toast, confirm, nextId, errorText, badge, act } from '../ui.js';
import { parseAlertIntent } from '../assistant.js';

export async function list(ctx) {
  const pid = ctx.params.pid;
  const q = ctx.query;
  const box = h('div', {});
  const filters = h('form', { class: 'filters', role: 'search', onsubmit: (e) => { e.preventDefault(); load(); } });
  const qid = nextId(); const eid = nextId();
  const qIn = h('input', { id: qid, type: 'search', value: q.get('q') || '', placeholder: 'name or description' });
  const enIn = h('select', { id: eid }, [['', 'any'], ['true', 'enabled'], ['false', 'disabled']].map(([v, l]) => h('option', { value: v, selected: (q.get('enabled') || '') === v }, l)));
  filters.append(h('div', { class: 'field' }, h('label', { for: qid }, 'Search'), qIn), h('div', { class: 'field' }, h('label', { for: eid }, 'State'), enIn), h('button', { type: 'submit' }, 'Filter'));
  async function load() {
    const params = new URLSearchParams({ project_id: pid });
    if (qIn.value) params.set('q', qIn.value);
    if (enIn.value) params.set('enabled', enIn.value);
    // The filters live in the address too: a reload or a shared link shows the same list.
    const shown = new URLSearchParams(params);
    shown.delete('project_id');
    history.replaceState(null, '', location.pathname + (shown.toString() ? '?' + shown : ''));
    const rows = await api.list('/alerts?' + params);
    mount(box, table([
      { label: 'Name', get: (a) => h('a', { href: `/p/${pid}/alerts/${a.id}` }, a.name) },
      { label: 'Model', get: (a) => a.model_key },
      { label: 'Conditions', get: (a) => a.conditions.map((c) => `${c.field} ${c.operator}${c.value === undefined ? '' : ' ' + JSON.stringify(c.value)}`).join(a.match === 'any' ? ' or ' : ' and ') },
      { label: 'Severity', get: (a) => statusBadge(a.severity) },
      { label: 'State', get: (a) => statusBadge(a.status === 'archived' ? 'archived' : a.enabled ? 'enabled' : 'disabled') },
      { label: 'Updated', get: (a) => fmtTime(a.updated_at) },
    ], rows, { empty: 'No alert matches. Create one, or describe it to the assistant.' }));
  }
  mount(ctx.el, pageHead('Alerts', h('a', { class: 'button', href: `/p/${pid}/alerts/assistant`, id: 'open-assistant' }, 'Ask the assistant'), h('a', { class: 'button primary', href: `/p/${pid}/alerts/new` }, 'New alert')),
    h('p', { class: 'muted' }, 'An alert checks every record its model receives; a match opens an incident and notifies its channels.'), filters, box);
  await load();
}

/** coerce turns an input's text into a value of the field's type (a list for in/not_in). */
export function coerce(text, type, op) {
  if (op === 'exists' || op === 'not_exists') return undefined;
  if (op === 'in' || op === 'not_in') return String(text).split(',').map((s) => s.trim()).filter((s) => s !== '').map((s) => coerce(s, type, 'eq'));
  const t = String(text).trim();
  if (type === 'integer' && /^-?\d+$/.test(t)) return Number(t);
  if (type === 'number' && t !== '' && !Number.isNaN(Number(t))) return Number(t);
  if (type === 'boolean' && (t === 'true' || t === 'false')) return t === 'true';
  return text;
}

function valueText(v) {
  if (v === undefined || v === null) return '';
  if (Array.isArray(v)) return v.join(', ');
  return String(v);
}

/** conditionEditor edits conditions over a model's governed fields and their operators. */
function conditionEditor(meta, getModel, conds, onChange) {
  const box = h('div', { id: 'conditions' });
  const rows = [];
  function fieldsOf() { const m = meta.models.find((x) => x.key === getModel()); return m ? m.fields : []; }
  function addRow(c) {
    const id = nextId('c');
    const fieldSel = h('select', { id: id + 'f', class: 'c-field' });
    const opSel = h('select', { id: id + 'o', class: 'c-op' });
    const val = h('input', { id: id + 'v', class: 'c-value', placeholder: 'value' });
    const fillFields = () => {
      const cur = fieldSel.value || c.field;
      mount(fieldSel, fieldsOf().map((f) => h('option', { value: f.name, selected: f.name === cur }, `${f.name} (${f.type})`)));
    };
    const fillOps = () => {
      const f = fieldsOf().find((x) => x.name === fieldSel.value);
      const cur = opSel.value || c.operator;
      mount(opSel, (f ? f.operators : []).map((o) => h('option', { value: o, selected: o === cur }, o)));
      val.disabled = opSel.value === 'exists' || opSel.value === 'not_exists';
      val.placeholder = opSel.value === 'in' || opSel.value === 'not_in' ? 'a, b, c' : f && f.type === 'boolean' ? 'true or false' : 'value';
    };
    fillFields(); fillOps();
    val.value = valueText(c.value);
    const row = h('div', { class: 'cond-row' },
      h('div', {}, h('label', { class: 'sr-only', for: id + 'f' }, 'Field'), fieldSel),
      h('div', {}, h('label', { class: 'sr-only', for: id + 'o' }, 'Operator'), opSel),
      h('div', {}, h('label', { class: 'sr-only', for: id + 'v' }, 'Value'), val),
      h('button', { type: 'button', class: 'link', 'aria-label': 'Remove condition', onclick: () => { row.remove(); rows.splice(rows.indexOf(entry), 1); onChange(); } }, 'Remove'));
    fieldSel.addEventListener('change', () => { fillOps(); onChange(); });
    opSel.addEventListener('change', () => { fillOps(); onChange(); });
    val.addEventListener('input', onChange);
    const entry = { row, fillFields, fillOps, value: () => {
      const f = fieldsOf().find((x) => x.name === fieldSel.value);
      const out = { field: fieldSel.value, operator: opSel.value };
      const v = coerce(val.value, f ? f.type : 'string', opSel.value);
      if (v !== undefined) out.value = v;
      return out;
    } };
    rows.push(entry);
    list.append(row);
  }
  const list = h('div', {});
  box.append(h('label', {}, 'Conditions'), list, h('button', { type: 'button', id: 'add-condition', onclick: () => { addRow({}); onChange(); } }, '+ Add condition'));
  (conds.length ? conds : [{}]).forEach(addRow);
  box.value = () => rows.map((r) => r.value());
  box.refresh = () => rows.forEach((r) => { r.fillFields(); r.fillOps(); });
  return box;
}

/** sampleFor makes an event that the draft's conditions would match, as a starting point. */
export function sampleFor(conds, fields) {
  const ev = {};
  for (const c of conds) {
    const f = fields.find((x) => x.name === c.field) || { type: 'string' };
    if (f.system) continue;
    const v = c.value;
    const num = f.type === 'integer' || f.type === 'number';
    switch (c.operator) {
      case 'eq': case 'gte': case 'lte': ev[c.field] = v; break;
      case 'gt': ev[c.field] = num ? v + 1 : v; break;
      case 'lt': ev[c.field] = num ? v - 1 : v; break;
      case 'neq': ev[c.field] = num ? v + 1 : f.type === 'boolean' ? !v : `not ${v}`; break;
      case 'contains': ev[c.field] = `… ${v} …`; break;
      case 'starts_with': ev[c.field] = `${v}…`; break;
      case 'ends_with': ev[c.field] = `…${v}`; break;
      case 'in': ev[c.field] = Array.isArray(v) ? v[0] : v; break;
      case 'not_in': case 'not_contains': ev[c.field] = num ? -1 : 'something else'; break;
      case 'exists': ev[c.field] = num ? 1 : f.type === 'boolean' ? true : f.type === 'object' ? {} : f.type === 'array' ? [] : f.type === 'timestamp' ? new Date(0).toISOString() : 'x'; break;
      default: break;
    }
  }
  return ev;
}

/** simulationView shows what a simulation found: each condition explained, and the gates. */
function simulationView(sim) {
  return h('div', { id: 'simulation-result' },
    h('div', { class: 'notice ' + (sim.matched ? (sim.would_notify ? 'ok' : 'warn') : 'bad'), role: 'status' },
      h('strong', {}, sim.matched ? 'The event matches' : 'The event does not match'),
      sim.matched ? (sim.would_notify ? ': an incident would open and the channels be told.' : ': an incident would open, but nobody would be told (see the gates).') : '.'),
    h('ul', { class: 'explain' }, sim.conditions.map((c) => h('li', {}, badge(c.matched ? 'match' : 'no match', c.matched ? 'ok' : 'bad'), h('span', {}, c.explanation)))),
    sim.gates && sim.gates.length ? h('div', {}, h('h3', {}, 'Gates'), h('ul', {}, sim.gates.map((g) => h('li', {}, typeof g === 'string' ? g : `${g.gate || g.type || ''}${g.channel_id ? ' (' + g.channel_id + ')' : ''}${g.detail ? ': ' + g.detail : ''}${g.until ? ' until ' + g.until : ''}${g.wait_seconds ? ' ~' + g.wait_seconds + ' s' : ''}`)))) : null,
    Object.keys(sim.group || {}).length ? h('p', { class: 'small muted' }, 'Group: ', h('code', {}, JSON.stringify(sim.group))) : null,
    h('p', { class: 'small muted' }, 'Simulation ', h('code', {}, sim.simulation_id), ': nothing else was written.'));
}

export async function edit(ctx) {
  const pid = ctx.params.pid;
  const isNew = !ctx.params.id;
  const [meta, channels] = await Promise.all([api.get(`/alerts/metadata?project_id=${pid}`), api.list(`/notification-channels?project_id=${pid}`)]);
  if (!meta.models.length) {
    mount(ctx.el, pageHead('New alert'), h('div', { class: 'notice' }, 'Alerts watch the records of a model: ', h('a', { href: `/p/${pid}/models/new` }, 'create a model'), ' first.'));
    return;
  }
  const a = isNew ? { name: '', description: '', model_key: meta.models[0].key, conditions: [], match: 'all', select_fields: [], group_by: [], severity: 'warning', channel_ids: [], cooldown_seconds: meta.limits.cooldown_seconds_default || 300, enabled: true }
    : await api.get('/alerts/' + ctx.params.id);
  if (isNew && ctx.query.get('draft')) {
    // A draft handed over by the assistant, to refine here.
    try { Object.assign(a, JSON.parse(sessionStorage.getItem('lookout.alertDraft') || '{}')); } catch { /* start blank */ }
    delete a.project_id;
  }
  const archived = a.status === 'archived';
  let timer = 0;
  const simBox = h('div', { id: 'simulation' }, h('p', { class: 'muted' }, 'Edit the sample event: the draft is simulated against it as you type.'));
  const draft = () => {
    const v = f.values();
    return { name: v.name || 'draft', description: v.description || '', model_key: v.model_key, conditions: conds.value(), match: v.match, select_fields: v.select_fields, group_by: v.group_by, severity: v.severity, channel_ids: v.channel_ids, cooldown_seconds: v.cooldown_seconds, enabled: v.enabled };
  };
  const sample = h('textarea', { id: 'sample-event', rows: 8, spellcheck: 'false' });
  async function simulate() {
    let ev;
    try { ev = JSON.parse(sample.value || '{}'); } catch (e) { mount(simBox, h('div', { class: 'notice bad' }, 'The sample event is not valid JSON: ' + e.message)); return; }
    try {
      const sim = await api.post('/alerts/simulate', { ...draft(), project_id: pid, sample_event: ev });
      mount(simBox, simulationView(sim));
    } catch (e) {
      mount(simBox, h('div', { class: 'notice bad', role: 'status' }, 'The draft is not valid yet: ' + (e.fields && e.fields.length ? e.fields.map((x) => `${x.field} ${x.message}`).join('; ') : errorText(e))));
    }
  }
  const changed = () => { clearTimeout(timer); timer = setTimeout(simulate, 350); };
  let f = null; // the form, built below: the condition editor reads its model
  const conds = conditionEditor(meta, () => (f ? f.inputs.model_key.input.value : a.model_key), a.conditions, changed);
  const channelOpts = channels.map((c) => ({ value: c.id, label: `${c.name} (${c.type}${c.enabled ? '' : ', disabled'})` }));
  const fieldNames = (m) => (meta.models.find((x) => x.key === m) || { fields: [] }).fields;
  f = form([
    { name: 'name', label: 'Name', required: true, value: a.name },
    { name: 'description', label: 'Description', value: a.description, keepEmpty: true },
    { name: 'model_key', label: 'Model', type: 'select', value: a.model_key, options: meta.models.map((m) => ({ value: m.key, label: m.name || m.key })) },
    { name: 'match', label: 'Match', type: 'select', value: a.match, options: [{ value: 'all', label: 'all conditions' }, { value: 'any', label: 'any condition' }] },
    { name: 'severity', label: 'Severity', type: 'select', value: a.severity, options: meta.severities },
    { name: 'select_fields', label: 'Fields to include in notifications', type: 'checks', options: fieldNames(a.model_key).map((x) => x.name), value: a.select_fields },
    { name: 'group_by', label: 'One incident per value of', type: 'checks', options: fieldNames(a.model_key).filter((x) => x.groupable).map((x) => x.name), value: a.group_by },
    { name: 'channel_ids', label: 'Channels', type: 'checks', options: channelOpts, value: a.channel_ids, emptyText: 'No channel yet: incidents open, nobody is told.' },
    { name: 'cooldown_seconds', label: 'Cooldown between summaries (seconds)', type: 'number', min: meta.limits.cooldown_seconds_min || 300, value: a.cooldown_seconds },
    { name: 'enabled', label: 'Enabled', type: 'checkbox', value: a.enabled },
  ], {
    submit: isNew ? 'Create alert' : 'Save alert',
    extra: conds,
    onSubmit: async () => {
      const body = draft();
      if (isNew) {
        const out = await api.post('/alerts', { ...body, project_id: pid });
        toast(`Alert ${out.name} created`);
        ctx.navigate(`/p/${pid}/alerts/${out.id}`, true);
      } else {
        await api.put('/alerts/' + a.id, body);
        toast('Alert saved');
      }
    },
  });
  // The notification and grouping fields are the chosen model's: a new model redraws them,
  // keeping the ticks of fields it shares with the old one.
  const refillChecks = (name, options) => {
    const box = f.inputs[name].input;
    const on = new Set([...box.querySelectorAll('input:checked')].map((c) => c.value));
    mount(box, options.map((o) => h('label', {}, h('input', { type: 'checkbox', value: o, checked: on.has(o), name: name + '[]' }), o)));
  };
  f.inputs.model_key.input.addEventListener('change', () => {
    const fields = fieldNames(f.inputs.model_key.input.value);
    refillChecks('select_fields', fields.map((x) => x.name));
    refillChecks('group_by', fields.filter((x) => x.groupable).map((x) => x.name));
    conds.refresh();
    changed();
  });
  f.addEventListener('input', changed);
  f.addEventListener('change', changed);
  sample.value = JSON.stringify(sampleFor(a.conditions, fieldNames(a.model_key)), null, 2);
  sample.addEventListener('input', changed);
  const actions = [];
  if (!isNew && !archived) {
    actions.push(h('button', { onclick: act(async () => { await api.post(`/alerts/${a.id}/${a.enabled ? 'disable' : 'enable'}`); ctx.navigate(location.pathname, true); }) }, a.enabled ? 'Disable' : 'Enable'));
    actions.push(h('button', { class: 'danger', onclick: act(async () => {
      if (!(await confirm('Archive alert', `Archive ${a.name}? It stops watching; its incidents stay.`, 'Archive'))) return;
      await api.del('/alerts/' + a.id);
      ctx.navigate(`/p/${pid}/alerts`);
    }) }, 'Archive'));
  }
  mount(ctx.el, pageHead(isNew ? 'New alert' : a.name, isNew ? null : statusBadge(archived ? 'archived' : a.enabled ? 'enabled' : 'disabled'), ...actions),
    h('div', { class: 'grid2' }, h('div', { class: 'card' }, f),
      h('div', { class: 'card' }, h('h2', {}, 'Simulation'), h('div', { class: 'field' }, h('label', { for: 'sample-event' }, 'Sample event (JSON)'), sample), simBox)));
  if (archived) f.querySelectorAll('input, select, textarea, button').forEach((e) => { e.disabled = true; });
  simulate();
}

export async function assistant(ctx) {
  const pid = ctx.params.pid;
  const [meta, channels] = await Promise.all([api.get(`/alerts/metadata?project_id=${pid}`), api.list(`/notification-channels?project_id=${pid}`)]);
  const tid = nextId(); const mid = nextId();
  const text = h('textarea', { id: tid, rows: 3, placeholder: 'errors from checkout slower than 500 ms', spellcheck: 'true' });
  const modelSel = h('select', { id: mid }, meta.models.map((m) => h('option', { value: m.key }, m.name || m.key)));
  const out = h('div', { id: 'assistant-draft' });
  let current = null; // the draft shown
  let simulated = null; // {key: JSON of the simulated draft, id}
  const sampleTa = h('textarea', { id: 'assistant-sample', rows: 6, spellcheck: 'false' });
  const simBox = h('div', {});
  const nameIn = h('input', { id: 'assistant-name' });
  const chanBox = h('div', { class: 'checks', role: 'group', 'aria-label': 'Channels' }, channels.map((c) => h('label', {}, h('input', { type: 'checkbox', value: c.id, checked: c.enabled }), `${c.name} (${c.type})`)));
  const createBtn = h('button', { class: 'primary', id: 'assistant-create', disabled: true, onclick: create }, 'Create alert');
  const body = () => ({ project_id: pid, name: nameIn.value.trim() || current.name, model_key: current.model_key, conditions: current.conditions, match: current.match, severity: current.severity || 'warning', channel_ids: [...chanBox.querySelectorAll('input:checked')].map((c) => c.value), select_fields: [], group_by: [] });
  const keyOf = (b) => JSON.stringify({ ...b, name: undefined });
  function draft() {
    if (!meta.models.length) { mount(out, h('div', { class: 'notice' }, 'Create a model first: the assistant maps words onto its fields.')); return; }
    current = parseAlertIntent(text.value, meta, modelSel.value);
    // exists/not_exists take no value: the API wants the key left out.
    current.conditions = current.conditions.map(({ value, ...c }) => (value === null || value === undefined ? c : { ...c, value }));
    simulated = null;
    createBtn.disabled = true;
    const fields = (meta.models.find((m) => m.key === current.model_key) || { fields: [] }).fields;
    nameIn.value = current.name;
    sampleTa.value = JSON.stringify(sampleFor(current.conditions, fields), null, 2);
    mount(simBox);
    mount(out, h('div', { class: 'card' },
      h('h2', {}, 'Draft'),
      current.conditions.length ? h('div', {},
        h('p', {}, `On model `, h('code', {}, current.model_key), `, when ${current.match === 'any' ? 'any' : 'all'} of:`),
        table([{ label: 'Field', get: (c) => c.field }, { label: 'Operator', get: (c) => c.operator }, { label: 'Value', get: (c) => (c.value === undefined ? '' : JSON.stringify(c.value)) }], current.conditions, { caption: 'Draft conditions' }),
        current.severity ? h('p', {}, 'Severity: ', statusBadge(current.severity)) : null)
        : h('div', { class: 'notice warn' }, 'I could not map that onto the fields of ', h('code', {}, current.model_key), '. Name a field and a value, for example "amount over 1000".'),
      current.understood.length ? h('details', { open: true }, h('summary', {}, 'What I understood'), h('ul', {}, current.understood.map((u) => h('li', {}, u)))) : null,
      current.ignored.length ? h('p', { class: 'muted', id: 'assistant-ignored' }, 'I did not use: ', current.ignored.map((w) => `"${w}"`).join(', ')) : null,
      current.problems.length ? h('div', { class: 'notice warn' }, current.problems.join(' ')) : null,
      current.conditions.length ? h('div', {},
        h('div', { class: 'field' }, h('label', { for: 'assistant-name' }, 'Name'), nameIn),
        h('div', { class: 'field' }, h('label', {}, 'Channels'), channels.length ? chanBox : h('span', { class: 'muted' }, 'No channel yet: the incident opens, nobody is told.')),
        h('div', { class: 'field' }, h('label', { for: 'assistant-sample' }, 'Sample event to simulate'), sampleTa),
        h('div', { class: 'row' }, h('button', { id: 'assistant-simulate', onclick: simulate }, 'Simulate'), createBtn,
          h('a', { class: 'button', href: '#', onclick: (e) => { e.preventDefault(); sessionStorage.setItem('lookout.alertDraft', JSON.stringify(body())); ctx.navigate(`/p/${pid}/alerts/new?draft=1`); } }, 'Refine in the editor')),
        simBox) : null));
  }
  async function simulate() {
    let ev;
    try { ev = JSON.parse(sampleTa.value || '{}'); } catch (e) { mount(simBox, h('div', { class: 'notice bad' }, 'The sample event is not valid JSON: ' + e.message)); return; }
    const b = body();
    try {
      const sim = await api.post('/alerts/simulate', { ...b, sample_event: ev });
      simulated = { key: keyOf(b), id: sim.simulation_id };
      createBtn.disabled = false;
      mount(simBox, simulationView(sim), sim.matched ? null : h('p', { class: 'muted' }, 'The sample did not match: you may still create the alert, or change the sample and simulate again.'));
    } catch (e) {
      createBtn.disabled = true;
      mount(simBox, h('div', { class: 'notice bad' }, (e.fields && e.fields.length ? e.fields.map((x) => `${x.field} ${x.message}`).join('; ') : errorText(e))));
    }
  }
  async function create() {
    const b = body();
    if (!simulated || simulated.key !== keyOf(b)) { createBtn.disabled = true; toast('The draft changed since it was simulated: simulate it again', 'bad'); return; }
    try {
      const a = await api.post('/alerts', { ...b, origin: 'assistant', simulation_id: simulated.id });
      toast(`Alert ${a.name} created`);
      ctx.navigate(`/p/${pid}/alerts/${a.id}`);
    } catch (e) { toast(errorText(e), 'bad'); }
  }
  chanBox.addEventListener('change', () => { createBtn.disabled = true; });
  const f = h('form', { onsubmit: (e) => { e.preventDefault(); draft(); } },
    h('div', { class: 'field' }, h('label', { for: tid }, 'What should Lookout watch for?'), text, h('span', { class: 'help' }, 'Plain words, e.g. "errors from checkout slower than 500 ms" or "amount over 1000 and country is NL". Runs in your browser: nothing leaves the appliance.')),
    h('div', { class: 'field' }, h('label', { for: mid }, 'Model'), modelSel),
    h('button', { type: 'submit', class: 'primary', id: 'assistant-draft-button' }, 'Draft the alert'));
  mount(ctx.el, pageHead('Alert assistant'), h('div', { class: 'grid2' }, h('div', { class: 'card' }, f), out));
  text.focus();
}
