// A tiny accessible SVG chart: line or grouped bars, no dependencies, no style attributes
// (the console runs under a strict CSP). Colours come from CSS classes: series-0 … series-7,
// chart-axis, chart-grid, chart-label, chart-line, chart-bar, chart-point, chart-legend,
// chart-empty. Every chart also gets a visually hidden data table for screen readers.

const NS = 'http://www.w3.org/2000/svg';
const SERIES_CLASSES = 8;
const CHAR = 6.5; // rough width of an 11px label character, for layout only
const FALLBACK_WIDTH = 600;

function svgEl(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}
const tooltip = (text) => svgEl('title', {}, text);
const round = (v) => Number(v.toPrecision(12));

/**
 * niceTicks returns about count round tick values covering [min, max]: steps of 1, 2, 2.5 or
 * 5 times a power of ten, the smallest step that gives at most count + 1 ticks (so 4 to 6
 * ticks for the default 5). Pure; min > max is swapped, equal or non-finite ends are widened.
 */
export function niceTicks(min, max, count = 5) {
  min = Number(min); max = Number(max);
  if (!Number.isFinite(min) && !Number.isFinite(max)) { min = 0; max = 1; }
  if (!Number.isFinite(min)) min = Math.min(0, max);
  if (!Number.isFinite(max)) max = Math.max(0, min);
  if (min > max) [min, max] = [max, min];
  if (min === max) {
    const pad = min === 0 ? 1 : Math.abs(min) / 2;
    if (min >= 0 && min - pad < 0) { max = min + pad; min = 0; } else { min -= pad; max += pad; }
  }
  count = Math.max(2, Math.floor(Number(count) || 5));
  const span = max - min;
  let e = Math.floor(Math.log10(span / count)) - 1;
  for (let guard = 0; guard < 40; guard++, e++) {
    for (const m of [1, 2, 2.5, 5]) {
      const step = round(m * 10 ** e);
      const lo = Math.floor(round(min / step)); const hi = Math.ceil(round(max / step));
      if (hi - lo + 1 <= count + 1) return Array.from({ length: hi - lo + 1 }, (_, i) => round((lo + i) * step));
    }
  }
  return [min, max];
}

// decimals is how many decimals x shows (0.25 → 2, 1e-7 → 7).
function decimals(x) {
  const [mant, exp] = String(x).split('e');
  return Math.max(0, ((mant.split('.')[1] || '').length) - Number(exp || 0));
}

/** fmtTick formats a y tick: 12.5k, 1.25M, 0.25. All ticks share one unit (chosen by the
 * largest, top) and their step's decimals. */
function fmtTick(v, step, top) {
  if (v === 0) return '0';
  const a = Math.abs(top);
  const short = (x, unit) => `${Number(x.toFixed(Math.min(3, decimals(round(step / (unit === 'B' ? 1e9 : unit === 'M' ? 1e6 : 1e3))))))}${unit}`;
  if (a >= 1e9) return short(v / 1e9, 'B');
  if (a >= 1e6) return short(v / 1e6, 'M');
  if (a >= 1e4) return short(v / 1e3, 'k');
  return v.toFixed(Math.min(12, decimals(step)));
}

/** fmtValue formats a data value for tooltips and the table: 1,234.5. */
const fmtValue = (v) => v.toLocaleString('en-US', { maximumFractionDigits: 6 });

const pad2 = (n) => String(n).padStart(2, '0');
function toTime(x) {
  if (x instanceof Date) return x.getTime();
  if (typeof x === 'number') return x;
  const t = Date.parse(String(x));
  return Number.isFinite(t) ? t : NaN;
}
function fmtTime(ms, long) {
  const d = new Date(ms);
  const hm = `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}`;
  const md = `${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())}`;
  return long === 'full' ? `${d.getUTCFullYear()}-${md} ${hm} UTC` : long ? md : hm;
}
function truncate(s, max) {
  s = String(s);
  return s.length <= max ? s : max <= 1 ? '…' : s.slice(0, max - 1) + '…';
}

function seriesStats(values) {
  const nums = values.filter((v) => typeof v === 'number' && Number.isFinite(v));
  if (!nums.length) return null;
  const last = [...values].reverse().find((v) => typeof v === 'number' && Number.isFinite(v));
  return { min: nums.reduce((a, v) => Math.min(a, v)), max: nums.reduce((a, v) => Math.max(a, v)), last, n: nums.length };
}

/** chartPlaceholder reserves the chart's box (same svg, same height) with an empty-state message. */
export function chartPlaceholder(container, height = 240, message = 'No data yet') {
  const h = Math.max(40, Number(height) || 240);
  const w = container.clientWidth || FALLBACK_WIDTH;
  const svg = svgEl('svg', { viewBox: `0 0 ${w} ${h}`, width: '100%', height: h, role: 'img', 'aria-label': message, preserveAspectRatio: 'xMidYMid meet', focusable: 'false' },
    svgEl('text', { class: 'chart-empty', x: w / 2, y: h / 2, 'text-anchor': 'middle', 'dominant-baseline': 'middle' }, message));
  svg.style.display = 'block';
  container.replaceChildren(svg);
  return svg;
}

/**
 * renderChart replaces container's children with an SVG chart and a screen-reader table.
 * spec: {type: 'line'|'bar', x: [...], xType: 'time'|'category', series: [{name, values}],
 * yLabel?, height? (240), title}. Time x values are ISO strings, Dates or epoch ms, shown in UTC.
 */
export function renderChart(container, spec) {
  const height = Math.max(80, Number(spec.height) || 240);
  const type = spec.type === 'bar' ? 'bar' : 'line';
  const xs = Array.isArray(spec.x) ? spec.x : [];
  const series = (Array.isArray(spec.series) ? spec.series : []).map((s, i) => ({
    name: s && s.name != null ? String(s.name) : `series ${i + 1}`,
    values: xs.map((_, k) => { const v = s && Array.isArray(s.values) ? s.values[k] : null; return typeof v === 'number' && Number.isFinite(v) ? v : null; }),
    cls: `series-${i % SERIES_CLASSES}`,
  }));
  const title = String(spec.title || 'Chart');
  const all = series.flatMap((s) => s.values).filter((v) => v !== null);
  if (!xs.length || !all.length) return chartPlaceholder(container, height);

  // x: times when every x parses, else categories
  const times = spec.xType === 'time' ? xs.map(toTime) : null;
  const isTime = !!times && times.every(Number.isFinite);
  const span = isTime ? times[times.length - 1] - times[0] : 0;
  const xLabel = (k) => (isTime ? fmtTime(times[k], Math.abs(span) > 2 * 864e5) : String(xs[k]));
  const xFull = (k) => (isTime ? fmtTime(times[k], 'full') : String(xs[k]));

  // y: 0-based for bars, and for lines of non-negative data that do not sit far above 0
  // (a constant non-negative series too)
  let lo = all.reduce((a, v) => Math.min(a, v), Infinity); let hi = all.reduce((a, v) => Math.max(a, v), -Infinity);
  if (type === 'bar' || (lo >= 0 && (lo <= hi / 2 || lo === hi))) { lo = Math.min(0, lo); hi = Math.max(0, hi); }
  let ticks = niceTicks(lo, hi, 5);
  if (all.every(Number.isInteger) && ticks[1] - ticks[0] < 1) ticks = niceTicks(lo, lo + 4, 5); // counts: no 0.2 ticks
  const y0 = ticks[0]; const y1 = ticks[ticks.length - 1];
  const step = ticks.length > 1 ? ticks[1] - ticks[0] : 1;
  const top = Math.max(Math.abs(y0), Math.abs(y1));
  const tickText = ticks.map((t) => fmtTick(t, step, top));

  // layout
  const width = container.clientWidth || FALLBACK_WIDTH;
  const legendItems = series.length > 1 ? series.map((s) => ({ s, w: 14 + Math.min(s.name.length, 24) * CHAR + 14 })) : [];
  const rows = [];
  for (const it of legendItems) {
    const row = rows[rows.length - 1];
    if (row && row.w + it.w <= width - 16) { row.items.push(it); row.w += it.w; } else rows.push({ items: [it], w: it.w });
  }
  const yLabelSpace = spec.yLabel ? 16 : 0;
  const m = { top: 10 + rows.length * 16, right: 12, bottom: 24, left: 10 + yLabelSpace + Math.max(...tickText.map((t) => t.length)) * CHAR + 6 };
  const pw = Math.max(10, width - m.left - m.right);
  const ph = Math.max(10, height - m.top - m.bottom);
  const Y = (v) => m.top + ph - ((v - y0) / (y1 - y0 || 1)) * ph;
  const n = xs.length;
  const band = pw / n;
  const X = (k) => (type === 'line' && isTime && span > 0 ? m.left + ((times[k] - times[0]) / span) * pw : m.left + band * (k + 0.5));

  const svg = svgEl('svg', { viewBox: `0 0 ${width} ${height}`, width: '100%', height, role: 'img', preserveAspectRatio: 'xMidYMid meet', focusable: 'false',
    'aria-label': `${title}. ${summary(type, series, xs.length, xFull)}` });
  svg.style.display = 'block';

  // grid, y ticks, axes
  const grid = svgEl('g', { class: 'chart-grid-lines' });
  ticks.forEach((t, i) => {
    const y = Y(t);
    grid.append(svgEl('line', { class: 'chart-grid', x1: m.left, x2: m.left + pw, y1: y, y2: y }));
    grid.append(svgEl('text', { class: 'chart-label', x: m.left - 6, y, 'text-anchor': 'end', dy: '0.32em' }, tickText[i]));
  });
  svg.append(grid);
  if (spec.yLabel) {
    const cy = m.top + ph / 2;
    svg.append(svgEl('text', { class: 'chart-label', x: 11, y: cy, 'text-anchor': 'middle', transform: `rotate(-90 11 ${cy})` }, truncate(spec.yLabel, Math.floor(ph / CHAR))));
  }
  const baseY = Y(y0 <= 0 && y1 >= 0 ? 0 : y0);
  svg.append(svgEl('line', { class: 'chart-axis', x1: m.left, x2: m.left, y1: m.top, y2: m.top + ph }));
  svg.append(svgEl('line', { class: 'chart-axis', x1: m.left, x2: m.left + pw, y1: baseY, y2: baseY }));

  // x ticks: every k-th point so labels do not collide
  const longest = xs.reduce((a, _, k) => Math.max(a, xLabel(k).length), 0);
  const every = Math.max(1, Math.ceil(n / Math.max(1, Math.floor(pw / Math.max(40, Math.min(longest, 14) * CHAR + 10)))));
  const xg = svgEl('g', { class: 'chart-x-ticks' });
  for (let k = 0; k < n; k += every) {
    const x = X(k);
    xg.append(svgEl('line', { class: 'chart-axis', x1: x, x2: x, y1: m.top + ph, y2: m.top + ph + 4 }));
    const full = xLabel(k);
    const shown = isTime ? full : truncate(full, Math.max(2, Math.floor((band * every - 4) / CHAR)));
    const half = (shown.length * CHAR) / 2; // keep edge labels inside the box
    const anchor = x + half > width - 2 ? 'end' : x - half < 2 ? 'start' : 'middle';
    const tx = anchor === 'end' ? Math.min(x + 4, width - 2) : anchor === 'start' ? Math.max(x - 4, 2) : x;
    xg.append(svgEl('text', { class: 'chart-label', x: tx, y: m.top + ph + 16, 'text-anchor': anchor }, shown, shown !== full ? tooltip(full) : null));
  }
  svg.append(xg);

  // data
  const plot = svgEl('g', { class: 'chart-data' });
  if (type === 'bar') {
    const group = band * 0.8; const bw = group / series.length;
    series.forEach((s, si) => {
      const g = svgEl('g', { class: s.cls });
      s.values.forEach((v, k) => {
        if (v === null) return;
        const ya = Y(Math.max(v, 0 >= y0 && 0 <= y1 ? 0 : y0)); const yb = Y(Math.min(v, 0 >= y0 && 0 <= y1 ? 0 : y0));
        g.append(svgEl('rect', { class: `chart-bar ${s.cls}`, x: m.left + band * k + band * 0.1 + si * bw, y: Math.min(ya, yb), width: Math.max(1, bw - (series.length > 1 ? 1 : 0)), height: Math.max(v === 0 ? 0 : 1, Math.abs(yb - ya)) },
          tooltip(`${s.name}, ${xFull(k)}: ${fmtValue(v)}`)));
      });
      plot.append(g);
    });
  } else {
    series.forEach((s) => {
      const g = svgEl('g', { class: s.cls });
      let d = ''; let pen = false;
      s.values.forEach((v, k) => {
        if (v === null) { pen = false; return; }
        d += `${pen ? 'L' : 'M'}${round(X(k))} ${round(Y(v))}`;
        pen = true;
      });
      g.append(svgEl('path', { class: `chart-line ${s.cls}`, d, fill: 'none' }));
      const r = n > 60 ? 1.5 : 2.5;
      s.values.forEach((v, k) => {
        if (v === null) return;
        g.append(svgEl('circle', { class: `chart-point ${s.cls}`, cx: round(X(k)), cy: round(Y(v)), r }, tooltip(`${s.name}, ${xFull(k)}: ${fmtValue(v)}`)));
      });
      plot.append(g);
    });
  }
  svg.append(plot);

  // legend (inside the svg, so the box keeps its height)
  if (rows.length) {
    const lg = svgEl('g', { class: 'chart-legend' });
    rows.forEach((row, ri) => {
      let x = m.left;
      const y = 4 + ri * 16;
      for (const it of row.items) {
        lg.append(svgEl('rect', { class: `chart-swatch ${it.s.cls}`, x, y: y + 2, width: 10, height: 10 }));
        const label = truncate(it.s.name, 24);
        lg.append(svgEl('text', { class: 'chart-label', x: x + 14, y: y + 7, dy: '0.32em' }, label, label !== it.s.name ? tooltip(it.s.name) : null));
        x += it.w;
      }
    });
    svg.append(lg);
  }

  container.replaceChildren(svg, dataTable(title, spec, series, xs, xFull, isTime));
  return svg;
}

function summary(type, series, n, xFull) {
  const parts = series.map((s) => {
    const st = seriesStats(s.values);
    return st ? `${s.name}: min ${fmtValue(st.min)}, max ${fmtValue(st.max)}, latest ${fmtValue(st.last)}` : `${s.name}: no data`;
  });
  const range = n > 1 ? ` from ${xFull(0)} to ${xFull(n - 1)}` : n === 1 ? ` at ${xFull(0)}` : '';
  return `${type === 'bar' ? 'Bar' : 'Line'} chart of ${series.length} series over ${n} point${n === 1 ? '' : 's'}${range}. ${parts.join('; ')}.`;
}

function dataTable(title, spec, series, xs, xFull, isTime) {
  const el = (tag, text) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; };
  const table = el('table');
  table.className = 'sr-only';
  table.append(el('caption', title));
  const head = el('tr');
  const th = (text) => { const c = el('th', text); c.setAttribute('scope', 'col'); return c; };
  head.append(th(isTime ? 'Time (UTC)' : 'Category'), ...series.map((s) => th(spec.yLabel ? `${s.name} (${spec.yLabel})` : s.name)));
  const thead = el('thead'); thead.append(head);
  const tbody = el('tbody');
  xs.forEach((_, k) => {
    const tr = el('tr');
    const rh = el('th', xFull(k)); rh.setAttribute('scope', 'row');
    tr.append(rh, ...series.map((s) => el('td', s.values[k] === null ? 'no data' : fmtValue(s.values[k]))));
    tbody.append(tr);
  });
  table.append(thead, tbody);
  return table;
}
