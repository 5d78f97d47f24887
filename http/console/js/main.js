// The console's shell: boot (setup or sign-in), the workspace and project switchers, the
// navigation and a small history-API router that loads each page's module on demand.
import * as api from './api.js';
import { h, mount, toast } from './ui.js';

export const state = { config: null, me: null, workspaces: [], wsId: '', projects: [], project: null };
const WS_KEY = 'lookout.workspace';
const PROJECT_KEY = 'lookout.project';

const routes = [
  ['/setup', 'auth.js', 'setup', { bare: true }],
  ['/login', 'auth.js', 'login', { bare: true }],
  ['/', null, 'home'],
  ['/projects', 'projects.js', 'list'],
  ['/members', 'workspace.js', 'members'],
  ['/tokens', 'tokens.js', 'tokens'],
  ['/p/:pid', 'overview.js', 'overview'],
  ['/p/:pid/playground', 'playground.js', 'playground'],
  ['/p/:pid/models', 'models.js', 'list'],
  ['/p/:pid/models/new', 'models.js', 'edit'],
  ['/p/:pid/models/:id', 'models.js', 'edit'],
  ['/p/:pid/discovery', 'discovery.js', 'list'],
  ['/p/:pid/discovery/:id', 'discovery.js', 'detail'],
  ['/p/:pid/ingest-clients', 'clients.js', 'ingestList'],
  ['/p/:pid/ingest-clients/:id', 'clients.js', 'ingestDetail'],
  ['/p/:pid/query-clients', 'clients.js', 'queryList'],
  ['/p/:pid/query-clients/:id', 'clients.js', 'queryDetail'],
  ['/p/:pid/keys', 'resources.js', 'keys'],
  ['/p/:pid/analytics', 'resources.js', 'analytics'],
  ['/p/:pid/analytics/:id', 'resources.js', 'analyticsDetail'],
  ['/p/:pid/warehouses', 'resources.js', 'warehouses'],
  ['/p/:pid/credentials', 'resources.js', 'credentials'],
  ['/p/:pid/client-cas', 'resources.js', 'cas'],
  ['/p/:pid/alerts', 'alerts.js', 'list'],
  ['/p/:pid/alerts/new', 'alerts.js', 'edit'],
  ['/p/:pid/alerts/assistant', 'alerts.js', 'assistant'],
  ['/p/:pid/alerts/:id', 'alerts.js', 'edit'],
  ['/p/:pid/incidents', 'incidents.js', 'list'],
  ['/p/:pid/incidents/:id', 'incidents.js', 'detail'],
  ['/p/:pid/deliveries', 'incidents.js', 'deliveries'],
  ['/p/:pid/channels', 'channels.js', 'list'],
  ['/p/:pid/settings', 'projects.js', 'settings'],
];

function match(path) {
  const parts = path.split('/').filter(Boolean);
  for (const [pattern, mod, fn, opts] of routes) {
    const pp = pattern.split('/').filter(Boolean);
    if (pp.length !== parts.length) continue;
    const params = {};
    if (pp.every((p, i) => (p.startsWith(':') ? ((params[p.slice(1)] = decodeURIComponent(parts[i])), true) : p === parts[i]))) {
      return { mod, fn, params, opts: opts || {} };
    }
  }
  return null;
}

let cleanup = null;
let generation = 0;

/** navigate moves to path (pushState) and renders it. */
export function navigate(path, replace = false) {
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  route();
}

function here() { return location.pathname + location.search; }

function toLogin() {
  const next = here();
  navigate('/login' + (next.startsWith('/login') || next.startsWith('/setup') ? '' : '?next=' + encodeURIComponent(next)), true);
}

api.setUnauthorizedHandler(() => {
  state.me = null;
  toast('Your session ended: sign in again', 'bad');
  toLogin();
});

async function route() {
  const gen = ++generation;
  if (cleanup) { try { cleanup(); } catch { /* a page's cleanup must not stop the next */ } cleanup = null; }
  const m = match(location.pathname);
  const main = document.getElementById('main');
  if (!m) {
    renderShell();
    mount(main, h('div', { class: 'page' }, h('h1', {}, 'Page not found'), h('p', {}, 'Nothing lives at ', h('code', {}, location.pathname), '. ', h('a', { href: '/' }, 'Go to the overview'))));
    return;
  }
  if (!state.config) state.config = (await api.request('GET', '/console', undefined, { anonymous: true })).data;
  if (state.config.setup_required && m.fn !== 'setup') return navigate('/setup', true);
  if (!m.opts.bare) {
    if (!api.token()) return toLogin();
    if (!state.me) {
      try { await loadMe(); } catch (e) { if (e.status === 401) return; throw e; }
    }
    if (m.params.pid) {
      try { await selectProject(m.params.pid); } catch (e) {
        if (e.status === 401) return;
        renderShell();
        mount(main, h('div', { class: 'page' }, h('h1', {}, 'Project not available'), h('p', {}, e.message)));
        return;
      }
    }
    if (m.fn === 'home') {
      const pid = localStorage.getItem(PROJECT_KEY);
      const p = state.projects.find((x) => x.id === pid) || state.projects[0];
      return navigate(p ? `/p/${p.id}` : '/projects', true);
    }
  }
  if (gen !== generation) return;
  if (m.opts.bare) renderBare(); else renderShell();
  const page = h('div', { class: 'page' });
  mount(main, page);
  const mod = await import('./pages/' + m.mod);
  if (gen !== generation) return;
  const ctx = { el: page, params: m.params, query: new URLSearchParams(location.search), state, navigate, project: state.project, refreshShell: async () => { await loadProjects(); renderShell(); } };
  try {
    cleanup = (await mod[m.fn](ctx)) || null;
  } catch (e) {
    if (e.status === 401) return;
    mount(page, h('div', { class: 'notice bad', role: 'alert' }, e.message || String(e)));
  }
  const title = page.querySelector('h1');
  document.title = (title ? title.textContent + ' · ' : '') + 'Lookout';
}

export async function loadMe() {
  const me = await api.get('/me');
  state.me = me.user;
  state.workspaces = me.workspaces || [];
  const saved = localStorage.getItem(WS_KEY);
  state.wsId = (state.workspaces.find((w) => w.id === saved) || state.workspaces[0] || {}).id || '';
  await loadProjects();
}

export async function loadProjects() {
  state.projects = state.wsId ? await api.list('/projects?workspace_id=' + encodeURIComponent(state.wsId)) : [];
}

async function selectProject(pid) {
  let p = state.projects.find((x) => x.id === pid);
  if (!p) {
    p = await api.get('/projects/' + encodeURIComponent(pid));
    if (p.workspace_id !== state.wsId) {
      state.wsId = p.workspace_id;
      localStorage.setItem(WS_KEY, state.wsId);
      await loadProjects();
    }
  }
  state.project = p;
  localStorage.setItem(PROJECT_KEY, pid);
}

function renderBare() {
  const app = document.getElementById('app');
  app.className = 'shell bare';
  mount(app.querySelector('.topbar'), h('span', { class: 'brand' }, h('img', { src: document.querySelector('link[rel=icon]').href, alt: '', width: 22, height: 22 }), 'Lookout'));
  mount(app.querySelector('.sidebar'));
}

const projectNav = [
  ['Overview', ''], ['Playground', '/playground'],
  ['Data'], ['Models', '/models'], ['Discovery', '/discovery'], ['Ingest clients', '/ingest-clients'], ['Query clients', '/query-clients'], ['Runtime keys', '/keys'], ['Analytics APIs', '/analytics'],
  ['Alerting'], ['Alerts', '/alerts'], ['Incidents', '/incidents'], ['Deliveries', '/deliveries'], ['Channels', '/channels'],
  ['Storage & security'], ['Warehouses', '/warehouses'], ['Credentials', '/credentials'], ['Client CAs', '/client-cas'], ['Project settings', '/settings'],
];

function renderShell() {
  const app = document.getElementById('app');
  app.className = 'shell';
  const wsSel = h('select', { 'aria-label': 'Workspace', id: 'workspace-switcher', onchange: async (e) => {
    state.wsId = e.target.value;
    localStorage.setItem(WS_KEY, state.wsId);
    await loadProjects();
    state.project = null;
    navigate(state.projects[0] ? `/p/${state.projects[0].id}` : '/projects');
  } }, state.workspaces.map((w) => h('option', { value: w.id, selected: w.id === state.wsId }, w.name)));
  const pid = state.project && location.pathname.startsWith('/p/') ? state.project.id : '';
  const prSel = h('select', { 'aria-label': 'Project', id: 'project-switcher', onchange: (e) => {
    if (e.target.value === '__new') return navigate('/projects?new=1');
    const rest = location.pathname.startsWith('/p/') ? location.pathname.split('/').slice(3, 4).join('/') : '';
    navigate(`/p/${e.target.value}` + (rest ? '/' + rest : ''));
  } },
  h('option', { value: '', disabled: true, selected: !pid }, state.projects.length ? 'Choose a project' : 'No project yet'),
  state.projects.map((p) => h('option', { value: p.id, selected: p.id === pid }, p.name)),
  h('option', { value: '__new' }, '+ New project'));
  mount(app.querySelector('.topbar'),
    h('a', { class: 'brand', href: '/' }, h('img', { src: document.querySelector('link[rel=icon]').href, alt: '', width: 22, height: 22 }), 'Lookout'),
    wsSel, prSel, h('span', { class: 'spacer' }),
    h('span', { class: 'muted small', id: 'whoami' }, state.me ? state.me.email : ''),
    h('button', { type: 'button', id: 'sign-out', onclick: signOut }, 'Sign out'));
  const nav = [];
  if (pid) {
    for (const [label, path] of projectNav) {
      if (path === undefined) { nav.push(h('h2', {}, label)); continue; }
      const href = `/p/${pid}${path}`;
      nav.push(h('a', { href, 'aria-current': isCurrent(href, path === '') ? 'page' : null }, label));
    }
  }
  nav.push(h('h2', {}, 'Workspace'));
  for (const [label, href] of [['Projects', '/projects'], ['Members', '/members'], ['Management tokens', '/tokens']]) {
    nav.push(h('a', { href, 'aria-current': isCurrent(href) ? 'page' : null }, label));
  }
  mount(app.querySelector('.sidebar'), nav);
}

function isCurrent(href, exact) {
  const p = location.pathname;
  return exact ? p === href : p === href || p.startsWith(href + '/');
}

async function signOut() {
  try { await api.post('/auth/logout'); } catch { /* the session may be gone already */ }
  api.setToken('');
  state.me = null;
  navigate('/login', true);
}

// Links inside the app move through the router; modified clicks keep the browser's ways.
document.addEventListener('click', (e) => {
  const a = e.target.closest('a[href]');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith('/api/') || url.pathname.startsWith('/assets/')) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener('popstate', route);
route().catch((e) => {
  mount(document.getElementById('main'), h('div', { class: 'page' }, h('div', { class: 'notice bad', role: 'alert' }, 'The console could not start: ' + (e.message || e))));
});
