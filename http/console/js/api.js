// The console's one door to /api/v1: JSON in, the envelope's data out, errors as ApiError.
// A 401 on any signed-in call ends the session and sends the user to sign in, then back.

const TOKEN = 'lookout.session';

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = (body && body.code) || 'internal';
    this.fields = (body && body.fields) || [];
  }
}

let onUnauthorized = () => {};

/** setUnauthorizedHandler: called once per 401 on a signed-in request. */
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export function token() { return localStorage.getItem(TOKEN) || ''; }
export function setToken(t) { if (t) localStorage.setItem(TOKEN, t); else localStorage.removeItem(TOKEN); }

/**
 * api sends one request to /api/v1 and returns {data, next_cursor}. body may be an object
 * (sent as JSON) or undefined. opts.anonymous skips the session header (sign-in, setup).
 */
export async function request(method, path, body, opts = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const t = token();
  if (t && !opts.anonymous) headers.Authorization = 'Bearer ' + t;
  let resp;
  try {
    resp = await fetch('/api/v1' + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'omit', cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, { message: 'The server did not answer: is Lookout running?', code: 'unavailable' });
  }
  let env = null;
  const text = await resp.text();
  try { env = text ? JSON.parse(text) : null; } catch { env = null; }
  if (!resp.ok || !env || env.error) {
    // Only the first of several requests refused together ends the session: the others
    // were sent with the same token, which is gone by the time they answer.
    if (resp.status === 401 && t && !opts.anonymous && token() === t) {
      setToken('');
      onUnauthorized();
    }
    throw new ApiError(resp.status, env);
  }
  return env;
}

export async function get(path) { return (await request('GET', path)).data; }
export async function post(path, body) { return (await request('POST', path, body)).data; }
export async function put(path, body) { return (await request('PUT', path, body)).data; }
export async function del(path) { return (await request('DELETE', path)).data; }

/** list reads a whole collection, page by page (at most max rows). */
export async function list(path, max = 1000) {
  const out = [];
  let cursor = '';
  const sep = path.includes('?') ? '&' : '?';
  while (out.length < max) {
    const env = await request('GET', path + sep + 'limit=200' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
    out.push(...env.data);
    if (!env.next_cursor) break;
    cursor = env.next_cursor;
  }
  return out;
}

/** page reads one page: {rows, next}. */
export async function page(path, cursor, limit = 50) {
  const sep = path.includes('?') ? '&' : '?';
  const env = await request('GET', path + sep + 'limit=' + limit + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
  return { rows: env.data, next: env.next_cursor || '' };
}

/** document reads a JSON document that is served as is, not in the envelope (OpenAPI). */
export async function rawDocument(path) {
  const t = token();
  const resp = await fetch('/api/v1' + path, { headers: { Accept: 'application/json', Authorization: 'Bearer ' + t }, credentials: 'omit', cache: 'no-store' });
  const body = await resp.json().catch(() => null);
  if (!resp.ok) {
    if (resp.status === 401 && t && token() === t) { setToken(''); onUnauthorized(); }
    throw new ApiError(resp.status, body);
  }
  return body;
}
