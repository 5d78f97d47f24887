// First-run setup and sign-in.
import * as api from '../api.js';
import { h, mount, form } from '../ui.js';
import { state, loadMe } from '../main.js';

function card(title, sub, body) {
  return h('div', { class: 'auth-page' }, h('div', { class: 'card auth-card' }, h('h1', {}, title), h('p', { class: 'muted' }, sub), body));
}

export async function setup(ctx) {
  if (!state.config.setup_required) return ctx.navigate('/login', true);
  const f = form([
    { name: 'name', label: 'Your name', required: true, autocomplete: 'name' },
    { name: 'email', label: 'Email', type: 'email', required: true, autocomplete: 'email' },
    { name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'new-password', help: '8 to 1024 characters.' },
  ], {
    submit: 'Create the owner account',
    onSubmit: async (v) => {
      const out = await api.request('POST', '/auth/register', v, { anonymous: true });
      api.setToken(out.data.token);
      state.config.setup_required = false;
      await loadMe();
      ctx.navigate('/projects?new=1', true);
    },
  });
  mount(ctx.el, card('Welcome to Lookout', 'No account exists yet. Create the owner: this account holds the first workspace and every right in it.', f));
  f.querySelector('input').focus();
}

export async function login(ctx) {
  if (state.config.setup_required) return ctx.navigate('/setup', true);
  const next = ctx.query.get('next') || '/';
  const f = form([
    { name: 'email', label: 'Email', type: 'email', required: true, autocomplete: 'username' },
    { name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'current-password' },
  ], {
    submit: 'Sign in',
    onSubmit: async (v) => {
      const out = await api.request('POST', '/auth/login', v, { anonymous: true });
      api.setToken(out.data.token);
      await loadMe();
      ctx.navigate(next.startsWith('/') && !next.startsWith('//') ? next : '/', true);
    },
  });
  mount(ctx.el, card('Sign in to Lookout', ctx.query.get('next') ? 'Sign in to go back to where you were.' : 'Use the account your workspace owner gave you.', f));
  f.querySelector('input').focus();
}
