// A project's overview: totals, records per model over time, incidents per day, delivery
// success. Every box has its final size before data arrives: nothing moves when it does.
import * as api from '../api.js';
import { h, mount, pageHead, table, fmtNum, fmtBytes, fmtTime, statusBadge } from '../ui.js';
import { renderChart, chartPlaceholder } from '../chart.js';

function statCard(label, id) {
  return h('div', { class: 'card' }, h('div', { class: 'stat-label', id: id + '-label' }, label), h('div', { class: 'stat', id, 'aria-labelledby': id + '-label' }, '—'));
}

export async function overview(ctx) {
  const pid = ctx.params.pid;
  const recordsChart = h('div', { class: 'chart-box', id: 'records-chart' });
  const incidentsChart = h('div', { class: 'chart-box', id: 'incidents-chart' });
  const models = h('div', { id: 'model-stats' });
  mount(ctx.el,
    pageHead(ctx.project.name, h('a', { class: 'button', href: `/p/${pid}/playground` }, 'Open playground')),
    h('div', { class: 'grid4' }, statCard('Records stored', 'stat-records'), statCard('Storage', 'stat-bytes'), statCard('Open incidents', 'stat-open'), statCard('Delivery success (14 days)', 'stat-delivery')),
    h('div', { class: 'grid2' },
      h('div', { class: 'card' }, h('h2', {}, 'Records received per hour'), recordsChart),
      h('div', { class: 'card' }, h('h2', {}, 'Incidents opened per day'), incidentsChart)),
    h('h2', {}, 'Models'), models);
  chartPlaceholder(recordsChart, 240);
  chartPlaceholder(incidentsChart, 240);
  const [stats, activity, open] = await Promise.all([
    api.get(`/projects/${pid}/stats`),
    api.get(`/projects/${pid}/activity?hours=24&days=14`),
    api.page(`/alert-incidents?project_id=${pid}&status=open`, '', 200),
  ]);
  const total = stats.models.reduce((a, m) => a + (m.records || 0), 0);
  const bytes = stats.models.reduce((a, m) => a + (m.bytes || 0), 0);
  document.getElementById('stat-records').textContent = fmtNum(total);
  document.getElementById('stat-bytes').textContent = fmtBytes(bytes);
  document.getElementById('stat-open').textContent = open.next ? '200+' : String(open.rows.length);
  const rate = activity.alerts.success_rate;
  document.getElementById('stat-delivery').textContent = rate === null ? 'no deliveries' : `${(rate * 100).toFixed(1)} %`;
  const from = new Date(activity.from).getTime();
  const hours = activity.records.length ? activity.records[0].counts.length : 24;
  const x = Array.from({ length: hours }, (_, i) => new Date(from + i * activity.step_seconds * 1000).toISOString());
  if (activity.records.length) {
    renderChart(recordsChart, { type: 'line', xType: 'time', x, series: activity.records.map((r) => ({ name: r.model_key, values: r.counts })), yLabel: 'records', height: 240, title: 'Records received per hour, by model' });
  }
  renderChart(incidentsChart, { type: 'bar', xType: 'category', x: activity.alerts.days.map((d) => d.slice(5)), series: [{ name: 'incidents', values: activity.alerts.incidents_opened }], yLabel: 'incidents', height: 240, title: 'Incidents opened per day' });
  mount(models, table([
    { label: 'Model', get: (m) => h('a', { href: `/p/${pid}/models/${m.model_id}` }, m.model_key) },
    { label: 'Status', get: (m) => statusBadge(m.status) },
    { label: 'Records', num: true, get: (m) => fmtNum(m.records) },
    { label: 'Size', num: true, get: (m) => fmtBytes(m.bytes) },
    { label: 'Sealed blocks', num: true, get: (m) => fmtNum(m.blocks) },
    { label: 'Last record', get: (m) => fmtTime(m.last_ingest_at) },
    { label: 'Shipping', get: (m) => m.sink ? `${fmtNum(m.sink.lag_records)} behind${m.sink.last_error ? ' — ' + m.sink.last_error : ''}` : '—' },
  ], stats.models, { empty: 'No model yet: create one, or open a discovery session and let the data describe itself.' }));
}
