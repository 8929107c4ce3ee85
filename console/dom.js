// Building the page: elements are made with their text set as text, never parsed as HTML, so
// nothing a client put in a name, a header or a body can become markup.

// el('a', {href: '#/', class: 'x', on: {click: fn}}, 'text', child, ...)
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'on') {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (key === 'class') {
      node.className = value;
    } else {
      node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

export function number(n) {
  return n === undefined || n === null ? '–' : Number(n).toLocaleString('en-US');
}

export function rate(r) {
  if (r === undefined || r === null) return '–';
  return `${r < 10 ? Number(r).toFixed(1) : Math.round(r).toLocaleString('en-US')}/s`;
}

export function time(ms) {
  return ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '–';
}

export function json(value) { return JSON.stringify(value, null, 1); }

// A table: columns are {label, value(row) → node or text, sort: the API's sort key}.
// `sorting` {key, reverse, onSort(key)} makes the sortable headers buttons.
export function table(columns, rows, sorting) {
  const head = el('tr', {}, columns.map((column) => {
    if (!sorting || !column.sort) return el('th', {}, column.label);
    const active = sorting.key === column.sort;
    return el('th', {'aria-sort': active ? (sorting.reverse ? 'descending' : 'ascending') : null},
              el('button', {class: 'link', on: {click: () => sorting.onSort(column.sort)}},
                 column.label, active ? (sorting.reverse ? ' ▼' : ' ▲') : ''));
  }));
  const body = rows.length === 0
      ? [el('tr', {}, el('td', {colspan: columns.length, class: 'muted'}, 'None.'))]
      : rows.map((row) => el('tr', {}, columns.map((column) => el('td', {}, column.value(row)))));
  return el('table', {}, el('thead', {}, head), el('tbody', {}, body));
}

// A definition list of [label, value] pairs.
export function facts(pairs) {
  return el('dl', {class: 'facts'}, pairs.map(([label, value]) => [el('dt', {}, label),
                                                                   el('dd', {}, value)]));
}

export function link(href, text) { return el('a', {href}, text); }
