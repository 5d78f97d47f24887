// Workspace members and roles; new workspaces.
import * as api from '../api.js';
import { h, mount, form, table, pageHead, dialog, toast, confirm, nextId } from '../ui.js';
import { state, loadMe } from '../main.js';

export async function members(ctx) {
  const ws = state.workspaces.find((w) => w.id === state.wsId);
  const role = ws ? ws.role : 'member';
  const canWrite = role === 'owner' || role === 'admin';
  const box = h('div', {});
  const add = () => {
    const d = dialog('Add a member', form([
      { name: 'email', label: 'Email', type: 'email', required: true },
      { name: 'name', label: 'Name' },
      { name: 'password', label: 'Password', type: 'password', autocomplete: 'new-password', help: 'For a new account (the appliance sends no invitations); leave empty for an existing one.' },
      { name: 'role', label: 'Role', type: 'select', value: 'member', options: role === 'owner' ? ['member', 'admin', 'owner'] : ['member', 'admin'] },
    ], { submit: 'Add', onSubmit: async (v) => { await api.post(`/workspaces/${state.wsId}/members`, v); d.close(); toast('Member added'); await load(); } }), []);
  };
  const newWs = () => {
    const d = dialog('New workspace', form([{ name: 'name', label: 'Name', required: true }], {
      submit: 'Create', onSubmit: async (v) => {
        const w = await api.post('/workspaces', v);
        d.close();
        localStorage.setItem('lookout.workspace', w.id);
        await loadMe();
        ctx.navigate('/projects?new=1');
      },
    }), []);
  };
  async function load() {
    const rows = await api.list(`/workspaces/${state.wsId}/members`);
    mount(box, table([
      { label: 'Name', get: (m) => m.name },
      { label: 'Email', get: (m) => m.email },
      { label: 'Role', get: (m) => {
        if (role !== 'owner' || m.user_id === state.me.id) return m.role;
        const id = nextId('role');
        return h('span', {}, h('label', { class: 'sr-only', for: id }, `Role of ${m.email}`), h('select', { id, onchange: async (e) => {
          try { await api.put(`/workspaces/${state.wsId}/members/${m.user_id}`, { role: e.target.value }); toast('Role changed'); } catch (err) { toast(err.message, 'bad'); await load(); }
        } }, ['member', 'admin', 'owner'].map((r) => h('option', { value: r, selected: r === m.role }, r))));
      } },
      { label: '', get: (m) => canWrite && m.user_id !== state.me.id ? h('button', { class: 'danger', onclick: async () => {
        if (!(await confirm('Remove member', `Remove ${m.email} from this workspace? Their Management Tokens for it are revoked.`, 'Remove'))) return;
        try { await api.del(`/workspaces/${state.wsId}/members/${m.user_id}`); toast('Member removed'); } catch (err) { toast(err.message, 'bad'); }
        await load();
      } }, 'Remove') : null },
    ], rows));
  }
  mount(ctx.el, pageHead('Members', canWrite ? h('button', { class: 'primary', onclick: add }, 'Add member') : null, h('button', { onclick: newWs }, 'New workspace')),
    h('p', { class: 'muted' }, `Owners and admins change configuration; members read. Your role here: ${role}.`), box);
  await load();
}
