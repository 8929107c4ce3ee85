// The view shown, and its refresh from the API: one at a time (a refresh asked for while one
// runs follows it, so a view shown or a filter typed meanwhile is never left unloaded, and no
// older answer lands after a newer one).
import {clearError, showError} from './errors.js';

let current = null;
let running = false;
let again = false;
let loggedOut = () => {};

export function setView(view) { current = view; }
// `handler(reason)` runs when the credentials no longer pass.
export function onLoggedOut(handler) { loggedOut = handler; }

export async function refresh() {
  if (!current) return;
  if (running) {
    again = true;
    return;
  }
  running = true;
  const view = current;
  try {
    await view.refresh();
    if (view === current) clearError('refresh');
  } catch (error) {
    if (view === current) {
      // "not_authorized": the login failed (RabbitMQ's "not_authorised" is a refusal of what
      // was asked, shown like any error).
      if (error.error === 'not_authorized') loggedOut(error.reason);
      else showError(error, 'refresh');
    }
  } finally {
    running = false;
    if (again) {
      again = false;
      refresh();
    }
  }
}
