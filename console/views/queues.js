// Queues: sortable, filterable, a page at a time (the API's query: docs/http-api.md, "Lists"),
// each with a sparkline of its depth since the console opened.
import {get, seg} from '../api.js';
import {sparkline} from '../charts.js';
import {el, link, number, rate, replace, table} from '../dom.js';
import {queueKey, record, values} from '../history.js';
import {refresh} from '../refresh.js';

const PAGE_SIZE = 50;

export function queueHref(vhost, name) { return `#/queues/${seg(vhost)}/${seg(name)}`; }

export function queues() {
  const state = {filter: '', sort: 'name', reverse: false, page: 1};
  const list = el('div');
  const pager = el('div', {class: 'pager'});
  const filter = el('input', {type: 'search', placeholder: 'Filter by name', 'aria-label': 'filter',
                              on: {input: () => {
                                state.filter = filter.value;
                                state.page = 1;
                                refresh();
                              }}});
  return {
    title: 'Queues',
    mount(main) { replace(main, el('h1', {}, 'Queues'), filter, list, pager); },
    async refresh() {
      const query = new URLSearchParams({page: state.page, page_size: PAGE_SIZE, sort: state.sort,
                                         sort_reverse: state.reverse});
      if (state.filter) query.set('name', state.filter);
      let page;
      try {
        page = await get(`/queues?${query}`);
      } catch (error) {
        if (error.error !== 'page_out_of_range') throw error;
        state.page = 1;  // queues went since: back to the first page
        return refresh();
      }
      for (const q of page.items) record(queueKey('depth', q.vhost, q.name), q.messages);
      const sorting = {key: state.sort, reverse: state.reverse, onSort: (key) => {
        state.reverse = state.sort === key ? !state.reverse : key !== 'name';
        state.sort = key;
        refresh();
      }};
      replace(list, table([
        {label: 'Vhost', sort: 'vhost', value: (q) => q.vhost},
        {label: 'Name', sort: 'name', value: (q) => link(queueHref(q.vhost, q.name), q.name)},
        {label: 'Ready', sort: 'messages_ready', value: (q) => number(q.messages_ready)},
        {label: 'Unacked', sort: 'messages_unacknowledged', value: (q) => number(q.messages_unacknowledged)},
        {label: 'Delayed', sort: 'messages_delayed', value: (q) => number(q.messages_delayed)},
        {label: 'Depth', value: (q) => sparkline(values(queueKey('depth', q.vhost, q.name)))},
        {label: 'Consumers', sort: 'consumers', value: (q) => number(q.consumers)},
        {label: 'Publish', sort: 'message_stats.publish_details.rate', value: (q) => rate(q.message_stats?.publish_details?.rate)},
        {label: 'Deliver', sort: 'message_stats.deliver_get_details.rate', value: (q) => rate(q.message_stats?.deliver_get_details?.rate)},
        {label: 'Policy', value: (q) => q.policy ?? ''},
      ], page.items, sorting));
      replace(pager,
              el('button', {disabled: state.page <= 1, on: {click: () => { state.page--; refresh(); }}}, '‹ Previous'),
              ` page ${page.page} of ${Math.max(1, page.page_count)} (${number(page.filtered_count)} of ${number(page.total_count)} queues) `,
              el('button', {disabled: state.page >= page.page_count, on: {click: () => { state.page++; refresh(); }}}, 'Next ›'));
    },
  };
}
