// The HTTP API (docs/http-api.md), called with the user who logged in on the console's form.
// The credentials stay in this tab's sessionStorage (gone when the tab closes) and go out as
// HTTP Basic on each request, which the broker checks as it checks any API call.

const KEY = 'wharf.credentials';

export class ApiError extends Error {
  constructor(status, error, reason) {
    super(`${status} ${error}: ${reason}`);
    this.status = status;
    this.error = error;
    this.reason = reason;
  }
}

// base64 of the UTF-8 of `text` (btoa takes Latin-1 only).
function base64(text) {
  let binary = '';
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}

export function setCredentials(user, password) {
  sessionStorage.setItem(KEY, JSON.stringify({user, token: base64(`${user}:${password}`)}));
}
export function clearCredentials() { sessionStorage.removeItem(KEY); }
export function currentUser() {
  const saved = sessionStorage.getItem(KEY);
  return saved ? JSON.parse(saved).user : null;
}

// `method` on /api`path`; the parsed JSON answer (null for 201 and 204), or an ApiError with
// the broker's reason.
export async function api(method, path, body) {
  const saved = sessionStorage.getItem(KEY);
  // X-Requested-With: a 401 then comes without WWW-Authenticate, so the browser shows no
  // login box of its own over the console's.
  const headers = {'X-Requested-With': 'XMLHttpRequest'};
  if (saved) headers.Authorization = `Basic ${JSON.parse(saved).token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  // After a wrong password the broker holds this address's logins a moment, answering 429
  // (docs/security.md): tried again for a few seconds before the 429 is shown.
  for (let attempt = 0; ; attempt++) {
    try {
      response = await fetch(`/api${path}`, {
        method, headers, cache: 'no-store',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(0, 'unreachable', `the broker did not answer (${e.message})`);
    }
    if (response.status !== 429 || attempt >= 20) break;
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = {error: String(response.status), reason: text.slice(0, 200)};
    }
  }
  if (!response.ok) {
    throw new ApiError(response.status, data?.error ?? String(response.status),
                       data?.reason ?? response.statusText);
  }
  return data;
}

export const get = (path) => api('GET', path);

// One path segment: a vhost, a queue's name ("/" is %2F, as the API wants).
export const seg = (text) => encodeURIComponent(text);
