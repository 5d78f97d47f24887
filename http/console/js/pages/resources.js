// Runtime keys, Analytics APIs and bindings, warehouses, credentials and Client CAs.
import * as api from '../api.js';
import { h, mount, form, table, pageHead, fmtTime, statusBadge, toast, confirm, dialog, kv, badge, act } from '../ui.js';

function listPage(ctx, title, intro, button, rows, columns, empty) {
  mount(ctx.el, pageHead(title, button), h('p', { class: 'muted' }, intro), table(columns, rows, { empty }));
}

export async function keys(ctx) {
  const pid = ctx.params.pid;
  const [rows, ics, qcs] = await Promise.all([api.list(`/runtime-api-keys?project_id=${pid}`), api.list(`/ingest-clients?project_id=${pid}`), api.list(`/query-clients?project_id=${pid}`)]);
  const client = (id) => [...ics, ...qcs].find((c) => c.id === id);
  listPage(ctx, 'Runtime keys', 'Keys that ingest and query clients send as Authorization: ApiKey …. Create them on a client\'s page, where the key is shown once.', null, rows, [
    { label: 'Name', get: (k) => k.name },
    { label: 'Kind', get: (k) => k.kind },
    { label: 'Client', get: (k) => { const c = client(k.client_id); return c ? h('a', { href: `/p/${pid}/${k.kind}-clients/${c.id}?tab=Runtime%20keys` }, c.name) : k.client_id; } },
    { label: 'Prefix', get: (k) => h('code', {}, k.key_prefix) },
    { label: 'Expires', get: (k) => fmtTime(k.expires_at) },
    { label: 'State', get: (k) => statusBadge(k.revoked_at ? 'revoked' : 'active') },
  ], 'No key yet: open an ingest or query client to create one.');
}

export async function analytics(ctx) {
  const pid = ctx.params.pid;
  const [rows, models] = await Promise.all([api.list(`/analytics-apis?project_id=${pid}`), api.list(`/models?project_id=${pid}&status=active`)]);
  const create = () => {
    const d = dialog('New Analytics API', form(apiFields({}, models), {
      submit: 'Create',
      onSubmit: async (v) => { const a = await api.post('/analytics-apis', { ...v, project_id: pid }); d.close(); ctx.navigate(`/p/${pid}/analytics/${a.id}`); },
    }), []);
  };
  listPage(ctx, 'Analytics APIs', 'Stored queries that query clients call by key, with parameters; each runs on its active binding\'s warehouse.',
    h('button', { class: 'primary', onclick: create }, 'New Analytics API'), rows, [
      { label: 'Key', get: (a) => h('a', { href: `/p/${pid}/analytics/${a.id}` }, a.key) },
      { label: 'Model', get: (a) => a.model_key },
      { label: 'Params', get: (a) => a.params.map((p) => p.name).join(', ') },
      { label: 'Status', get: (a) => statusBadge(a.status) },
      { label: 'Updated', get: (a) => fmtTime(a.updated_at) },
    ], 'No Analytics API yet.');
}

function apiFields(a, models) {
  return [
    { name: 'key', label: 'Key', required: true, value: a.key, placeholder: 'revenue_by_country' },
    { name: 'name', label: 'Name', value: a.name },
    { name: 'description', label: 'Description', value: a.description, keepEmpty: true },
    { name: 'model_key', label: 'Model', type: 'select', value: a.model_key, options: models.map((m) => m.key) },
    { name: 'query', label: 'Query (JSON)', type: 'json', rows: 8, value: a.query || { group_by: [], aggregations: [{ fn: 'count', as: 'n' }] }, help: 'select, filters, group_by, aggregations, order_by, limit, time_range; a filter value {"param": "name"} takes a parameter.' },
    { name: 'params', label: 'Parameters (JSON)', type: 'json', rows: 3, value: a.params || [], help: '[{"name": "min_amount", "type": "number", "required": false, "default": 0}]' },
  ];
}

export async function analyticsDetail(ctx) {
  const pid = ctx.params.pid;
  const [a, models, whs] = await Promise.all([api.get('/analytics-apis/' + ctx.params.id), api.list(`/models?project_id=${pid}&status=active`), api.list(`/warehouses?project_id=${pid}`)]);
  const bindBox = h('div', {});
  const f = form(apiFields(a, models), { onSubmit: async (v) => { delete v.key; await api.put('/analytics-apis/' + a.id, v); toast('Analytics API saved'); } });
  f.inputs.key.input.disabled = true;
  async function loadBindings() {
    const rows = await api.list(`/analytics-bindings?project_id=${pid}&analytics_api_id=${a.id}`);
    const add = h('form', { class: 'row', onsubmit: async (e) => {
      e.preventDefault();
      try { await api.post('/analytics-bindings', { project_id: pid, analytics_api_id: a.id, warehouse_id: sel.value }); toast('Binding created'); } catch (err) { toast(err.message, 'bad'); }
      await loadBindings();
    } });
    const sel = h('select', { 'aria-label': 'Warehouse to bind' }, whs.map((w) => h('option', { value: w.id }, `${w.name} (${w.type})`)));
    add.append(sel, h('button', { type: 'submit' }, 'Bind to warehouse'));
    mount(bindBox, table([
      { label: 'Warehouse', get: (b) => { const w = whs.find((x) => x.id === b.warehouse_id); return w ? `${w.name} (${w.type})` : b.warehouse_id; } },
      { label: 'State', get: (b) => statusBadge(b.state) },
      { label: 'Created', get: (b) => fmtTime(b.created_at) },
      { label: '', get: (b) => b.state === 'standby' ? h('button', { class: 'primary', onclick: async () => {
        if (!(await confirm('Promote binding', 'Queries of this API switch to this warehouse at once; the active binding becomes standby.', 'Promote', false))) return;
        try { await api.post(`/analytics-bindings/${b.id}/promote`); toast('Binding promoted'); } catch (err) { toast(err.message, 'bad'); }
        await loadBindings();
      } }, 'Promote') : null },
    ], rows, { empty: 'No binding yet: bind the API to a warehouse to make it callable.' }), a.status === 'active' ? h('div', { class: 'row' }, add) : null);
  }
  const archive = a.status === 'active' ? h('button', { class: 'danger', onclick: act(async () => {
    if (!(await confirm('Archive Analytics API', `Archive ${a.key}? Its bindings retire and calls stop.`, 'Archive'))) return;
    await api.del('/analytics-apis/' + a.id);
    ctx.navigate(`/p/${pid}/analytics`);
  }) }, 'Archive') : null;
  mount(ctx.el, pageHead(`Analytics API ${a.key}`, statusBadge(a.status), archive),
    h('div', { class: 'grid2' }, h('div', { class: 'card' }, f), h('div', { class: 'card' }, h('h2', {}, 'Bindings'), bindBox)));
  await loadBindings();
}

const configTemplates = {
  embedded: {},
  postgres: { host: '127.0.0.1', port: 5432, database: 'lookout', schema: 'public', sslmode: 'require', local_retention_hours: 24 },
  clickhouse: { url: 'http://127.0.0.1:8123', database: 'default', local_retention_hours: 24 },
};

export async function warehouses(ctx) {
  const pid = ctx.params.pid;
  const [rows, creds] = await Promise.all([api.list(`/warehouses?project_id=${pid}`), api.list(`/warehouse-credentials?project_id=${pid}`)]);
  const credOpts = [{ value: '', label: 'none' }, ...creds.map((c) => ({ value: c.id, label: `${c.name} (${c.username})` }))];
  const open = (w) => {
    const f = form([
      { name: 'name', label: 'Name', required: true, value: w ? w.name : '' },
      { name: 'type', label: 'Type', type: 'select', value: w ? w.type : 'postgres', options: ['embedded', 'postgres', 'clickhouse'] },
      { name: 'config', label: 'Config (JSON)', type: 'json', rows: 7, value: w ? w.config : configTemplates.postgres, help: 'Non-secret settings. Passwords live in a credential.' },
      { name: 'credential_id', label: 'Credential', type: 'select', value: w ? w.credential_id || '' : '', options: credOpts },
    ], {
      submit: w ? 'Save (tests the connection first)' : 'Create (tests the connection first)',
      onSubmit: async (v) => {
        if (!v.credential_id) delete v.credential_id;
        if (w) { delete v.type; await api.put('/warehouses/' + w.id, v); } else await api.post('/warehouses', { ...v, project_id: pid });
        d.close();
        toast('Warehouse saved');
        await warehouses(ctx);
      },
    });
    if (w) f.inputs.type.input.disabled = true;
    else f.inputs.type.input.addEventListener('change', (e) => { f.inputs.config.input.value = JSON.stringify(configTemplates[e.target.value], null, 2); });
    const d = dialog(w ? `Warehouse ${w.name}` : 'New warehouse', f, []);
  };
  const test = async (w) => {
    try { await api.post(`/warehouses/${w.id}/test`); toast(`${w.name}: the engine answered and accepted the credential`); } catch (e) { toast(`${w.name}: ${e.message}`, 'bad'); }
  };
  listPage(ctx, 'Warehouses', 'Where a model\'s records live: the embedded warehouse in the binary, or PostgreSQL or ClickHouse with Lookout shipping records from its local log.',
    h('button', { class: 'primary', onclick: () => open(null) }, 'New warehouse'), rows, [
      { label: 'Name', get: (w) => w.name },
      { label: 'Type', get: (w) => badge(w.type) },
      { label: 'Config', get: (w) => h('code', {}, JSON.stringify(w.config)) },
      { label: 'Credential', get: (w) => { const c = creds.find((x) => x.id === w.credential_id); return c ? c.name : '—'; } },
      { label: '', get: (w) => w.type === 'embedded' ? null : h('span', { class: 'row' }, h('button', { onclick: () => test(w) }, 'Test'), h('button', { onclick: () => open(w) }, 'Edit')) },
    ], 'No warehouse.');
}

export async function credentials(ctx) {
  const pid = ctx.params.pid;
  const rows = await api.list(`/warehouse-credentials?project_id=${pid}`);
  const open = (c) => {
    const d = dialog(c ? `Credential ${c.name}` : 'New credential', form([
      { name: 'name', label: 'Name', required: true, value: c ? c.name : '' },
      { name: 'type', label: 'Type', type: 'select', value: c ? c.type : 'password', options: ['password', 'token'] },
      { name: 'username', label: 'User name', value: c ? c.username : '' },
      { name: 'secret', label: c ? 'New secret (leave empty to keep the stored one)' : 'Secret', type: 'password', autocomplete: 'new-password', required: !c, help: 'Write-only: sealed with the master key and never shown again.' },
    ], {
      submit: 'Save',
      onSubmit: async (v) => {
        if (c) await api.put('/warehouse-credentials/' + c.id, v); else await api.post('/warehouse-credentials', { ...v, project_id: pid });
        d.close();
        toast('Credential saved');
        await credentials(ctx);
      },
    }), []);
  };
  listPage(ctx, 'Credentials', 'User names and secrets for external warehouses. Secrets are write-only.',
    h('button', { class: 'primary', onclick: () => open(null) }, 'New credential'), rows, [
      { label: 'Name', get: (c) => c.name },
      { label: 'Type', get: (c) => c.type },
      { label: 'User', get: (c) => c.username },
      { label: 'Secret', get: (c) => c.secret_set ? h('code', {}, c.secret_hint) : 'not set' },
      { label: 'Rotated', get: (c) => fmtTime(c.rotated_at) },
      { label: '', get: (c) => h('button', { onclick: () => open(c) }, 'Edit') },
    ], 'No credential yet.');
}

export async function cas(ctx) {
  const pid = ctx.params.pid;
  const rows = await api.list(`/client-cas?project_id=${pid}`);
  const open = () => {
    const d = dialog('New Client CA', form([
      { name: 'name', label: 'Name', required: true },
      { name: 'certificate_pem', label: 'CA certificate (PEM)', type: 'textarea', rows: 10, required: true, placeholder: '-----BEGIN CERTIFICATE-----' },
    ], {
      submit: 'Add CA',
      onSubmit: async (v) => {
        const ca = await api.post('/client-cas', { ...v, project_id: pid });
        mount(d.body, h('div', { class: 'notice ok' }, 'CA added.'), kv([['Subject', ca.subject], ['Fingerprint (SHA-256)', h('code', {}, ca.fingerprint_sha256)], ['Expires', new Date(ca.not_after).toISOString()]]));
        await cas(ctx);
      },
    }), [{ label: 'Done' }]);
  };
  listPage(ctx, 'Client CAs', 'Certificate authorities whose client certificates mTLS clients present.',
    h('button', { class: 'primary', onclick: open }, 'Add Client CA'), rows, [
      { label: 'Name', get: (c) => c.name },
      { label: 'Subject', get: (c) => c.subject },
      { label: 'Fingerprint (SHA-256)', get: (c) => h('code', { class: 'small' }, c.fingerprint_sha256) },
      { label: 'Expires', get: (c) => fmtTime(c.not_after) },
      { label: '', get: (c) => h('button', { class: 'danger', onclick: async () => {
        if (!(await confirm('Delete Client CA', `Delete ${c.name}?`, 'Delete'))) return;
        try { await api.del('/client-cas/' + c.id); toast('Client CA deleted'); } catch (e) { toast(e.message, 'bad'); }
        await cas(ctx);
      } }, 'Delete') },
    ], 'No Client CA yet.');
}
