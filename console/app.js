// The web console (docs/console.md): a login form, then the views, each refreshed every few
// seconds from the HTTP API while it is shown. Routes are the page's #fragment.
import {ApiError, clearCredentials, currentUser, get, setCredentials} from './api.js';
import {el, replace} from './dom.js';
import {clearError, showError} from './errors.js';
import {onLoggedOut, refresh, setView} from './refresh.js';
import {admin} from './views/admin.js';
import {connections} from './views/connections.js';
import {exchange, exchanges} from './views/exchanges.js';
import {overview} from './views/overview.js';
import {queue} from './views/queue.js';
import {queues} from './views/queues.js';

const REFRESH_MS = 5000;

const ROUTES = [
  [/^#?\/?$/, overview],
  [/^#\/queues$/, queues],
  [/^#\/queues\/([^/]+)\/([^/]+)$/, queue],
  [/^#\/exchanges$/, exchanges],
  [/^#\/exchanges\/([^/]+)\/([^/]+)$/, (vhost, name) => exchange(vhost, name === 'amq.default' ? '' : name)],
  [/^#\/connections$/, connections],
  [/^#\/admin$/, admin],
];

const NAV = [['#/', 'Overview'], ['#/queues', 'Queues'], ['#/exchanges', 'Exchanges'],
             ['#/connections', 'Connections'], ['#/admin', 'Users and policies']];

function viewFor(hash) {
  for (const [pattern, make] of ROUTES) {
    const match = pattern.exec(hash);
    if (!match) continue;
    try {
      return make(...match.slice(1).map(decodeURIComponent));
    } catch {
      return null;  // a malformed escape in the address
    }
  }
  return null;
}

function show() {
  const main = document.getElementById('main');
  const view = viewFor(location.hash);
  setView(view);
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.getAttribute('href') === (location.hash.match(/^#\/[a-z]*/)?.[0] ?? '#/'));
  }
  if (!view) {
    replace(main, el('h1', {}, 'Not found'), el('p', {}, 'No such page in the console.'));
    return;
  }
  document.title = `${view.title} · Wharf`;
  view.mount(main);
  refresh();
}

function login(reason) {
  setView(null);
  clearCredentials();
  replace(document.getElementById('nav'));
  replace(document.getElementById('who'));
  const user = el('input', {name: 'user', autocomplete: 'username', required: true, 'aria-label': 'user'});
  const password = el('input', {name: 'password', type: 'password', autocomplete: 'current-password',
                                'aria-label': 'password'});
  const form = el('form', {class: 'login', on: {submit: async (event) => {
    event.preventDefault();
    setCredentials(user.value, password.value);
    try {
      await get('/whoami');
      clearError();
      start();
    } catch (error) {
      clearCredentials();
      showError(error);
    }
  }}},
  el('h1', {}, 'Log in'),
  el('label', {}, 'User ', user), el('label', {}, 'Password ', password),
  el('button', {type: 'submit'}, 'Log in'));
  replace(document.getElementById('main'), form);
  if (reason) showError(new ApiError(401, 'not_authorized', reason));
  user.focus();
}

function start() {
  replace(document.getElementById('nav'), NAV.map(([href, label]) => el('a', {href}, label)));
  replace(document.getElementById('who'), currentUser(), ' ',
          el('button', {class: 'link', on: {click: () => login()}}, 'Log out'));
  show();
}

window.addEventListener('hashchange', () => {
  if (currentUser()) show();
});
onLoggedOut(login);
setInterval(refresh, REFRESH_MS);
if (currentUser()) start(); else login();
