// The playground: build a query (or write its JSON), run it, see a table and a chart.
import * as api from '../api.js';
import { h, mount, pageHead, table, nextId, errorText, fmtNum } from '../ui.js';
import { renderChart, chartPlaceholder } from '../chart.js';

const fns = ['count', 'count_distinct', 'sum', 'avg', 'min', 'max'];
const ranges = [['', 'all time'], ['-1h', 'last hour'], ['-24h', 'last 24 hours'], ['-168h', 'last 7 days'], ['-720h', 'last 30 days']];

function labelled(label, input) {
  const id = input.id || nextId();
  input.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), input);
}

export async function playground(ctx) {
  const pid = ctx.params.pid;
  const models = await api.list(`/models?project_id=${pid}&status=active`);
  if (!models.length) {
    mount(ctx.el, pageHead('Playground'), h('div', { class: 'notice' }, 'No model yet: ', h('a', { href: `/p/${pid}/models/new` }, 'create one'), ' and send records to query them.'));
    return;
  }
  const modelSel = h('select', { id: 'pg-model' }, models.map((m) => h('option', { value: m.key }, m.key)));
  const groupSel = h('select', { id: 'pg-group' });
  const fnSel = h('select', { id: 'pg-fn' }, fns.map((f) => h('option', { value: f }, f)));
  const aggField = h('select', { id: 'pg-agg-field' });
  const rangeSel = h('select', { id: 'pg-range' }, ranges.map(([v, l]) => h('option', { value: v }, l)));
  const limitIn = h('input', { id: 'pg-limit', type: 'number', min: 1, max: 10000, value: 100 });
  const json = h('textarea', { id: 'pg-json', rows: 12, spellcheck: 'false' });
  const err = h('div', { class: 'form-error', role: 'alert' });
  const chartBox = h('div', { class: 'chart-box tall', id: 'pg-chart' });
  const resultBox = h('div', { id: 'pg-result' });
  const statsLine = h('p', { class: 'muted small', id: 'pg-stats' }, 'Run a query to see its rows.');
  const fields = () => {
    const m = models.find((x) => x.key === modelSel.value);
    return [...m.fields, { name: '_received_at', type: 'timestamp' }, { name: '_client_id', type: 'string' }];
  };
  function fillFields() {
    const fs = fields();
    mount(groupSel, h('option', { value: '' }, '(no grouping)'), fs.filter((f) => f.type !== 'object' && f.type !== 'array').map((f) => h('option', { value: f.name }, `${f.name} (${f.type})`)));
    const numeric = fnSel.value === 'count' || fnSel.value === 'count_distinct' ? fs : fs.filter((f) => f.type === 'integer' || f.type === 'number' || ((fnSel.value === 'min' || fnSel.value === 'max') && f.type === 'timestamp'));
    mount(aggField, fnSel.value === 'count' ? h('option', { value: '' }, '(rows)') : null, numeric.filter((f) => f.type !== 'object' && f.type !== 'array').map((f) => h('option', { value: f.name }, f.name)));
    const s = fs.find((f) => f.type === 'string' && !f.name.startsWith('_'));
    if (s) groupSel.value = s.name;
  }
  function build() {
    const q = { schema: modelSel.value };
    const agg = { fn: fnSel.value };
    if (aggField.value) agg.field = aggField.value;
    if (groupSel.value) q.group_by = [groupSel.value];
    q.aggregations = [agg];
    if (rangeSel.value) q.time_range = { from: rangeSel.value };
    if (limitIn.value) q.limit = Number(limitIn.value);
    json.value = JSON.stringify(q, null, 2);
  }
  async function run() {
    let q;
    try { q = JSON.parse(json.value); } catch (e) { err.textContent = 'The query is not valid JSON: ' + e.message; return; }
    err.textContent = '';
    try {
      const res = await api.post(`/projects/${pid}/query`, q);
      statsLine.textContent = `${fmtNum(res.stats.returned)} row(s) from ${fmtNum(res.stats.scanned)} scanned in ${res.stats.elapsed_ms} ms`;
      mount(resultBox, table(res.columns.map((c, i) => ({ label: `${c.name} (${c.type})`, num: c.type === 'integer' || c.type === 'number', get: (r) => (r[i] === null ? h('span', { class: 'muted' }, 'null') : typeof r[i] === 'object' ? JSON.stringify(r[i]) : String(r[i])) })), res.rows, { empty: 'No row.', caption: 'Query result' }));
      drawChart(chartBox, res);
    } catch (e) {
      err.textContent = e.fields && e.fields.length ? e.fields.map((f) => `${f.field} ${f.message}`).join('; ') : errorText(e);
    }
  }
  [modelSel, fnSel].forEach((s) => s.addEventListener('change', () => { fillFields(); build(); }));
  [groupSel, aggField, rangeSel, limitIn].forEach((s) => s.addEventListener('change', build));
  fillFields();
  build();
  const builder = h('form', { class: 'card', onsubmit: (e) => { e.preventDefault(); run(); } },
    h('h2', {}, 'Builder'),
    h('div', { class: 'grid3' }, labelled('Model', modelSel), labelled('Group by', groupSel), labelled('Time range', rangeSel), labelled('Aggregate', fnSel), labelled('Of field', aggField), labelled('Limit', limitIn)),
    h('div', { class: 'field' }, h('label', { for: 'pg-json' }, 'Query (JSON: edit freely, the builder rewrites it)'), json),
    err, h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary', id: 'pg-run' }, 'Run query'), h('span', { class: 'muted small' }, 'Ctrl+Enter runs it')));
  json.addEventListener('keydown', (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); } });
  mount(ctx.el, pageHead('Playground'), h('div', { class: 'grid2' }, builder, h('div', { class: 'card' }, h('h2', {}, 'Chart'), chartBox)), h('h2', {}, 'Rows'), statsLine, resultBox);
  chartPlaceholder(chartBox, 300);
}

/** drawChart picks a chart for a result: a time series when the first column is a
 * timestamp, bars when it is a category, one series per numeric column. */
function drawChart(box, res) {
  const numeric = res.columns.map((c, i) => [c, i]).filter(([c]) => c.type === 'integer' || c.type === 'number');
  if (!res.rows.length || !numeric.length) { chartPlaceholder(box, 300); return; }
  const first = res.columns[0];
  const series = numeric.filter(([, i]) => i !== 0).slice(0, 8);
  if (!series.length) { chartPlaceholder(box, 300); return; }
  if (first.type === 'timestamp') {
    const rows = res.rows.filter((r) => r[0] !== null).sort((a, b) => (a[0] < b[0] ? -1 : 1));
    renderChart(box, { type: 'line', xType: 'time', x: rows.map((r) => r[0]), series: series.map(([c, i]) => ({ name: c.name, values: rows.map((r) => r[i]) })), height: 300, title: `${series.map(([c]) => c.name).join(', ')} over ${first.name}` });
  } else {
    const rows = res.rows.slice(0, 50);
    renderChart(box, { type: 'bar', xType: 'category', x: rows.map((r) => (r[0] === null ? 'null' : String(r[0]))), series: series.map(([c, i]) => ({ name: c.name, values: rows.map((r) => r[i]) })), height: 300, title: `${series.map(([c]) => c.name).join(', ')} by ${first.name}` });
  }
}
