// Personal Management Tokens: the secret is shown once, at creation.
import * as api from '../api.js';
import { h, mount, form, table, pageHead, dialog, toast, confirm, fmtTime, statusBadge, secretBox } from '../ui.js';
import { state } from '../main.js';

const families = ['projects', 'models', 'warehouses', 'clients', 'analytics', 'security', 'alerts'];

export async function tokens(ctx) {
  const box = h('div', {});
  const ws = state.workspaces.find((w) => w.id === state.wsId);
  const writer = ws && ws.role !== 'member';
  const create = () => {
    const scopes = families.flatMap((f) => writer ? [f + ':read', f + ':write'] : [f + ':read']);
    const d = dialog('New Management Token', form([
      { name: 'name', label: 'Name', required: true, placeholder: 'ci' },
      { name: 'scopes', label: 'Scopes', type: 'checks', options: scopes, value: [], help: writer ? ':write does not imply :read: tick both where the automation reads too.' : 'As a member you may create read-only tokens.' },
      { name: 'project_ids', label: 'Projects (none ticked: every project of the workspace)', type: 'checks', options: state.projects.map((p) => ({ value: p.id, label: p.name })), value: [] },
      { name: 'expires_at', label: 'Expires', type: 'datetime', help: 'Optional; leave empty for a token that does not expire.' },
    ], {
      submit: 'Create token',
      onSubmit: async (v) => {
        const t = await api.post('/management-tokens', { ...v, workspace_id: state.wsId });
        mount(d.body, secretBox(t.token, 'the token'), h('p', {}, `Use it as `, h('code', {}, 'Authorization: Bearer <token>'), ' on /management/v1.'));
        await load();
      },
    }), [{ label: 'Done' }]);
  };
  async function act(t, what) {
    if (what === 'revoke' && !(await confirm('Revoke token', `Revoke ${t.name}? Anything using it stops working, for good.`, 'Revoke'))) return;
    try {
      if (what === 'revoke') await api.del('/management-tokens/' + t.id);
      else await api.post(`/management-tokens/${t.id}/${what}`);
      toast(`Token ${what}d`);
    } catch (e) { toast(e.message, 'bad'); }
    await load();
  }
  async function load() {
    const rows = await api.list('/management-tokens');
    mount(box, table([
      { label: 'Name', get: (t) => t.name },
      { label: 'Prefix', get: (t) => h('code', {}, t.prefix) },
      { label: 'Scopes', get: (t) => t.scopes.join(', ') },
      { label: 'Projects', get: (t) => (t.project_ids && t.project_ids.length ? t.project_ids.map((id) => (state.projects.find((p) => p.id === id) || { name: id }).name).join(', ') : 'all') },
      { label: 'State', get: (t) => statusBadge(t.revoked_at ? 'revoked' : t.enabled ? 'enabled' : 'disabled') },
      { label: 'Last used', get: (t) => fmtTime(t.last_used_at) },
      { label: 'Expires', get: (t) => fmtTime(t.expires_at) },
      { label: '', get: (t) => t.revoked_at ? null : h('span', { class: 'row' },
        h('button', { onclick: () => act(t, t.enabled ? 'disable' : 'enable') }, t.enabled ? 'Disable' : 'Enable'),
        h('button', { class: 'danger', onclick: () => act(t, 'revoke') }, 'Revoke')) },
    ], rows, { empty: 'No token yet.' }));
  }
  mount(ctx.el, pageHead('Management tokens', h('button', { class: 'primary', id: 'new-token', onclick: create }, 'New token')),
    h('p', { class: 'muted' }, 'Personal tokens automate the Management API (/management/v1) with the scopes you pick. The secret is shown once.'), box);
  await load();
}
