// Projects of the workspace, and one project's settings and members.
import * as api from '../api.js';
import { h, mount, form, table, pageHead, fmtTime, badge, dialog, toast } from '../ui.js';
import { state, loadProjects } from '../main.js';

function projectForm(onDone) {
  return form([
    { name: 'name', label: 'Name', required: true },
    { name: 'description', label: 'Description', type: 'textarea', rows: 2 },
    { name: 'access_mode', label: 'Access', type: 'select', value: 'inherited', options: [
      { value: 'inherited', label: 'Every workspace member' }, { value: 'restricted', label: 'Owners, admins and listed members only' }] },
  ], { submit: 'Create project', onSubmit: async (v) => onDone(await api.post('/projects', { ...v, workspace_id: state.wsId })) });
}

export async function list(ctx) {
  const ws = state.workspaces.find((w) => w.id === state.wsId);
  const canWrite = ws && (ws.role === 'owner' || ws.role === 'admin');
  const open = () => {
    const d = dialog('New project', projectForm(async (p) => {
      d.close();
      await ctx.refreshShell();
      toast(`Project ${p.name} created`);
      ctx.navigate(`/p/${p.id}`);
    }), []);
  };
  mount(ctx.el,
    pageHead('Projects', canWrite ? h('button', { class: 'primary', id: 'new-project', onclick: open }, 'New project') : null),
    h('p', { class: 'muted' }, `Workspace ${ws ? ws.name : ''}: a project holds models, clients, warehouses and alerts.`),
    table([
      { label: 'Name', get: (p) => h('a', { href: `/p/${p.id}` }, p.name) },
      { label: 'Access', get: (p) => badge(p.access_mode) },
      { label: 'Description', get: (p) => p.description },
      { label: 'Created', get: (p) => fmtTime(p.created_at) },
    ], state.projects, { empty: 'No project yet: create the first one.' }));
  if (ctx.query.get('new')) {
    // Opened once: a reload after closing the dialog shows the list, not the dialog again.
    history.replaceState(null, '', '/projects');
    if (canWrite) open();
  }
}

export async function settings(ctx) {
  const pid = ctx.params.pid;
  const p = await api.get('/projects/' + pid);
  const ws = state.workspaces.find((w) => w.id === p.workspace_id);
  const canWrite = ws && (ws.role === 'owner' || ws.role === 'admin');
  const f = form([
    { name: 'name', label: 'Name', required: true, value: p.name },
    { name: 'description', label: 'Description', type: 'textarea', rows: 2, value: p.description, keepEmpty: true },
    { name: 'access_mode', label: 'Access', type: 'select', value: p.access_mode, options: [
      { value: 'inherited', label: 'Every workspace member' }, { value: 'restricted', label: 'Owners, admins and listed members only' }] },
  ], { onSubmit: async (v) => { await api.put('/projects/' + pid, v); await ctx.refreshShell(); toast('Project saved'); } });
  const membersBox = h('div', {});
  mount(ctx.el, pageHead('Project settings'), h('div', { class: 'grid2' },
    h('div', { class: 'card' }, h('h2', {}, 'General'), canWrite ? f : h('p', { class: 'muted' }, 'Only owners and admins change a project.')),
    h('div', { class: 'card' }, h('h2', {}, 'Listed members'), h('p', { class: 'muted small' }, 'On a restricted project only owners, admins and the members listed here get in.'), membersBox)));
  const [members, listed] = await Promise.all([api.list(`/workspaces/${p.workspace_id}/members`), api.get(`/projects/${pid}/members`)]);
  const on = new Set(listed.map((m) => m.user_id));
  const mf = form([{ name: 'user_ids', label: 'Members', type: 'checks', value: [...on], options: members.filter((m) => m.role === 'member').map((m) => ({ value: m.user_id, label: `${m.name || m.email} (${m.email})` })), emptyText: 'No member with the member role in this workspace.' }],
    { submit: 'Save the list', onSubmit: async (v) => { await api.put(`/projects/${pid}/members`, { user_ids: v.user_ids }); toast('Members saved'); } });
  mount(membersBox, canWrite ? mf : table([{ label: 'Member', get: (m) => m.email }], listed));
}
