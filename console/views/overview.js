// The overview: totals, and charts of the message rates and queued messages of the last
// minutes (the broker's samples, then the console's own: history.js).
import {get} from '../api.js';
import {lineChart} from '../charts.js';
import {el, facts, number, rate, replace} from '../dom.js';
import {points, record} from '../history.js';

// The broker's samples of the last minutes (GET /api/overview/history) go in once, before the
// console's own, so the charts show the last minutes as soon as the overview opens.
let seeded = false;

async function seed() {
  seeded = true;
  const history = await get('/overview/history');
  for (const s of history.samples) {
    record('publish', s.publish_rate, s.timestamp);
    record('deliver', s.deliver_rate, s.timestamp);
    record('ack', s.ack_rate, s.timestamp);
    record('ready', s.messages_ready, s.timestamp);
    record('unacked', s.messages_unacknowledged, s.timestamp);
  }
}

export function overview() {
  const totals = el('div');
  const rates = el('div');
  const depth = el('div');
  return {
    title: 'Overview',
    mount(main) {
      replace(main, el('h1', {}, 'Overview'), totals, el('h2', {}, 'Message rates'), rates,
              el('h2', {}, 'Queued messages'), depth);
    },
    async refresh() {
      if (!seeded) await seed();
      const o = await get('/overview');
      const stats = o.message_stats ?? {};
      record('publish', stats.publish_details?.rate);
      record('deliver', stats.deliver_get_details?.rate);
      record('ack', stats.ack_details?.rate);
      record('ready', o.queue_totals.messages_ready);
      record('unacked', o.queue_totals.messages_unacknowledged);
      const t = o.object_totals;
      replace(totals, facts([
        ['Node', `${o.node} (Wharf ${o.product_version})`],
        ['Messages', `${number(o.queue_totals.messages)} (${number(o.queue_totals.messages_ready)} ready, ${number(o.queue_totals.messages_unacknowledged)} unacknowledged)`],
        ['Publish / deliver / ack', `${rate(stats.publish_details?.rate)} / ${rate(stats.deliver_get_details?.rate)} / ${rate(stats.ack_details?.rate)}`],
        ['Queues', number(t.queues)], ['Exchanges', number(t.exchanges)],
        ['Connections', number(t.connections)], ['Channels', number(t.channels)],
        ['Consumers', number(t.consumers)],
        ['Listeners', o.listeners.map((l) => `${l.protocol} ${l.ip_address}:${l.port}`).join(', ')],
      ]));
      replace(rates, lineChart([
        {label: 'publish', points: points('publish'), class: 's1'},
        {label: 'deliver', points: points('deliver'), class: 's2'},
        {label: 'ack', points: points('ack'), class: 's3'},
      ], {unit: '/s'}));
      replace(depth, lineChart([
        {label: 'ready', points: points('ready'), class: 's1'},
        {label: 'unacknowledged', points: points('unacked'), class: 's2'},
      ]));
    },
  };
}
