// A deterministic reader that turns a sentence ("errors from checkout slower than 500 ms")
// into an alert draft over the project's governed fields. No network, no clock, no
// randomness: the same text and metadata always give the same draft. It only proposes;
// the editor shows what it understood and what it ignored, and the server validates.
//
// Pipeline: tokenize → pick the model → split into clauses → read each clause left to
// right with phrase matchers (field comparisons, "errors", "from X", "slower than N", ...)
// → coerce values to the field's type. Anything no matcher takes goes to `ignored`.

const words = (s) => s.split('|').map((p) => p.split(' '));
const set = (s) => new Set(s.split(' '));

// Comparator phrases, matched longest first. exists/not_exists take no value.
const COMPARATORS = Object.entries({
  gt: 'over|above|greater than|more than|higher than|larger than|bigger than|exceeds|exceed|exceeding|is over|is above|is greater than|is more than|is higher than|is larger than|is bigger than|>|gt|after|is after|later than|is later than',
  gte: 'at least|>=|≥|no less than|is at least|is no less than|greater than or equal to|is greater than or equal to|gte|not below|not under|is not below|is not under|since|on or after',
  lt: 'under|below|less than|fewer than|lower than|smaller than|<|is under|is below|is less than|is fewer than|is lower than|is smaller than|lt|before|is before|earlier than|is earlier than',
  lte: 'at most|<=|≤|no more than|is at most|is no more than|less than or equal to|is less than or equal to|lte|not above|not over|is not above|is not over|up to|until|on or before',
  eq: 'is|equals|equal to|is equal to|=|==|eq|is exactly',
  neq: "is not|isn't|not|!=|<>|≠|other than|is other than|not equal to|is not equal to|does not equal|doesn't equal|neq|is different from",
  contains: 'contains|contain|containing|includes|include|including|mentions|mention|mentioning|is like|like',
  not_contains: "does not contain|doesn't contain|not containing|does not include|doesn't include|does not mention|doesn't mention|excludes|excluding",
  starts_with: 'starts with|start with|starting with|begins with|begin with|beginning with|is prefixed with|prefixed with',
  ends_with: 'ends with|end with|ending with|is suffixed with',
  in: 'in|is in|one of|is one of|any of|is any of|among|is among',
  not_in: 'not in|is not in|none of|is none of|not one of|is not one of|not any of|is not any of',
  matches: 'matches|match|matching|matches regex|matches pattern|matches the pattern|=~|~',
  exists: "is set|is present|exists|exist|present|is not empty|is not null|is not missing|isn't empty|isn't null|isn't missing|is filled in|is filled|is provided|is given",
  not_exists: "isn't set|isn't present|is missing|is empty|is not set|is unset|is null|is absent|is blank|missing|empty|not set|unset|absent|does not exist|doesn't exist|is not present",
  between: 'between|is between',
}).flatMap(([op, s]) => words(s).map((w) => ({ op, w }))).sort((a, b) => b.w.length - a.w.length);
for (const op of ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'contains', 'not_contains', 'starts_with', 'ends_with', 'in', 'not_in', 'matches', 'exists', 'not_exists']) COMPARATORS.push({ op, w: [op] });
const NUMERIC_OPS = set('gt gte lt lte');
const OR_MORE = { more: 'gte', above: 'gte', greater: 'gte', higher: 'gte', over: 'gte', less: 'lte', fewer: 'lte', below: 'lte', lower: 'lte', under: 'lte' };
const SYM = { eq: '=', neq: '!=', gt: '>', gte: '>=', lt: '<', lte: '<=', contains: 'contains', not_contains: 'does not contain', starts_with: 'starts with', ends_with: 'ends with', in: 'in', not_in: 'not in', matches: 'matches', exists: 'exists', not_exists: 'is missing' };

const SEVERITIES = words('page me|sev1|sev 1|sev-1|p1|critical|urgent|urgently|high priority|sev2|sev 2|p2|warning|warnings|warn|sev3|sev 3|p3|notify me|fyi|info|informational|low priority')
  .map((w) => ({ w, sev: /^(page|sev1|sev-1|p1|critical|urgent|urgently|high)$/.test(w[0]) || w.join(' ') === 'sev 1' ? 'critical'
    : /^(sev2|p2|warning|warnings|warn)$/.test(w[0]) || w.join(' ') === 'sev 2' ? 'warning' : 'info' })).sort((a, b) => b.w.length - a.w.length);
const RANK = { info: 1, warning: 2, critical: 3 };

const FILLER = set("alert alerts alerting me us my when whenever if tell about notify notification notifications send any all every each record records event events row rows entry entries item items where the a an there there's is are was were be been please let know i we want would like to get show watch monitor that which who it its them they this these those new something happens happen occurs occur do does just only also then some and or with having has have whose , ; : ( ) for of");
const JOINERS = set('and or , ; : with where when whenever if whose having but');
const CONTINUE = set('and or ,'); // joiners that may continue a value list
const LIST_KEYS = set("in of from on at for via is = == equals not isn't != neq eq");
const STOP = set('from slower faster quicker longer shorter taking took');
const ERROR_WORDS = { error: 'error', errors: 'error', errored: 'error', erroring: 'error', failed: 'failed', failing: 'failed', fail: 'failed', fails: 'failed', failure: 'failure', failures: 'failure' };
const ARTICLES = set('a an the any');
const PREPS = set('from on in at via for');
const NOT_A_SOURCE = set('last past next this that every each today yesterday now week hour minute day month year the a an');
const ENV_VALUES = set('prod production staging stage dev development test testing qa live sandbox preprod');
// env/environment fields take only environment names (ENV_VALUES); country is last, region next to last.
const SOURCE_PREFS = 'service app application source component system host hostname team tenant site origin cluster zone datacenter namespace provider vendor gateway merchant shop store channel customer region country'.split(' ');
const ERROR_PREFS = 'status level severity outcome result state'.split(' ');
const ERROR_BOOLS = set('error is_error has_error errored failed is_failed has_failed failure is_failure');
const DURATION_PREFS = 'duration latency response_time elapsed took time'.split(' ');
const AMOUNT_PREFS = 'amount total price value sum cost revenue count quantity'.split(' ');
const TIME_UNITS = { ns: 1e-6, nanos: 1e-6, us: 1e-3, 'µs': 1e-3, micros: 1e-3, microsecond: 1e-3, microseconds: 1e-3, ms: 1, msec: 1, millis: 1, millisecond: 1, milliseconds: 1, s: 1e3, sec: 1e3, secs: 1e3, second: 1e3, seconds: 1e3, m: 6e4, min: 6e4, mins: 6e4, minute: 6e4, minutes: 6e4, h: 36e5, hr: 36e5, hrs: 36e5, hour: 36e5, hours: 36e5, d: 864e5, day: 864e5, days: 864e5 };
const MULTIPLIERS = { k: 1e3, thousand: 1e3, m: 1e6, mn: 1e6, mio: 1e6, million: 1e6, b: 1e9, bn: 1e9, billion: 1e9 };
const NEUTRAL_UNITS = set('% percent eur euro euros usd dollar dollars gbp pound pounds $ € £');
const FIELD_UNITS = [[/_(ns|nanos|nanoseconds)$/, 1e-6], [/_(us|usec|micros|microseconds)$/, 1e-3], [/_(ms|msec|millis|milliseconds)$/, 1],
  [/_(s|sec|secs|seconds)$/, 1e3], [/_(min|mins|minutes)$/, 6e4], [/_(h|hr|hrs|hours)$/, 36e5]];

// ---- tokenizer ---------------------------------------------------------------------------

const QUOTES = { '"': '"', "'": "'", '“': '”', '‘': '’', '`': '`', '«': '»' };
const OPS = ['>=', '<=', '!=', '<>', '==', '=~', '=', '>', '<', '≥', '≤', '≠'];

/** tokenize splits text into words, quoted strings, /regex/ literals, operators and punctuation. */
function tokenize(text) {
  const out = [];
  const push = (kind, t, start, end) => out.push({ kind, t, low: kind === 'word' || kind === 'op' || kind === 'punct' ? t.toLowerCase().replace(/’/g, "'") : t, start, end });
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const prev = out[out.length - 1];
    if (/\s/.test(c)) { i++; continue; }
    if (c === '/' && prev && prev.kind === 'word' && /^match/.test(prev.low)) {
      let j = i + 1;
      while (j < text.length && (text[j] !== '/' || text[j - 1] === '\\')) j++;
      if (j < text.length) { push('regex', text.slice(i + 1, j), i, j + 1); i = j + 1; continue; }
    }
    if (QUOTES[c] && (i === 0 || /[\s(,;:=]/.test(text[i - 1]))) {
      const j = text.indexOf(QUOTES[c], i + 1);
      if (j > i) { push('quoted', text.slice(i + 1, j), i, j + 1); i = j + 1; continue; }
    }
    const op = OPS.find((o) => text.startsWith(o, i));
    if (op) { push('op', op, i, i + op.length); i += op.length; continue; }
    if (',;()'.includes(c) || (c === ':' && (i + 1 === text.length || /\s/.test(text[i + 1])))) { push('punct', c, i, i + 1); i++; continue; }
    let j = i;
    while (j < text.length && !/[\s;()<>=≥≤≠]/.test(text[j])) {
      if (text[j] === '!' && text[j + 1] === '=') break;
      if (text[j] === ':' && (j + 1 === text.length || /\s/.test(text[j + 1]))) break;
      if (text[j] === ',') { // a thousands separator stays inside the number: 1,000
        if (/\d$/.test(text.slice(i, j)) && /^\d{3}(?!\d)/.test(text.slice(j + 1))) { j += 4; continue; }
        break;
      }
      j++;
    }
    let w = text.slice(i, j);
    const trimmed = w.replace(/[.?!…]+$/, '');
    if (trimmed) w = trimmed;
    push('word', w, i, i + w.length);
    i = j;
  }
  return out;
}

// ---- names, plurals, fields --------------------------------------------------------------

const snake = (s) => String(s).replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase().replace(/[\s.-]+/g, '_');
const bare = (s) => snake(s).replace(/^_+/, '');
const stripUnit = (s) => FIELD_UNITS.reduce((acc, [re]) => acc.replace(re, ''), s);
function forms(s) { // the word and its plausible singulars
  const out = [s];
  if (s.endsWith('ies')) out.push(s.slice(0, -3) + 'y');
  if (s.endsWith('es')) out.push(s.slice(0, -2));
  if (s.endsWith('s') && !s.endsWith('ss')) out.push(s.slice(0, -1));
  return out.filter((f) => f.length > 1);
}
const sameName = (a, b) => forms(a).some((x) => forms(b).includes(x));

function findField(key, fields) {
  for (const name of [(f) => bare(f.name), (f) => stripUnit(bare(f.name))]) {
    const f = fields.find((fd) => sameName(key, name(fd)));
    if (f) return f;
  }
  return null;
}

/** fieldAt finds the longest run of words at toks[i] naming a field: "response time", "_client_id". */
function fieldAt(toks, i, fields) {
  for (let n = Math.min(4, toks.length - i); n >= 1; n--) {
    const run = toks.slice(i, i + n);
    if (run.some((t) => t.kind !== 'word')) continue;
    const f = findField(bare(run.map((t) => t.low).join('_')), fields);
    if (f) return { field: f, end: i + n };
  }
  return null;
}

function modelAt(toks, i, models) {
  for (let n = Math.min(3, toks.length - i); n >= 1; n--) {
    const run = toks.slice(i, i + n);
    if (run.some((t) => t.kind !== 'word')) continue;
    const key = bare(run.map((t) => t.low).join('_'));
    const m = models.find((md) => sameName(key, bare(md.key)) || sameName(key, bare(md.name || '')));
    if (m) return { model: m, end: i + n };
  }
  return null;
}

/** pickField picks the first field of the given types whose name best fits prefs. */
function pickField(fields, types, prefs) {
  const ok = fields.filter((f) => types.includes(f.type) && !f.system);
  const base = (f) => stripUnit(bare(f.name));
  for (const test of [(b, p) => b === p, (b, p) => b.split('_').includes(p), (b, p) => b.includes(p)]) {
    for (const p of prefs) {
      const f = ok.find((fd) => test(base(fd), p));
      if (f) return f;
    }
  }
  return null;
}

const fieldUnit = (f) => (FIELD_UNITS.find(([re]) => re.test(bare(f.name))) || [null, 1])[1];
const isNumeric = (f) => f.type === 'integer' || f.type === 'number';
const isDuration = (f) => isNumeric(f) && (/duration|latency|elapsed|took|time/.test(bare(f.name)) || FIELD_UNITS.some(([re]) => re.test(bare(f.name))));
const durationField = (fields) => pickField(fields.filter(isDuration), ['integer', 'number'], DURATION_PREFS) || fields.find((f) => isDuration(f) && !f.system) || null;

const VERB = { are: 'is', was: 'is', were: 'is', "aren't": "isn't", "wasn't": "isn't", "weren't": "isn't", "don't": "doesn't", 'do': 'does' };
function comparatorAt(toks, i, only) {
  const low = (t) => (t.kind === 'word' && VERB[t.low]) || t.low;
  for (const c of COMPARATORS) {
    if (only && !only.has(c.op)) continue;
    if (c.w.every((w, k) => toks[i + k] && toks[i + k].kind !== 'quoted' && toks[i + k].kind !== 'regex' && low(toks[i + k]) === w)) return { op: c.op, end: i + c.w.length };
  }
  return null;
}
const severityAt = (toks, i) => SEVERITIES.find((s) => s.w.every((w, k) => toks[i + k] && toks[i + k].kind === 'word' && toks[i + k].low === w)) || null;

// ---- values --------------------------------------------------------------------------------

/** quantity reads "1,000", "1k", "$5", "2.5s", "500 ms" as a number in the field's unit. */
function quantity(text, unitWord, field) {
  const m = /^([-+]?)[$€£]?(\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)([a-zµ%$€£]*)$/i.exec(text);
  if (!m) return { problem: `${field.name} needs a number, and "${text}" is not one` };
  let n = Number(m[2].replace(/,/g, '')) * (m[1] === '-' ? -1 : 1);
  const unit = (m[3] || unitWord || '').toLowerCase();
  const shown = unitWord ? `${text} ${unitWord}` : text;
  if (unit && isDuration(field) && TIME_UNITS[unit] !== undefined) n = Number((n * TIME_UNITS[unit] / fieldUnit(field)).toPrecision(12));
  else if (unit && MULTIPLIERS[unit] !== undefined) n = Number((n * MULTIPLIERS[unit]).toPrecision(12));
  else if (unit && TIME_UNITS[unit] !== undefined) return { problem: `${field.name} is not a duration, so "${shown}" does not fit it` };
  else if (unit && !NEUTRAL_UNITS.has(unit)) return { problem: `${field.name} needs a number, and "${shown}" is not one` };
  if (field.type === 'integer' && !Number.isSafeInteger(n)) return { problem: `${field.name} holds whole numbers, and "${shown}" is ${unit && !NEUTRAL_UNITS.has(unit) ? `${n} in its unit` : 'not one'}` };
  return { value: n };
}

function timestamp(text) {
  const m = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2})(:\d{2}(?:\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?$/i.exec(text);
  if (!m) return null;
  return `${m[1]}T${m[2] || '00:00'}${m[3] || ':00'}${(m[4] || 'Z').toUpperCase()}`;
}

/** coerce turns one value (its tokens) into the field's type. */
function coerce(field, vt, op) {
  const text = vt.map((t) => t.t).join(' ');
  if (field.type === 'string') return { value: text };
  if (isNumeric(field)) {
    const unit = vt.length === 2 && (TIME_UNITS[vt[1].low] !== undefined || MULTIPLIERS[vt[1].low] !== undefined || NEUTRAL_UNITS.has(vt[1].low)) ? vt[1].low : '';
    if (vt.length > 2 || (vt.length === 2 && !unit)) return { problem: `${field.name} needs a number, and "${text}" is not one` };
    return quantity(vt[0].t, unit, field);
  }
  if (field.type === 'boolean') {
    const b = { true: true, yes: true, y: true, on: true, 1: true, false: false, no: false, n: false, off: false, 0: false }[text.toLowerCase()];
    return b === undefined ? { problem: `${field.name} is true or false, not "${text}"` } : { value: b };
  }
  if (field.type === 'timestamp') {
    const ts = timestamp(vt.length === 2 && /^\d/.test(vt[1].t) ? `${vt[0].t}T${vt[1].t}` : text);
    return ts ? { value: ts } : { problem: `${field.name} needs a date like 2024-01-31 or an RFC 3339 timestamp, not "${text}"` };
  }
  return { problem: `${field.name} is ${field.type === 'array' ? 'an array' : 'an object'}: it can only be tested with exists or not_exists (${op} given)` };
}

/** valueAt reads the value tokens at j for a comparison on field: one value, or a list. A bare
 * string value runs to the clause's end, a stop word, a severity or the next "<field> <comparator>". */
function valueAt(toks, j, field, op, fields) {
  const nextComparison = (e) => { const f = fieldAt(toks, e, fields); return !!f && !!comparatorAt(toks, f.end); };
  const stop = (t) => t.kind === 'sep' || (t.kind === 'punct') || (t.kind === 'word' && STOP.has(t.low));
  const list = op === 'in' || op === 'not_in';
  const items = [];
  let k = j;
  if (toks[k] && toks[k].t === '(') k++;
  while (k < toks.length) {
    const t = toks[k];
    if (t.t === ')') { k++; break; }
    if (t.kind === 'sep' || t.t === ',' || (list && (t.low === 'and' || t.low === 'or' || t.low === 'nor'))) { k++; continue; }
    if (items.length && !toks[k - 1].kind.match(/sep|punct/) && !['and', 'or', 'nor'].includes(toks[k - 1].low)) break;
    let e = k + 1;
    if (t.kind === 'word' && STOP.has(t.low)) break;
    if (t.kind === 'word' || t.kind === 'op') {
      if (field.type === 'string' && op !== 'matches') {
        while (e < toks.length && toks[e].kind === 'word' && !stop(toks[e]) && !(list && /^(and|or|nor)$/.test(toks[e].low))
          && !severityAt(toks, e) && !nextComparison(e)) e++;
      } else if (toks[e] && toks[e].kind === 'word' && (isNumeric(field) || field.type === 'timestamp') && !STOP.has(toks[e].low)) {
        const u = toks[e].low;
        if (TIME_UNITS[u] !== undefined || MULTIPLIERS[u] !== undefined || NEUTRAL_UNITS.has(u) || (field.type === 'timestamp' && /^\d\d:\d\d/.test(u))) e++;
      }
    }
    items.push(toks.slice(k, e));
    k = e;
  }
  return { items, end: k };
}

// ---- the reader ----------------------------------------------------------------------------

const fmt = (v) => (Array.isArray(v) ? `[${v.map(fmt).join(', ')}]` : typeof v === 'string' ? JSON.stringify(v) : String(v));
const phrase = (ctx, toks, a, b) => ctx.text.slice(toks[a].start, toks[b - 1].end);

/** emit makes one condition, or a problem when the field's type does not take op or value. */
function emit(ctx, field, op, valueToks, from) {
  if (!(field.operators || ctx.operators[field.type] || []).includes(op)) {
    ctx.out.problems.push(`${field.name} (${field.type}) cannot be compared with "${op}" (from "${from}")`);
    return [];
  }
  let value = null;
  if (op !== 'exists' && op !== 'not_exists') {
    const vals = [];
    for (const vt of valueToks) {
      const r = typeof vt === 'object' && !Array.isArray(vt) ? vt : coerce(field, vt, op);
      if (r.problem) { ctx.out.problems.push(`${r.problem} (from "${from}")`); return []; }
      vals.push(r.value);
    }
    if (!vals.length) { ctx.out.problems.push(`${field.name}: no value given (from "${from}")`); return []; }
    if (vals.length > 1 && (op === 'eq' || op === 'neq')) op = op === 'eq' ? 'in' : 'not_in';
    if (vals.length > 1 && op !== 'in' && op !== 'not_in') { ctx.out.problems.push(`${field.name} ${SYM[op]} takes one value (from "${from}")`); return []; }
    value = op === 'in' || op === 'not_in' ? vals : vals[0];
    const lim = ctx.limits;
    if (op === 'matches' && lim.pattern_max_length && value.length > lim.pattern_max_length) { ctx.out.problems.push(`The pattern is longer than ${lim.pattern_max_length} characters (from "${from}")`); return []; }
    if (Array.isArray(value) && lim.list_max_values && value.length > lim.list_max_values) { ctx.out.problems.push(`A list holds at most ${lim.list_max_values} values (from "${from}")`); return []; }
  }
  const cond = { field: field.name, operator: op, value };
  ctx.out.understood.push(`${field.name} ${SYM[op]}${value === null ? '' : ' ' + fmt(value)} (from "${from}")`);
  return [cond];
}

const isCode = (t) => /^[A-Z]{2,3}$/.test(t.t); // NL, BE, IT, USA: values even where the word is filler
/** isBareValue says whether toks[j] can be a value by itself: quoted, or a word that is no field, model, keyword or filler. */
function isBareValue(ctx, toks, j) {
  const t = toks[j];
  if (t.kind === 'quoted') return true;
  if (t.kind !== 'word' || STOP.has(t.low) || ERROR_WORDS[t.low] || fieldAt(toks, j, ctx.fields) || modelAt(toks, j, ctx.models)) return false;
  return isCode(t) || (!FILLER.has(t.low) && !PREPS.has(t.low) && !JOINERS.has(t.low) && !comparatorAt(toks, j) && !severityAt(toks, j));
}

// Each matcher reads a phrase at toks[i] and returns {end, conds} or null.
const MATCHERS = [
  function fieldFirst(ctx, toks, i, cl) { // <field> <comparator> <value>, <field> is missing, ...
    const f = fieldAt(toks, i, ctx.fields);
    if (!f) return null;
    const { field } = f;
    let j = f.end;
    const cmp = comparatorAt(toks, j);
    const from = (end) => phrase(ctx, toks, i, end);
    if (cmp && (cmp.op === 'exists' || cmp.op === 'not_exists')) return { end: cmp.end, conds: emit(ctx, field, cmp.op, [], from(cmp.end)) };
    if (cmp && cmp.op === 'between') {
      const and = toks.findIndex((t, k) => k > cmp.end && t.low === 'and');
      if (and < 0) return null;
      const a = valueAt(toks.slice(0, and), cmp.end, field, 'gte', ctx.fields);
      const b = a.end === and ? valueAt(toks, and + 1, field, 'lte', ctx.fields) : null;
      if (!b || a.items.length !== 1 || b.items.length < 1) return null;
      const p = from(b.end);
      const [lo, hi] = [coerce(field, a.items[0], 'gte'), coerce(field, b.items[0], 'lte')]; // both or neither
      if (lo.problem || hi.problem) { ctx.out.problems.push(`${lo.problem || hi.problem} (from "${p}")`); return { end: b.end, conds: [] }; }
      return { end: b.end, conds: [...emit(ctx, field, 'gte', [lo], p), ...emit(ctx, field, 'lte', [hi], p)] };
    }
    if (toks[j] && (toks[j].low === 'with' || toks[j].low === 'without')) { // message with 'disk full' in it
      const k = toks.findIndex((t, n) => n > j + 1 && t.low === 'in' && toks[n + 1] && /^(it|them)$/.test(toks[n + 1].low));
      if (k > 0) return { end: k + 2, conds: emit(ctx, field, toks[j].low === 'with' ? 'contains' : 'not_contains', [toks.slice(j + 1, k)], from(k + 2)) };
    }
    if (!cmp && toks[j + 2] && toks[j + 1].low === 'or' && OR_MORE[toks[j + 2].low] && isNumeric(field)) { // retries 3 or more
      return { end: j + 3, conds: emit(ctx, field, OR_MORE[toks[j + 2].low], [[toks[j]]], from(j + 3)) };
    }
    if (cmp) {
      const v = valueAt(toks, cmp.end, field, cmp.op, ctx.fields);
      return { end: v.end, conds: emit(ctx, field, cmp.op, v.items, from(Math.max(v.end, cmp.end))) };
    }
    if (toks[j] && isBareValue(ctx, toks, j)) { // status 500, country NL: an implied "is", at the clause's end only
      const v = valueAt(toks, j, field, 'eq', ctx.fields);
      if (v.end === toks.length) return { end: v.end, conds: emit(ctx, field, 'eq', v.items, from(v.end)) };
    }
    if (field.type === 'boolean') return { end: j, conds: emit(ctx, field, 'eq', [{ value: true }], from(j)) };
    if (cl.withLead && cl.fresh) return { end: j, conds: emit(ctx, field, 'exists', [], from(j)) };
    return null;
  },

  function fieldLast(ctx, toks, i) { // has a coupon, without coupon, not paid, more than 3 retries, 3 or more retries
    const t = toks[i];
    const skip = (k) => (toks[k] && toks[k].kind === 'word' && ARTICLES.has(toks[k].low) ? k + 1 : k);
    let op = null; let k = i + 1;
    if (/^(has|have|having|with)$/.test(t.low) && toks[i + 1] && toks[i + 1].low === 'no') { op = 'not_exists'; k = i + 2; }
    else if (/^(has|have|having|with)$/.test(t.low)) op = 'exists';
    else if (/^(without|no|missing|lacking|lacks)$/.test(t.low)) op = 'not_exists';
    if (op) {
      const f = fieldAt(toks, skip(k), ctx.fields);
      if (f) return { end: f.end, conds: emit(ctx, f.field, op, [], phrase(ctx, toks, i, f.end)) };
      const m = toks.findIndex((x, n) => n > k && x.low === 'in' && fieldAt(toks, n + 1, ctx.fields));
      if (m > k && (t.low === 'with' || t.low === 'without')) { // with 'disk full' in message
        const g = fieldAt(toks, m + 1, ctx.fields);
        return { end: g.end, conds: emit(ctx, g.field, t.low === 'with' ? 'contains' : 'not_contains', [toks.slice(k, m)], phrase(ctx, toks, i, g.end)) };
      }
      return null;
    }
    if (t.low === 'not') {
      const f = fieldAt(toks, i + 1, ctx.fields);
      if (f && f.field.type === 'boolean') return { end: f.end, conds: emit(ctx, f.field, 'eq', [{ value: false }], phrase(ctx, toks, i, f.end)) };
      return null;
    }
    let cmp = comparatorAt(toks, i, NUMERIC_OPS);
    let v = i;
    if (!cmp && toks[i + 1] && toks[i + 1].low === 'or' && toks[i + 2]) { // 3 or more retries
      const o = OR_MORE[toks[i + 2].low];
      if (o) cmp = { op: o, end: i + 3, value: i };
    } else if (cmp) v = cmp.end;
    if (!cmp) return null;
    const vEnd = cmp.value === undefined ? v + 1 : i + 1;
    const fAt = cmp.value === undefined ? vEnd : cmp.end;
    const f = toks[v] && toks[v].kind === 'word' && /^[-+$€£]?[\d.]/.test(toks[v].t) ? fieldAt(toks, fAt, ctx.fields) : null;
    if (!f) return null;
    return { end: f.end, conds: emit(ctx, f.field, cmp.op, [toks.slice(v, vEnd)], phrase(ctx, toks, i, f.end)) };
  },

  function model(ctx, toks, i) { // orders, from orders
    const k = PREPS.has(toks[i].low) ? i + 1 : i;
    const m = modelAt(toks, k, ctx.models);
    if (!m) return null;
    const said = phrase(ctx, toks, i, m.end);
    if (m.model !== ctx.model) ctx.out.problems.push(`An alert watches one model: using "${ctx.model.key}", not "${m.model.key}" (from "${said}")`);
    else if (!ctx.modelSaid) { ctx.modelSaid = true; ctx.out.understood.push(`model: ${m.model.key} (from "${said}")`); }
    return { end: m.end, conds: [] };
  },

  function errors(ctx, toks, i) { // errors, failed, failures
    const value = toks[i].kind === 'word' ? ERROR_WORDS[toks[i].low] : undefined;
    if (!value) return null;
    const from = phrase(ctx, toks, i, i + 1);
    const b = ctx.fields.find((f) => f.type === 'boolean' && ERROR_BOOLS.has(bare(f.name)));
    if (b) return { end: i + 1, conds: emit(ctx, b, 'eq', [{ value: true }], from) };
    const s = pickField(ctx.fields, ['string'], ERROR_PREFS);
    return s ? { end: i + 1, conds: emit(ctx, s, 'eq', [{ value }], from) } : null;
  },

  function duration(ctx, toks, i) { // slower than 500 ms, taking more than 2s
    let k = /^(taking|took|takes|take|lasting|lasted|lasts|running|ran)$/.test(toks[i].low) ? i + 1 : i;
    let op = null;
    const slow = { slower: 'gt', longer: 'gt', faster: 'lt', quicker: 'lt', shorter: 'lt' }[toks[k] && toks[k].low];
    if (slow && toks[k + 1] && toks[k + 1].low === 'than') { op = slow; k += 2; } else if (k > i) {
      const c = comparatorAt(toks, k, NUMERIC_OPS);
      if (c) { op = c.op; k = c.end; }
    }
    if (!op || !toks[k] || !/^[-+]?[\d.]/.test(toks[k].t)) return null;
    const field = durationField(ctx.fields);
    if (!field) return null;
    const end = toks[k + 1] && TIME_UNITS[toks[k + 1].low] !== undefined ? k + 2 : k + 1;
    return { end, conds: emit(ctx, field, op, [toks.slice(k, end)], phrase(ctx, toks, i, end)) };
  },

  function source(ctx, toks, i) { // from checkout, on production, not from NL, from the checkout service
    let k = i; let op = 'eq';
    if (toks[k].low === 'not' && toks[k + 1] && PREPS.has(toks[k + 1].low)) { op = 'neq'; k++; }
    if (!PREPS.has(toks[k].low)) return null;
    k++;
    if (toks[k] && toks[k].low === 'the') k++;
    let field = null;
    const named = fieldAt(toks, k, ctx.fields); // from service checkout
    if (named && named.field.type === 'string' && toks[named.end] && toks[named.end].kind !== 'sep') { field = named.field; k = named.end; }
    const t = toks[k];
    if (!t || !(t.kind === 'quoted' || (t.kind === 'word' && (isCode(t) || (!NOT_A_SOURCE.has(t.low) && !FILLER.has(t.low))) && !/^[-+]?\d/.test(t.t) && !fieldAt(toks, k, ctx.fields)))) return null;
    const items = [[t]];
    let end = k + 1;
    while (toks[end] && toks[end].kind === 'sep' && toks[end + 1]) { items.push([toks[end + 1]]); end += 2; }
    if (!field && toks[end] && toks[end].kind === 'word') { // from the checkout service
      const kind = fieldAt(toks, end, ctx.fields);
      if (kind && kind.field.type === 'string') { field = kind.field; end = kind.end; }
    }
    const strings = ctx.fields.filter((f) => f.type === 'string');
    if (!field && t.t.startsWith('/')) field = pickField(strings, ['string'], ['path', 'route', 'url', 'uri', 'endpoint']);
    if (!field && ENV_VALUES.has(t.low)) field = pickField(strings, ['string'], ['env', 'environment', 'stage']);
    if (!field && /^[A-Z]{2}$/.test(t.t)) field = pickField(strings, ['string'], ['country', 'country_code']);
    if (!field) field = pickField(strings, ['string'], SOURCE_PREFS);
    if (!field) return null;
    return { end, conds: emit(ctx, field, op, items, phrase(ctx, toks, i, end)) };
  },

  function bareComparator(ctx, toks, i) { // over 1000 (the amount), over 2s (the duration)
    const c = comparatorAt(toks, i, NUMERIC_OPS);
    if (!c || !toks[c.end] || !/^[-+$€£]?[\d.]/.test(toks[c.end].t)) return null;
    const k = c.end;
    const attached = (/^[-+$€£]?[\d.,]+([a-zµ]+)$/i.exec(toks[k].t) || [])[1];
    const next = toks[k + 1] && toks[k + 1].low;
    const timeUnit = TIME_UNITS[(attached || '').toLowerCase()] !== undefined && !MULTIPLIERS[(attached || '').toLowerCase()] ? attached : (TIME_UNITS[next] !== undefined && next !== 'm' ? next : null);
    const field = timeUnit ? durationField(ctx.fields)
      : pickField(ctx.fields, ['integer', 'number'], AMOUNT_PREFS) || (() => { const n = ctx.fields.filter((f) => isNumeric(f) && !f.system && !isDuration(f)); return n.length === 1 ? n[0] : null; })();
    if (!field) return null;
    const end = next && (TIME_UNITS[next] !== undefined || MULTIPLIERS[next] !== undefined || NEUTRAL_UNITS.has(next)) ? k + 2 : k + 1;
    return { end, conds: emit(ctx, field, c.op, [toks.slice(k, end)], phrase(ctx, toks, i, end)) };
  },

  function severity(ctx, toks, i) { // critical, page me, as a warning, severity: info
    let k = i; let s = null;
    while (!(s = severityAt(toks, k)) && toks[k] && /^(as|severity|sev|priority|a|an|at|level)$/.test(toks[k].low) && k - i < 3) k++;
    if (!s) return null;
    if (!ctx.out.severity || RANK[s.sev] > RANK[ctx.out.severity]) ctx.out.severity = s.sev;
    ctx.out.understood.push(`severity: ${s.sev} (from "${phrase(ctx, toks, i, k + s.w.length)}")`);
    return { end: k + s.w.length, conds: [] };
  },
];

/** readClause runs the matchers over a clause; unmatched runs of words go to ignored. */
function readClause(ctx, cl) {
  const toks = cl.toks;
  const conds = [];
  let run = []; let held = [];
  const flush = () => { if (run.length) ctx.out.ignored.push(ctx.text.slice(run[0].start, run[run.length - 1].end)); run = []; held = []; };
  cl.fresh = true;
  for (let i = 0; i < toks.length;) {
    let r = null;
    for (const m of MATCHERS) if ((r = m(ctx, toks, i, cl))) break;
    if (r) { flush(); conds.push(...r.conds); i = r.end; cl.fresh = false; continue; }
    const t = toks[i];
    if (t.kind === 'sep' || t.kind === 'punct' || (t.kind === 'word' && FILLER.has(t.low))) { if (run.length && t.kind === 'word') held.push(t); i++; continue; }
    run.push(...held, t); held = []; cl.fresh = false; i++;
  }
  flush();
  return conds;
}

/** splitClauses cuts the tokens at joiners ("and", ",", "with", "when", ...), keeping value lists
 * ("in NL, BE or DE", "from checkout or payments") and fixed phrases ("starts with") whole. */
function splitClauses(toks, ctx) {
  const clauses = [];
  let cur = { toks: [], joiners: [] };
  let depth = 0;
  // loose: severity and error words may be values too (level is error or warning)
  const isValue = (t, loose) => t && (t.kind === 'quoted' || (t.kind === 'word' && (isCode(t) || (!FILLER.has(t.low) && !JOINERS.has(t.low) && !STOP.has(t.low)
    && !comparatorAt([t], 0) && (loose || (!ERROR_WORDS[t.low] && !severityAt([t], 0)))))));
  const keep = (i) => {
    const t = toks[i]; const prev = toks[i - 1]; const next = toks[i + 1];
    if (t.low === 'with') {
      if (prev && /^(starts?|starting|begins?|beginning|ends?|ending|prefixed|suffixed)$/.test(prev.low)) return true;
      const stopAt = toks.findIndex((x, n) => n > i && x.kind === 'punct');
      const seg = toks.slice(i + 1, stopAt < 0 ? toks.length : stopAt);
      return seg.some((x, n) => n > 0 && x.low === 'in' && seg[n + 1] && (/^(it|them)$/.test(seg[n + 1].low) || fieldAt(seg, n + 1, ctx.fields)));
    }
    if (t.low === 'and') { const b = cur.toks.map((x) => x.low).lastIndexOf('between'); return b >= 0 && !cur.toks.slice(b).some((x) => x.low === 'and'); }
    if (t.low === 'or' && next && next.low === 'equal') return true; // greater than or equal to
    const after = toks[i + 2]; // 3 or more [retries]
    return t.low === 'or' && !!next && !!OR_MORE[next.low] && (!after || JOINERS.has(after.low) || !!fieldAt(toks, i + 2, ctx.fields));
    return false;
  };
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (t.t === '(' && t.kind === 'punct') depth++;
    if (t.t === ')' && t.kind === 'punct') depth = Math.max(0, depth - 1);
    if (depth > 0 || !(t.kind === 'word' || t.kind === 'punct') || !JOINERS.has(t.low) || keep(i)) { cur.toks.push(t); continue; }
    let j = i;
    while (j < toks.length && (toks[j].kind === 'word' || toks[j].kind === 'punct') && JOINERS.has(toks[j].low) && toks[j].t !== '(' && toks[j].t !== ')' && !keep(j)) j++;
    const run = toks.slice(i, j);
    const lows = run.map((x) => x.low);
    // A list continues when the clause ends "<key> v1[, v2...]" and a single value follows.
    let p = cur.toks.length - 1;
    while (p >= 2 && cur.toks[p - 1].kind === 'sep') p -= 2;
    const sevList = lows.includes('or') && p >= 0 && cur.toks[p] && (severityAt(cur.toks, p) || ERROR_WORDS[cur.toks[p].low]); // level is error or warning
    const single = isValue(toks[j], sevList) && (j + 1 === toks.length || JOINERS.has(toks[j + 1].low) || toks[j + 1].t === ')')
      && !fieldAt(toks, j, ctx.fields) && !modelAt(toks, j, ctx.models);
    if (lows.every((w) => CONTINUE.has(w)) && single && p >= 1 && isValue(cur.toks[p], true) && LIST_KEYS.has(cur.toks[p - 1].low)) {
      cur.toks.push({ kind: 'sep', t: ',', low: ',', start: run[0].start, end: run[run.length - 1].end });
    } else {
      if (cur.toks.length) { clauses.push(cur); cur = { toks: [], joiners: [] }; }
      cur.joiners.push(...lows);
    }
    i = j - 1;
  }
  if (cur.toks.length) clauses.push(cur);
  for (const cl of clauses) cl.withLead = ['with', 'having'].includes(cl.joiners[cl.joiners.length - 1]);
  return clauses;
}

/** alertName makes a short title from the text: "Errors from checkout slower than 500 ms". */
function alertName(text) {
  const flat = String(text || '').replace(/\s+/g, ' ').trim();
  let s = flat.replace(/^(please\s+)?((alert|tell|notify|ping|warn|page)\s+(me|us)|let\s+(me|us)\s+know)\s+(when(ever)?|if|about|of|on)\s+/i, '')
    .replace(/^(any|all|every)\s+/i, '').replace(/[.!?,;:\s]+$/, '') || flat;
  if (s.length > 80) s = s.slice(0, 79).replace(/\s+\S*$/, '') + '…';
  return s ? s[0].toUpperCase() + s.slice(1) : 'New alert';
}

/**
 * parseAlertIntent reads text as an alert over metadata's models (GET /alerts/metadata).
 * Returns {model_key, conditions: [{field, operator, value}], match, severity, name,
 * understood, ignored, problems}. exists/not_exists conditions carry value null.
 */
export function parseAlertIntent(text, metadata, preferredModelKey) {
  text = String(text ?? '');
  const out = { model_key: null, conditions: [], match: 'all', severity: null, name: alertName(text), understood: [], ignored: [], problems: [] };
  const models = (metadata && Array.isArray(metadata.models) ? metadata.models : []).filter((m) => m && m.key);
  if (!models.length) { out.problems.push('This project has no models to alert on yet.'); return out; }
  const toks = tokenize(text);
  let model = null;
  for (let i = 0; i < toks.length && !model; i++) { // a model named in the text, unless it is a value or part of a field name
    if (i > 0 && LIST_KEYS.has(toks[i - 1].low) && !PREPS.has(toks[i - 1].low)) continue;
    const m = modelAt(toks, i, models);
    if (m && !models.some((md) => { const f = fieldAt(toks, i, md.fields || []); return f && f.end > m.end; })) model = m.model;
  }
  model = model || models.find((m) => m.key === preferredModelKey) || models[0];
  out.model_key = model.key;
  const ctx = { text, out, model, models, fields: model.fields || [], limits: metadata.limits || {}, operators: metadata.operators || {}, modelSaid: false };
  const kinds = []; const seen = new Set();
  let pending = [];
  for (const cl of splitClauses(toks, ctx)) {
    pending.push(...cl.joiners);
    const conds = readClause(ctx, cl).filter((c) => { const k = JSON.stringify(c); return !seen.has(k) && seen.add(k); });
    if (!conds.length) continue;
    conds.forEach((c, n) => { out.conditions.push(c); kinds.push(n === 0 && pending.includes('or') ? 'or' : 'and'); });
    pending = [];
  }
  const joins = kinds.slice(1);
  if (joins.length && joins.every((k) => k === 'or')) out.match = 'any';
  else if (joins.includes('or')) out.problems.push('Mixing "and" with "or" is not supported: every condition must hold (match all). Use separate alerts for the alternatives.');
  const max = ctx.limits.max_conditions;
  if (max && out.conditions.length > max) out.problems.push(`An alert holds at most ${max} conditions; this text gives ${out.conditions.length}.`);
  if (!out.conditions.length && toks.length && !out.problems.length) out.problems.push(`No condition found: name a field of ${model.key}, e.g. "${(ctx.fields.find((f) => !f.system) || { name: 'field' }).name} is …".`);
  return out;
}
