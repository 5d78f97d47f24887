// Incidents with their occurrences and deliveries; the delivery queue with Retry.
import * as api from '../api.js';
import { h, mount, table, pageHead, fmtTime, statusBadge, toast, kv, nextId, errorText } from '../ui.js';

function select(label, name, options, value) {
  const id = nextId();
  return h('div', { class: 'field' }, h('label', { for: id }, label), h('select', { id, name }, options.map(([v, l]) => h('option', { value: v, selected: v === value }, l))));
}

export async function list(ctx) {
  const pid = ctx.params.pid;
  const box = h('div', {});
  const filters = h('form', { class: 'filters', role: 'search', onsubmit: (e) => { e.preventDefault(); load(); } },
    select('Status', 'status', [['', 'any'], ['open', 'open'], ['acknowledged', 'acknowledged'], ['resolved', 'resolved']], ctx.query.get('status') || ''),
    select('Severity', 'severity', [['', 'any'], ['critical', 'critical'], ['warning', 'warning'], ['info', 'info']], ctx.query.get('severity') || ''),
    h('button', { type: 'submit' }, 'Filter'));
  let cursor = '';
  async function load(more) {
    const params = new URLSearchParams({ project_id: pid });
    for (const k of ['status', 'severity']) { const v = filters.elements[k].value; if (v) params.set(k, v); }
    const pg = await api.page('/alert-incidents?' + params, more ? cursor : '', 50);
    cursor = pg.next;
    const rows = more ? [...box.rows, ...pg.rows] : pg.rows;
    box.rows = rows;
    mount(box, table([
      { label: 'Alert', get: (i) => h('a', { href: `/p/${pid}/incidents/${i.id}` }, i.alert_name) },
      { label: 'Status', get: (i) => statusBadge(i.status) },
      { label: 'Severity', get: (i) => statusBadge(i.severity) },
      { label: 'Group', get: (i) => (i.group && Object.keys(i.group).length ? h('code', {}, JSON.stringify(i.group)) : '—') },
      { label: 'Occurrences', num: true, get: (i) => i.occurrences },
      { label: 'Opened', get: (i) => fmtTime(i.first_occurred_at) },
      { label: 'Last', get: (i) => fmtTime(i.last_occurred_at) },
    ], rows, { empty: 'No incident. Alerts open one when a record matches.' }), cursor ? h('button', { onclick: () => load(true) }, 'Load more') : null);
  }
  mount(ctx.el, pageHead('Incidents', h('button', { onclick: () => load() }, 'Refresh')), filters, box);
  await load();
  const t = setInterval(() => { if (!document.querySelector('dialog')) load().catch(() => {}); }, 10000);
  return () => clearInterval(t);
}

function deliveryColumns(pid, reload, channels) {
  const name = (id) => (channels.find((c) => c.id === id) || {}).name;
  return [
    { label: 'Kind', get: (d) => d.kind },
    { label: 'Channel', get: (d) => `${name(d.channel_id) || d.channel_id} (${d.channel_type})` },
    { label: 'Status', get: (d) => h('span', {}, statusBadge(d.status), d.waiting_reason ? h('span', { class: 'small muted' }, ` waiting: ${d.waiting_reason}`) : null) },
    { label: 'Attempts', num: true, get: (d) => d.attempts },
    { label: 'Next attempt', get: (d) => fmtTime(d.next_attempt_at) },
    { label: 'Last error', get: (d) => d.last_error ? h('span', { class: 'small' }, d.last_error) : (d.last_status_code ? `HTTP/SMTP ${d.last_status_code}` : '—') },
    { label: '', get: (d) => (d.status === 'failed' || d.status === 'dead_letter') ? h('button', { onclick: async () => {
      try { await api.post(`/alert-deliveries/${d.id}/retry`); toast('Delivery queued again'); } catch (e) { toast(errorText(e), 'bad'); }
      await reload();
    } }, 'Retry') : null },
  ];
}

export async function detail(ctx) {
  const pid = ctx.params.pid;
  const id = ctx.params.id;
  const channels = await api.list(`/notification-channels?project_id=${pid}`);
  async function render() {
    const i = await api.get('/alert-incidents/' + id);
    const act = (what) => async () => {
      try { await api.post(`/alert-incidents/${id}/${what}`); toast(`Incident ${what === 'acknowledge' ? 'acknowledged' : 'resolved'}`); } catch (e) { toast(errorText(e), 'bad'); }
      await render();
    };
    mount(ctx.el, pageHead(`Incident: ${i.alert_name}`, statusBadge(i.status), statusBadge(i.severity),
      i.status === 'open' ? h('button', { id: 'acknowledge', onclick: act('acknowledge') }, 'Acknowledge') : null,
      i.status !== 'resolved' ? h('button', { class: 'primary', id: 'resolve', onclick: act('resolve') }, 'Resolve') : null),
    h('div', { class: 'card' }, kv([
      ['Alert', h('a', { href: `/p/${pid}/alerts/${i.alert_id}` }, i.alert_name)],
      ['Model', i.model_key],
      ['Group', h('code', {}, JSON.stringify(i.group || {}))],
      ['Occurrences', h('span', { id: 'occurrences' }, String(i.occurrences))],
      ['First', fmtTime(i.first_occurred_at)], ['Last', fmtTime(i.last_occurred_at)],
      ['Acknowledged', fmtTime(i.acknowledged_at)], ['Resolved', fmtTime(i.resolved_at)],
    ])),
    h('h2', {}, 'Recent occurrences'),
    table([
      { label: '#', num: true, get: (o) => o.number },
      { label: 'At', get: (o) => fmtTime(o.at) },
      { label: 'Selected fields', get: (o) => h('code', {}, JSON.stringify(o.selected || {})) },
    ], i.recent_occurrences || [], { empty: 'No occurrence kept.' }),
    h('h2', {}, 'Deliveries'),
    table(deliveryColumns(pid, render, channels), i.deliveries || [], { empty: 'No delivery: the alert has no enabled channel.' }));
  }
  await render();
}

export async function deliveries(ctx) {
  const pid = ctx.params.pid;
  const box = h('div', {});
  const filters = h('form', { class: 'filters', role: 'search', onsubmit: (e) => { e.preventDefault(); load(); } },
    select('Status', 'status', [['', 'any'], ...['pending', 'delivering', 'delivered', 'failed', 'dead_letter'].map((s) => [s, s])], ''),
    select('Kind', 'kind', [['', 'any'], ...['opening', 'summary', 'resolution', 'test'].map((s) => [s, s])], ''),
    h('button', { type: 'submit' }, 'Filter'));
  const channels = await api.list(`/notification-channels?project_id=${pid}`);
  async function load() {
    const params = new URLSearchParams({ project_id: pid });
    for (const k of ['status', 'kind']) { const v = filters.elements[k].value; if (v) params.set(k, v); }
    const pg = await api.page('/alert-deliveries?' + params, '', 100);
    mount(box, table([{ label: 'Created', get: (d) => fmtTime(d.created_at) }, { label: 'Incident', get: (d) => d.incident_id ? h('a', { href: `/p/${pid}/incidents/${d.incident_id}` }, 'open') : 'test' }, ...deliveryColumns(pid, load, channels)], pg.rows, { empty: 'The queue is empty.' }));
  }
  mount(ctx.el, pageHead('Deliveries', h('button', { onclick: load }, 'Refresh')), h('p', { class: 'muted' }, 'Every notice is a row of a durable queue; failed ones retry with backoff, and you can retry a failed or dead-lettered one now.'), filters, box);
  await load();
}
