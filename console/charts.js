// Charts as SVG, drawn here: a line chart of a few series over the last minutes, and a
// sparkline. A chart library would be most of the console's bytes for these two shapes
// (docs/console.md, "Why hand-written").

const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  return node;
}

function path(points, x, y) {
  return points.map(([t, v], i) => `${i ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`)
      .join('');
}

// series: [{label, points: [[ms, value], ...], class}]; the last `spanMs` up to now.
export function lineChart(series, {spanMs = 10 * 60 * 1000, width = 560, height = 160,
                                   unit = ''} = {}) {
  const now = Date.now();
  const left = 56, bottom = 18, top = 8;
  const max = Math.max(1, ...series.flatMap((s) => s.points.map(([, v]) => v)));
  const x = (t) => left + (width - left - 4) * (1 - (now - t) / spanMs);
  const y = (v) => top + (height - top - bottom) * (1 - v / max);
  const chart = svg('svg', {viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img'});
  for (const fraction of [0, 0.5, 1]) {
    const value = max * fraction;
    chart.append(svg('line', {x1: left, x2: width - 4, y1: y(value), y2: y(value), class: 'grid'}));
    const label = svg('text', {x: left - 6, y: y(value) + 4, 'text-anchor': 'end'});
    label.textContent = `${value < 10 ? value.toFixed(1) : Math.round(value)}${unit}`;
    chart.append(label);
  }
  const minutes = svg('text', {x: left, y: height - 4});
  minutes.textContent = `last ${Math.round(spanMs / 60000)} min`;
  chart.append(minutes);
  for (const s of series) {
    const points = s.points.filter(([t]) => now - t <= spanMs);
    if (points.length > 1) chart.append(svg('path', {d: path(points, x, y), class: s.class}));
  }
  const legend = document.createElement('div');
  legend.className = 'legend';
  for (const s of series) {
    const item = document.createElement('span');
    item.className = s.class;
    const last = s.points.length ? s.points[s.points.length - 1][1] : 0;
    item.textContent = `${s.label}: ${last < 10 ? last.toFixed(1) : Math.round(last)}${unit}`;
    legend.append(item);
  }
  const box = document.createElement('figure');
  box.append(chart, legend);
  return box;
}

// A small line of `values` (oldest first).
export function sparkline(values, {width = 90, height = 20} = {}) {
  const line = svg('svg', {viewBox: `0 0 ${width} ${height}`, class: 'spark', role: 'img'});
  if (values.length === 0) return line;
  if (values.length === 1) values = [values[0], values[0]];  // one sample: a level line
  const max = Math.max(1, ...values);
  const step = width / (values.length - 1);
  line.append(svg('path', {
    d: path(values.map((v, i) => [i, v]), (i) => i * step, (v) => height - 1 - (height - 2) * v / max),
  }));
  return line;
}
