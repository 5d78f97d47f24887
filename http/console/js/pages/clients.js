// Ingest and query clients: general settings, authentication policy, runtime keys and, for
// ingest clients, the OpenAPI document and copy-paste examples with the real URL.
import * as api from '../api.js';
import { h, mount, form, table, pageHead, fmtTime, statusBadge, toast, confirm, dialog, secretBox, copyButton, tabs, act } from '../ui.js';
import { state } from '../main.js';

const lines = (a) => (a || []).join('\n');
const unlines = (s) => (s || '').split('\n').map((x) => x.trim()).filter(Boolean);

export const ingestList = (ctx) => clientList(ctx, 'ingest');
export const queryList = (ctx) => clientList(ctx, 'query');
export const ingestDetail = (ctx) => clientDetail(ctx, 'ingest');
export const queryDetail = (ctx) => clientDetail(ctx, 'query');

const coll = (kind) => (kind === 'ingest' ? '/ingest-clients' : '/query-clients');

async function clientList(ctx, kind) {
  const pid = ctx.params.pid;
  const [rows, models, apis] = await Promise.all([api.list(`${coll(kind)}?project_id=${pid}`), api.list(`/models?project_id=${pid}&status=active`), kind === 'query' ? api.list(`/analytics-apis?project_id=${pid}&status=active`) : []]);
  const create = () => {
    const d = dialog(`New ${kind} client`, form(generalFields(kind, {}, models, apis), {
      submit: 'Create client',
      onSubmit: async (v) => {
        const c = await api.post(coll(kind), { ...toBody(kind, v), project_id: pid });
        d.close();
        toast(`Client ${c.name} created`);
        ctx.navigate(`/p/${pid}${coll(kind)}/${c.id}`);
      },
    }), []);
  };
  mount(ctx.el, pageHead(kind === 'ingest' ? 'Ingest clients' : 'Query clients', h('button', { class: 'primary', id: 'new-client', onclick: create }, 'New client')),
    h('p', { class: 'muted' }, kind === 'ingest' ? 'An ingest client is one sender of records (a service, a device fleet, a browser app) with its own credentials, models and quota.' : 'A query client reads through the query runtime: Analytics APIs and ad-hoc queries, with required filters for row-level restriction.'),
    table([
      { label: 'Name', get: (c) => h('a', { href: `/p/${pid}${coll(kind)}/${c.id}` }, c.name) },
      { label: 'Models', get: (c) => c.models.join(', ') || h('span', { class: 'muted' }, 'none') },
      { label: 'Authentication', get: (c) => `${c.authentication.mode}: ${c.authentication.methods.join(', ')}` },
      { label: 'State', get: (c) => statusBadge(c.enabled ? 'enabled' : 'disabled') },
      { label: 'Created', get: (c) => fmtTime(c.created_at) },
    ], rows, { empty: 'No client yet.' }));
}

function generalFields(kind, c, models, apis) {
  const f = [
    { name: 'name', label: 'Name', required: true, value: c.name },
    { name: 'models', label: 'Models it may use', type: 'checks', options: models.map((m) => m.key), value: c.models || [], emptyText: 'No model yet: create one first.' },
    { name: 'enabled', label: 'Enabled', type: 'checkbox', value: c.enabled !== false },
    { name: 'rpm', label: 'Requests per minute (0: no limit)', type: 'number', min: 0, value: c.quota ? c.quota.requests_per_minute : 0 },
    { name: 'recpm', label: 'Records per minute (0: no limit)', type: 'number', min: 0, value: c.quota ? c.quota.records_per_minute : 0 },
  ];
  if (kind === 'query') {
    f.push({ name: 'analytics_apis', label: 'Analytics APIs', type: 'checks', options: apis.map((a) => a.key), value: c.analytics_apis || [] },
      { name: 'adhoc_models', label: 'Models open to ad-hoc queries', type: 'checks', options: models.map((m) => m.key), value: c.adhoc_models || [] },
      { name: 'required_filters', label: 'Required filters (JSON)', type: 'json', rows: 3, value: c.required_filters || [], help: 'ANDed into every query, e.g. [{"field":"tenant","op":"eq","value":"acme"}]' });
  }
  return f;
}

function toBody(kind, v) {
  const b = { name: v.name, models: v.models, enabled: v.enabled, quota: { requests_per_minute: v.rpm || 0, records_per_minute: v.recpm || 0 } };
  if (kind === 'query') Object.assign(b, { analytics_apis: v.analytics_apis, adhoc_models: v.adhoc_models, required_filters: v.required_filters || [] });
  return b;
}

async function clientDetail(ctx, kind) {
  const pid = ctx.params.pid;
  const id = ctx.params.id;
  const [c, models, apis, cas] = await Promise.all([api.get(`${coll(kind)}/${id}`), api.list(`/models?project_id=${pid}&status=active`), kind === 'query' ? api.list(`/analytics-apis?project_id=${pid}&status=active`) : [], api.list(`/client-cas?project_id=${pid}`)]);
  const general = form(generalFields(kind, c, models, apis), { onSubmit: async (v) => { await api.put(`${coll(kind)}/${id}`, toBody(kind, v)); toast('Client saved'); ctx.navigate(location.pathname, true); } });
  const keysBox = h('div', {});
  const panels = [
    { label: 'Settings', render: () => h('div', { class: 'card' }, general) },
    { label: 'Authentication', render: () => h('div', { class: 'card' }, authForm(kind, c, cas)) },
    { label: 'Runtime keys', render: () => keysBox },
  ];
  if (kind === 'ingest') {
    panels.push({ label: 'Send data', render: () => examples(c, models) });
    panels.push({ label: 'OpenAPI', render: () => openapi(c) });
  }
  const del = h('button', { class: 'danger', onclick: act(async () => {
    if (!(await confirm('Delete client', `Delete ${c.name} for good? Its runtime keys stop working at once.`, 'Delete'))) return;
    await api.del(`${coll(kind)}/${id}`);
    toast('Client deleted');
    ctx.navigate(`/p/${pid}${coll(kind)}`);
  }) }, 'Delete');
  mount(ctx.el, pageHead(`${kind === 'ingest' ? 'Ingest' : 'Query'} client ${c.name}`, statusBadge(c.enabled ? 'enabled' : 'disabled'), del), tabs(panels));
  await renderKeys(keysBox, pid, kind, c);
  if (ctx.query.get('tab')) {
    const t = [...ctx.el.querySelectorAll('[role=tab]')].find((b) => b.textContent === ctx.query.get('tab'));
    if (t) t.click();
  }
}

/** renderKeys lists the client's runtime keys; a new key is shown once. */
export async function renderKeys(box, pid, kind, c) {
  const rows = await api.list(`/runtime-api-keys?project_id=${pid}&client_id=${c.id}`);
  const create = () => {
    const d = dialog('New runtime key', form([
      { name: 'name', label: 'Name', required: true, placeholder: 'production' },
      { name: 'models', label: 'Narrow to models (none ticked: all of the client\'s)', type: 'checks', options: c.models, value: [] },
      { name: 'expires_at', label: 'Expires', type: 'datetime' },
    ], {
      submit: 'Create key',
      onSubmit: async (v) => {
        const k = await api.post('/runtime-api-keys', { ...v, project_id: pid, kind, client_id: c.id });
        mount(d.body, secretBox(k.key, 'the key'), h('p', {}, 'Send it as ', h('code', {}, 'Authorization: ApiKey <key>'), '.'));
        await renderKeys(box, pid, kind, c);
      },
    }), [{ label: 'Done' }]);
  };
  mount(box, h('div', { class: 'page-head' }, h('h2', {}, 'Runtime API keys'), h('button', { class: 'primary', id: 'new-key', onclick: create }, 'New key')),
    table([
      { label: 'Name', get: (k) => k.name },
      { label: 'Prefix', get: (k) => h('code', {}, k.key_prefix) },
      { label: 'Models', get: (k) => k.models.join(', ') || 'all of the client\'s' },
      { label: 'Expires', get: (k) => fmtTime(k.expires_at) },
      { label: 'State', get: (k) => statusBadge(k.revoked_at ? 'revoked' : 'active') },
      { label: '', get: (k) => k.revoked_at ? null : h('button', { class: 'danger', onclick: act(async () => {
        if (!(await confirm('Revoke key', `Revoke ${k.name}? It stops working at once, for good.`, 'Revoke'))) return;
        await api.del('/runtime-api-keys/' + k.id);
        toast('Key revoked');
        await renderKeys(box, pid, kind, c);
      }) }, 'Revoke') },
    ], rows, { empty: 'No key yet.' }));
}

function authForm(kind, c, cas) {
  const a = c.authentication || {};
  const jwt = a.jwt || {};
  const m = a.mtls || {};
  const f = form([
    { name: 'mode', label: 'Mode', type: 'select', value: a.mode || 'any', options: [{ value: 'any', label: 'any: one listed method suffices' }, { value: 'all', label: 'all: every listed method' }] },
    { name: 'methods', label: 'Methods', type: 'checks', options: ['api_key', 'jwt', 'mtls'], value: a.methods || ['api_key'] },
    { name: 'transports', label: 'Transports', type: 'checks', options: ['http', 'websocket'], value: a.transports || ['http', 'websocket'] },
    { name: 'allowed_cidrs', label: 'Allowed source networks (one per line; empty: any)', type: 'textarea', rows: 2, value: lines(a.allowed_cidrs) },
    { name: 'allowed_user_agents', label: 'Allowed user agents (one per line; empty: any)', type: 'textarea', rows: 2, value: lines(a.allowed_user_agents) },
    { type: 'section', label: 'JWT' },
    { name: 'jwt_algorithms', label: 'Algorithms', type: 'checks', options: ['HS256', 'RS256', 'ES256'], value: jwt.algorithms || [] },
    { name: 'jwt_secret', label: 'HS256 secret', type: 'password', autocomplete: 'off', help: jwt.hs256_secret_set ? 'A secret is set; leave empty to keep it.' : 'At least 32 bytes. Write-only.' },
    { name: 'jwt_pem', label: 'Public key (PEM, for RS256/ES256)', type: 'textarea', rows: 3, value: jwt.public_key_pem || '' },
    { name: 'jwt_issuer', label: 'Issuer', value: jwt.issuer || '' },
    { name: 'jwt_audience', label: 'Audience', value: jwt.audience || '' },
    { type: 'section', label: 'mTLS' },
    { name: 'mtls_cas', label: 'Client CAs', type: 'checks', options: cas.map((x) => ({ value: x.id, label: x.name })), value: m.client_ca_ids || [], emptyText: 'No Client CA in this project yet.' },
    { name: 'mtls_uris', label: 'Allowed URI SANs (one per line)', type: 'textarea', rows: 2, value: lines(m.allowed_uris) },
    { name: 'mtls_subjects', label: 'Allowed subjects (one per line)', type: 'textarea', rows: 2, value: lines(m.allowed_subjects) },
  ], {
    submit: 'Save authentication',
    onSubmit: async (v) => {
      const b = { mode: v.mode, methods: v.methods, transports: v.transports, allowed_cidrs: unlines(v.allowed_cidrs), allowed_user_agents: unlines(v.allowed_user_agents) };
      if (v.methods.includes('jwt')) {
        b.jwt = { algorithms: v.jwt_algorithms, issuer: v.jwt_issuer || '', audience: v.jwt_audience || '' };
        if (v.jwt_secret) b.jwt.hs256_secret = v.jwt_secret;
        if (v.jwt_pem) b.jwt.public_key_pem = v.jwt_pem;
      }
      if (v.methods.includes('mtls')) b.mtls = { client_ca_ids: v.mtls_cas, allowed_uris: unlines(v.mtls_uris), allowed_subjects: unlines(v.mtls_subjects) };
      const out = await api.put(`${coll(kind)}/${c.id}/authentication`, b);
      c.authentication = out.authentication;
      // Drawn again from what was stored: the secret field empties and says a secret is set.
      f.replaceWith(authForm(kind, c, cas));
      toast('Authentication saved');
    },
  });
  return f;
}

/** exampleRecord is a record the model accepts: a value of each field's type. */
function exampleRecord(m) {
  const sample = { string: 'example', integer: 1, number: 1.5, boolean: true, timestamp: new Date(Date.UTC(2026, 0, 1)).toISOString(), object: {}, array: [] };
  const rec = {};
  for (const f of (m && m.fields) || []) rec[f.name] = sample[f.type];
  return JSON.stringify(m ? rec : { field: 'value' });
}

function examples(c, models) {
  const url = (state.config.ingest_url || 'http://127.0.0.1:8081') + '/ingest';
  const model = c.models[0] || 'your_model';
  const rec = exampleRecord(models.find((m) => m.key === model));
  const curl = `curl -s -X POST '${url}?schema=${model}' \\\n  -H "Authorization: ApiKey $LOOKOUT_KEY" \\\n  -H 'Content-Type: application/json' \\\n  -d '{"schema": "${model}", "data": [${rec}]}'\n\n# NDJSON, one record per line\nprintf '%s\\n' '${rec}' | curl -s -X POST '${url}?schema=${model}' \\\n  -H "Authorization: ApiKey $LOOKOUT_KEY" -H 'Content-Type: application/x-ndjson' --data-binary @-`;
  const js = `const resp = await fetch('${url}', {\n  method: 'POST',\n  headers: {\n    'Authorization': 'ApiKey ' + LOOKOUT_KEY,\n    'Content-Type': 'application/json',\n  },\n  body: JSON.stringify({ schema: '${model}', data: [${rec}] }),\n});\nconst out = await resp.json();\nif (out.error) throw new Error(out.message);\nconsole.log(out.data.accepted, 'accepted');`;
  const py = `import json, os, urllib.request\n\nreq = urllib.request.Request(\n    "${url}",\n    data=json.dumps({"schema": "${model}", "data": [json.loads('${rec}')]}).encode(),\n    headers={\n        "Authorization": "ApiKey " + os.environ["LOOKOUT_KEY"],\n        "Content-Type": "application/json",\n    },\n    method="POST",\n)\nwith urllib.request.urlopen(req) as resp:\n    print(json.load(resp)["data"])`;
  const block = (title, code) => h('div', { class: 'card' }, h('div', { class: 'page-head' }, h('h3', {}, title), copyButton(code, 'Copy')), h('pre', { tabindex: '0' }, code));
  return h('div', {}, h('p', { class: 'muted' }, 'The ingest listener answers at ', h('code', {}, url), '. Use a runtime key of this client (Runtime keys tab); the 202 comes after the records are on disk.'),
    block('curl', curl), block('JavaScript (fetch)', js), block('Python', py));
}

function openapi(c) {
  const box = h('div', { class: 'card' }, h('p', { class: 'muted' }, 'Loading the document…'));
  api.rawDocument(`/ingest-clients/${c.id}/openapi.json`)
    .then((doc) => {
      const text = JSON.stringify(doc, null, 2);
      mount(box, h('div', { class: 'page-head' }, h('h3', {}, 'OpenAPI 3.1 document of this client\'s /ingest'), copyButton(text, 'Copy')),
        h('p', { class: 'muted small' }, 'Import it into a client generator or an API tool; it carries a JSON Schema per model the client may write.'),
        h('pre', { tabindex: '0', id: 'openapi-doc' }, text));
    })
    .catch((e) => mount(box, h('div', { class: 'notice bad', role: 'alert' }, e.message)));
  return box;
}
