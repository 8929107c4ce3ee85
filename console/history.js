// What the console has seen: the samples of each refresh (rates, depths), kept for the last
// minutes so that charts and sparklines draw them. The overview's totals start with the
// broker's own samples of the last 10 minutes (GET /api/overview/history); a queue's start
// when its page or the list first shows it, and fill as the console refreshes.

const KEEP_MS = 10 * 60 * 1000;
const series = new Map();  // key -> [[ms, value], ...]

// The key of a queue's series: its vhost and name cannot run into each other.
export const queueKey = (what, vhost, name) => `${what}\u0000${vhost}\u0000${name}`;

let pruned = 0;

export function record(key, value, now = Date.now()) {
  let points = series.get(key);
  if (!points) series.set(key, points = []);
  points.push([now, Number(value) || 0]);
  while (points.length && now - points[0][0] > KEEP_MS) points.shift();
  if (now - pruned > KEEP_MS) {  // series no longer fed (a queue deleted, a page left) go
    pruned = now;
    for (const [k, p] of series) if (!p.length || now - p[p.length - 1][0] > KEEP_MS) series.delete(k);
  }
}

export function points(key) { return series.get(key) ?? []; }
export function values(key) { return points(key).map(([, v]) => v); }
