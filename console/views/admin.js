// Users (administrators) and policies (policymakers), each list shown when the user may read it.
import {get} from '../api.js';
import {el, json, replace, table} from '../dom.js';

const limits = (l) => Object.entries(l ?? {}).map(([k, v]) => `${k} ${v}`).join(', ');

// The list, or the broker's refusal in its place (a user without the tag for it).
async function listOrWhy(path, render) {
  try {
    return render(await get(path));
  } catch (error) {
    if (error.error !== 'not_authorised') throw error;  // a failed login goes to the form
    return el('p', {class: 'muted'}, error.reason);
  }
}

export function admin() {
  const users = el('div');
  const permissions = el('div');
  const policies = el('div');
  return {
    title: 'Users and policies',
    mount(main) {
      replace(main, el('h1', {}, 'Users and policies'), el('h2', {}, 'Users'), users,
              el('h2', {}, 'Permissions'), permissions, el('h2', {}, 'Policies'), policies);
    },
    async refresh() {
      replace(users, await listOrWhy('/users', (items) => table([
        {label: 'Name', value: (u) => u.name},
        {label: 'Tags', value: (u) => u.tags.join(', ')},
        {label: 'Limits', value: (u) => limits(u.limits)},
        {label: 'Defined by', value: (u) => u.source},
      ], items)));
      replace(permissions, await listOrWhy('/permissions', (items) => table([
        {label: 'User', value: (p) => p.user},
        {label: 'Vhost', value: (p) => p.vhost},
        {label: 'Configure', value: (p) => el('code', {}, p.configure)},
        {label: 'Write', value: (p) => el('code', {}, p.write)},
        {label: 'Read', value: (p) => el('code', {}, p.read)},
      ], items)));
      replace(policies, await listOrWhy('/policies', (items) => table([
        {label: 'Vhost', value: (p) => p.vhost},
        {label: 'Name', value: (p) => p.name},
        {label: 'Pattern', value: (p) => el('code', {}, p.pattern)},
        {label: 'Applies to', value: (p) => p['apply-to']},
        {label: 'Priority', value: (p) => p.priority},
        {label: 'Definition', value: (p) => el('pre', {}, json(p.definition))},
      ], items)));
    },
  };
}
