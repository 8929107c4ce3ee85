// Connections (both protocols) and consumers.
import {get} from '../api.js';
import {el, link, number, replace, table, time} from '../dom.js';
import {queueHref} from './queues.js';

export function connections() {
  const open = el('div');
  const consumers = el('div');
  return {
    title: 'Connections',
    mount(main) {
      replace(main, el('h1', {}, 'Connections'), open, el('h2', {}, 'Consumers'), consumers);
    },
    async refresh() {
      const list = await get('/connections');
      replace(open, table([
        {label: 'Name', value: (c) => c.name},
        {label: 'User', value: (c) => c.user},
        {label: 'Vhost', value: (c) => c.vhost},
        {label: 'Protocol', value: (c) => c.protocol},
        {label: 'Client', value: (c) => [c.client_properties?.product, c.client_properties?.version].filter(Boolean).join(' ')},
        {label: 'Channels', value: (c) => number(c.channels)},
        {label: 'Consumers', value: (c) => number(c.consumers)},
        {label: 'Unacked', value: (c) => number(c.unacked)},
        {label: 'Connected', value: (c) => time(c.connected_at)},
      ], list));
      const all = await get('/consumers');
      replace(consumers, table([
        {label: 'Queue', value: (c) => link(queueHref(c.queue.vhost, c.queue.name), c.queue.name)},
        {label: 'Tag', value: (c) => c.consumer_tag},
        {label: 'Connection', value: (c) => `${c.channel_details.connection_id} (channel ${c.channel_details.number})`},
        {label: 'User', value: (c) => c.channel_details.user},
        {label: 'Prefetch', value: (c) => number(c.prefetch_count)},
        {label: 'Unacked', value: (c) => number(c.unacked)},
        {label: 'Status', value: (c) => c.activity_status},
      ], all));
    },
  };
}
