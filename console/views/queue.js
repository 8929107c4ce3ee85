// One queue: its facts, arguments and effective policy, charts, and the operator's actions:
// purge, move, redrive (with a live progress bar), peek at its messages (headers, death
// records, bodies as text or hex) and its delayed messages (with cancel).
import {api, get, seg} from '../api.js';
import {lineChart} from '../charts.js';
import {el, facts, json, number, rate, replace, table, time} from '../dom.js';
import {act} from '../errors.js';
import {points, queueKey, record} from '../history.js';
import {refresh} from '../refresh.js';

// The bytes of a message's payload, as the API sent it ("string" or "base64").
function payloadBytes(m) {
  if (m.payload_encoding === 'base64') return Uint8Array.from(atob(m.payload), (c) => c.charCodeAt(0));
  return new TextEncoder().encode(m.payload ?? '');
}

function hexDump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = bytes.slice(i, i + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const text = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${i.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${text}`);
  }
  return lines.join('\n');
}

// How the operator left each message's card (headers open, body in hex), by message id, so a
// refresh redraws it the same.
const looks = new Map();

function messageCard(m) {
  const look = looks.get(m.message_id) ?? {hex: false, properties: false, deaths: true};
  looks.set(m.message_id, look);
  const body = el('pre', {class: 'body'});
  const asText = () => {
    look.hex = false;
    replace(body, m.payload_encoding === 'base64' ? `(not UTF-8: ${m.payload_bytes} bytes; see hex)` : m.payload);
  };
  const asHex = () => {
    look.hex = true;
    replace(body, hexDump(payloadBytes(m)));
  };
  if (look.hex) asHex(); else asText();
  const remember = (key) => (event) => { look[key] = event.target.open; };
  const deaths = m.deaths.length === 0 ? null : table([
    {label: 'Reason', value: (d) => d.reason},
    {label: 'Queue', value: (d) => d.queue},
    {label: 'Count', value: (d) => number(d.count)},
    {label: 'Last', value: (d) => time(d.last_at_ms)},
    {label: 'Error', value: (d) => d.last_error ?? ''},
  ], m.deaths);
  return el('article', {class: 'message', 'data-id': m.message_id},
            el('header', {}, el('code', {}, m.message_id), ` position ${m.position}, received ${m.receive_count} times`,
               m.last_error ? `, last error: ${m.last_error}` : ''),
            el('details', {open: look.properties, on: {toggle: remember('properties')}},
               el('summary', {}, 'Properties and headers'), el('pre', {}, json(m.properties))),
            deaths ? el('details', {open: look.deaths, on: {toggle: remember('deaths')}},
                        el('summary', {}, `Death records (${m.deaths.length})`), deaths) : null,
            el('div', {class: 'toggle'},
               el('button', {class: 'link', on: {click: asText}}, 'Text'), ' · ',
               el('button', {class: 'link', on: {click: asHex}}, 'Hex')),
            body);
}

// Fills `node` with what `render` makes, or with the broker's refusal when the user may not
// read it (the rest of the page still shows); other errors go on to the banner.
async function section(node, render) {
  try {
    replace(node, await render());
  } catch (error) {
    if (error.error !== 'not_authorised') throw error;
    replace(node, el('p', {class: 'muted'}, error.reason));
  }
}

function progressBar(r) {
  const done = r.total ? Math.min(1, r.moved / r.total) : (r.state === 'running' ? 0 : 1);
  return el('div', {class: 'redrive'},
            el('progress', {max: 1, value: done, 'aria-label': 'redrive progress'}),
            ` ${r.state}: moved ${number(r.moved)} of ${number(r.total)}`,
            r.remaining ? `, ${number(r.remaining)} to go` : '',
            r.rate_per_second ? `, ${rate(r.rate_per_second)}` : '',
            r.skipped_no_target ? `; ${number(r.skipped_no_target)} without a queue to go back to` : '',
            r.detail ? ` (${r.detail})` : '');
}

export function queue(vhost, name) {
  const base = `/queues/${seg(vhost)}/${seg(name)}`;
  const key = (what) => queueKey(what, vhost, name);
  const about = el('div');
  const charts = el('div', {class: 'charts'});
  const redrive = el('div', {id: 'redrive-progress'});
  const messages = el('div');
  const delayed = el('div');
  const moveTo = el('input', {placeholder: 'queue', 'aria-label': 'move to', size: 16});
  const redriveTo = el('input', {placeholder: 'each to where it died', 'aria-label': 'redrive to', size: 20});
  const actions = el('div', {class: 'actions'},
    el('button', {class: 'danger', on: {click: () => {
      if (!confirm(`Purge every ready message of ${name}?`)) return;
      act(() => api('DELETE', `${base}/contents`), refresh);
    }}}, 'Purge'),
    el('span', {}, ' Move ready messages to ', moveTo,
       el('button', {on: {click: () => act(() => api('POST', `${base}/move`, {to: moveTo.value}),
                                           refresh)}}, 'Move')),
    el('span', {}, ' Redrive to ', redriveTo,
       el('button', {id: 'redrive', on: {click: () => act(
           () => api('POST', `${base}/redrive`, redriveTo.value ? {to: redriveTo.value} : {}),
           refresh)}}, 'Redrive')));
  return {
    title: `Queue ${name}`,
    mount(main) {
      replace(main, el('h1', {}, 'Queue ', el('span', {class: 'name'}, name), el('small', {}, ` in ${vhost}`)),
              about, charts, el('h2', {}, 'Actions'), actions, redrive,
              el('h2', {}, 'Messages'), messages, el('h2', {}, 'Delayed messages'), delayed);
    },
    async refresh() {
      const q = await get(base);
      const stats = q.message_stats ?? {};
      record(key('depth'), q.messages);
      record(key('ready'), q.messages_ready);
      record(key('unacked'), q.messages_unacknowledged);
      record(key('publish'), stats.publish_details?.rate);
      record(key('deliver'), stats.deliver_get_details?.rate);
      record(key('ack'), stats.ack_details?.rate);
      replace(about, facts([
        ['Messages', `${number(q.messages_ready)} ready, ${number(q.messages_unacknowledged)} unacknowledged, ${number(q.messages_delayed)} delayed`],
        ['Consumers', number(q.consumers)],
        ['Durable', q.durable ? 'yes' : 'no'],
        ['Dead letters go to', q.dead_letter_target ?? '–'],
        ['Arguments', el('pre', {}, json(q.arguments))],
        ['Policy', q.policy ?? '–'],
        ['Effective policy definition', el('pre', {}, json(q.effective_policy_definition ?? {}))],
        ['Effective arguments', el('pre', {}, json(q.effective_arguments))],
      ]));
      replace(charts,
              lineChart([{label: 'ready', points: points(key('ready')), class: 's1'},
                         {label: 'unacknowledged', points: points(key('unacked')), class: 's2'}]),
              lineChart([{label: 'publish', points: points(key('publish')), class: 's1'},
                         {label: 'deliver', points: points(key('deliver')), class: 's2'},
                         {label: 'ack', points: points(key('ack')), class: 's3'}], {unit: '/s'}));
      await section(redrive, async () => {
        try {
          const progress = await get(`${base}/redrive`);
          if (progress.state === 'running') setTimeout(refresh, 1000);  // a live bar
          return progressBar(progress);
        } catch (error) {
          if (error.status !== 404) throw error;  // 404: it never had one
          return null;
        }
      });
      await section(messages, async () => {
        const page = await get(`${base}/messages?limit=20`);
        return [page.messages.length === 0 ? el('p', {class: 'muted'}, 'No ready messages.')
                                           : page.messages.map(messageCard),
                page.more ? el('p', {class: 'muted'}, `The first ${page.messages.length} are shown.`) : null];
      });
      await section(delayed, async () => {
        const waiting = await get(`${base}/delayed?limit=50`);
        return [table([
        {label: 'Id', value: (m) => el('code', {}, m.message_id)},
        {label: 'Due', value: (m) => time(m.deliver_at_ms)},
        {label: 'Routing key', value: (m) => m.routing_key},
        {label: 'Bytes', value: (m) => number(m.payload_bytes)},
        {label: '', value: (m) => el('button', {on: {click: () => act(
            () => api('DELETE', `${base}/delayed/${seg(m.message_id)}`), refresh)}}, 'Cancel')},
        ], waiting.messages), waiting.more ? el('p', {class: 'muted'}, `The first ${waiting.messages.length} are shown.`) : null];
      });
    },
  };
}
