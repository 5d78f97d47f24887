// Discovery: open a session for an ingest client, watch samples arrive, review the inferred
// fields, accept (create or widen the model) or discard.
import * as api from '../api.js';
import { h, mount, form, table, pageHead, fmtTime, statusBadge, toast, dialog, confirm, errorText } from '../ui.js';

export async function list(ctx) {
  const pid = ctx.params.pid;
  const [rows, clients] = await Promise.all([api.list(`/discovery-sessions?project_id=${pid}`), api.list(`/ingest-clients?project_id=${pid}`)]);
  const open = () => {
    const d = dialog('New discovery session', form([
      { name: 'ingest_client_id', label: 'Ingest client', type: 'select', options: clients.map((c) => ({ value: c.id, label: c.name })), required: true },
      { name: 'model_key', label: 'Model key', required: true, placeholder: 'signups', help: 'A new model to create, or an existing one to widen with the fields it lacks.' },
    ], { submit: 'Open session', onSubmit: async (v) => { const s = await api.post('/discovery-sessions', v); d.close(); ctx.navigate(`/p/${pid}/discovery/${s.id}`); } }), []);
  };
  mount(ctx.el, pageHead('Discovery', clients.length ? h('button', { class: 'primary', onclick: open }, 'New session') : null),
    h('p', { class: 'muted' }, 'Let the data describe itself: while a session waits, what the client sends to /discover is captured and its fields inferred.'),
    clients.length ? null : h('div', { class: 'notice' }, 'Discovery listens to an ingest client: ', h('a', { href: `/p/${pid}/ingest-clients` }, 'create one'), ' first.'),
    table([
      { label: 'Model', get: (s) => h('a', { href: `/p/${pid}/discovery/${s.id}` }, s.model_key) },
      { label: 'Client', get: (s) => (clients.find((c) => c.id === s.ingest_client_id) || { name: s.ingest_client_id }).name },
      { label: 'State', get: (s) => statusBadge(s.state) },
      { label: 'Samples', num: true, get: (s) => s.samples },
      { label: 'Opened', get: (s) => fmtTime(s.created_at) },
    ], rows, { empty: 'No session yet.' }));
}

export async function detail(ctx) {
  const pid = ctx.params.pid;
  const id = ctx.params.id;
  const head = h('div', {});
  const fields = h('div', { 'aria-live': 'polite' });
  const preview = h('div', {});
  mount(ctx.el, head, h('h2', {}, 'Inferred fields'), fields, h('h2', {}, 'Latest samples'), preview);
  let stopped = false;
  async function refresh() {
    const s = await api.get('/discovery-sessions/' + id);
    const waiting = s.state === 'waiting';
    const act = (what) => async () => {
      if (what === 'discard' && !(await confirm('Discard session', 'Discard what was captured? Models stay as they are.', 'Discard'))) return;
      try {
        const out = await api.post(`/discovery-sessions/${id}/${what}`);
        toast(what === 'accept' ? `Model ${out.model.key} saved` : 'Session discarded');
        if (what === 'accept') ctx.navigate(`/p/${pid}/models/${out.model.id}`);
        else refresh();
      } catch (e) { toast(errorText(e), 'bad'); }
    };
    mount(head, h('div', { class: 'page-head' }, h('h1', {}, `Discovery: ${s.model_key}`), statusBadge(s.state),
      waiting ? h('button', { onclick: act('discard') }, 'Discard') : null,
      waiting ? h('button', { class: 'primary', onclick: act('accept'), disabled: !s.samples }, 'Accept fields') : null),
    h('p', { class: 'muted' }, waiting ? `Listening: ${s.samples} sample(s) so far. Send records to /discover with this client's credential; this page updates by itself.` : `Session ${s.state}: ${s.samples} sample(s).`),
    s.fields_dropped || s.preview_skipped ? h('p', { class: 'small muted' }, `${s.fields_dropped} value(s) of untracked fields, ${s.preview_skipped} sample(s) too large to preview.`) : null);
    mount(fields, table([
      { label: 'Field', get: (f) => f.name },
      { label: 'Type', get: (f) => h('span', {}, f.type, f.mixed ? h('span', { class: 'badge warn' }, ' mixed') : null) },
      { label: 'Seen in', num: true, get: (f) => `${Math.round(f.seen_ratio * 100)} %` },
      { label: 'Required', get: (f) => (f.required ? 'yes' : 'no') },
    ], s.fields || [], { empty: 'No sample yet.' }));
    mount(preview, (s.preview || []).length ? h('pre', { tabindex: '0' }, s.preview.map((p) => JSON.stringify(p)).join('\n')) : h('p', { class: 'muted' }, 'Nothing to preview.'));
    if (waiting && !stopped) timer = setTimeout(() => refresh().catch(() => {}), 2000);
  }
  let timer = 0;
  await refresh();
  return () => { stopped = true; clearTimeout(timer); };
}
