// Exchanges, and the bindings from one of them.
import {get, seg} from '../api.js';
import {el, facts, json, link, number, replace, table} from '../dom.js';
import {queueHref} from './queues.js';

const shown = (name) => name === '' ? '(default)' : name;
const exchangeHref = (vhost, name) => `#/exchanges/${seg(vhost)}/${seg(name === '' ? 'amq.default' : name)}`;

export function exchanges() {
  const list = el('div');
  return {
    title: 'Exchanges',
    mount(main) { replace(main, el('h1', {}, 'Exchanges'), list); },
    async refresh() {
      const items = await get('/exchanges');
      replace(list, table([
        {label: 'Vhost', value: (e) => e.vhost},
        {label: 'Name', value: (e) => link(exchangeHref(e.vhost, e.name), shown(e.name))},
        {label: 'Type', value: (e) => e.type},
        {label: 'Durable', value: (e) => (e.durable ? 'yes' : 'no')},
        {label: 'Bindings', value: (e) => number(e.bindings)},
        {label: 'Alternate exchange', value: (e) => e.alternate_exchange ?? ''},
        {label: 'Policy', value: (e) => e.policy ?? ''},
      ], items));
    },
  };
}

export function exchange(vhost, name) {
  const about = el('div');
  const bindings = el('div');
  const base = `/exchanges/${seg(vhost)}/${seg(name === '' ? 'amq.default' : name)}`;
  return {
    title: `Exchange ${shown(name)}`,
    mount(main) {
      replace(main, el('h1', {}, 'Exchange ', el('span', {class: 'name'}, shown(name)),
                       el('small', {}, ` in ${vhost}`)),
              about, el('h2', {}, 'Bindings from it'), bindings);
    },
    async refresh() {
      const e = await get(base);
      replace(about, facts([['Type', e.type], ['Durable', e.durable ? 'yes' : 'no'],
                            ['Internal', e.internal ? 'yes' : 'no'],
                            ['Arguments', el('pre', {}, json(e.arguments))],
                            ['Alternate exchange', e.alternate_exchange ?? '–'],
                            ['Policy', e.policy ?? '–']]));
      const from = await get(`${base}/bindings/source`);
      replace(bindings, table([
        {label: 'To', value: (b) => (b.destination_type === 'queue'
            ? link(queueHref(b.vhost, b.destination), b.destination)
            : link(exchangeHref(b.vhost, b.destination), b.destination))},
        {label: 'Kind', value: (b) => b.destination_type},
        {label: 'Routing key', value: (b) => b.routing_key},
        {label: 'Arguments', value: (b) => (Object.keys(b.arguments).length ? json(b.arguments) : '')},
      ], from));
    },
  };
}
