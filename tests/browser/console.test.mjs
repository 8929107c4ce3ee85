// The web console (docs/console.md) in a real browser: Debian's chromium, driven by
// playwright-core, against the real wharfd with data made through the HTTP API and a pika
// client. Every view renders what the broker holds, a redrive started from the page moves the
// messages, and errors are shown, not swallowed.
//
// Run by tests/browser/run.sh (ctest browser.console): WHARFD is the binary; SCREENSHOTS, when
// set, a directory for a PNG of each view (docs/console/ holds the committed ones).
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {after, before, test} from 'node:test';
import {chromium} from 'playwright-core';

const WHARFD = process.env.WHARFD;
const SHOTS = process.env.SCREENSHOTS;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wharf-console-'));
let wharfd, client, browser, page, base;
const pageErrors = [];  // uncaught errors of the console's scripts: none may happen

async function waitFor(check, what, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// The HTTP API as guest, for making data and checking what the page did.
async function api(method, p, body) {
  const response = await fetch(`${base}/api${p}`, {
    method,
    headers: {Authorization: `Basic ${Buffer.from('guest:guest').toString('base64')}`,
              'Content-Type': 'application/json'},
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  assert.ok(response.ok, `${method} ${p}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const publish = (exchange, routingKey, payload, extra = {}) =>
  api('POST', `/exchanges/%2F/${exchange}/publish`, {
    routing_key: routingKey, payload, payload_encoding: extra.encoding ?? 'string',
    properties: {delivery_mode: 2, ...(extra.properties ?? {})},
  });

async function shot(name) {
  if (SHOTS) await page.screenshot({path: path.join(SHOTS, `${name}.png`), fullPage: true});
}

async function go(hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
}

before(async () => {
  const ready = path.join(dir, 'ready');
  wharfd = spawn(WHARFD, ['--listen', '127.0.0.1:0', '--amqp-listen', '127.0.0.1:0',
                          '--metrics-listen', '127.0.0.1:0', '--data-dir', path.join(dir, 'data'),
                          '--ready-file', ready],
                 {stdio: ['ignore', fs.openSync(path.join(dir, 'wharfd.log'), 'w'), 'inherit']});
  const ports = await waitFor(() => {
    if (!fs.existsSync(ready)) return null;
    const found = {};
    for (const line of fs.readFileSync(ready, 'utf8').split('\n')) {
      const [name, address] = line.split(' ');
      if (address) found[name] = Number(address.split(':').pop());
    }
    return found.metrics && found.amqp ? found : null;
  }, 'wharfd to start');
  base = `http://127.0.0.1:${ports.metrics}`;

  // Data: a queue with text and binary messages, a queue that dead-letters into a DLQ (three
  // rejected into it), a delayed message, a policy, a user; and a pika consumer.
  await api('PUT', '/queues/%2F/orders', {durable: true});
  await api('PUT', '/queues/%2F/work.dlq', {durable: true});
  await api('PUT', '/queues/%2F/work', {durable: true, arguments: {
    'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': 'work.dlq'}});
  await api('PUT', '/queues/%2F/events', {durable: true});
  await api('PUT', '/queues/%2F/later', {durable: true});
  await api('PUT', '/exchanges/%2F/delays', {type: 'x-delayed-message', durable: true,
                                             arguments: {'x-delayed-type': 'direct'}});
  await api('POST', '/bindings/%2F/e/delays/q/later', {routing_key: 'later'});
  for (let i = 0; i < 3; i++) await publish('amq.default', 'orders', `order ${i}`, {properties: {headers: {tenant: 'acme'}}});
  await publish('amq.default', 'orders', Buffer.from([0, 1, 2, 0xff, 0xfe]).toString('base64'), {encoding: 'base64'});
  for (let i = 0; i < 3; i++) await publish('amq.default', 'work', `job ${i}`);
  await api('POST', '/queues/%2F/work/get', {count: 3, ackmode: 'reject_requeue_false', encoding: 'auto'});
  await publish('delays', 'later', 'in an hour', {properties: {headers: {'x-delay': 3600000}}});
  await api('PUT', '/policies/%2F/cap-orders', {pattern: '^orders$', definition: {'max-length': 1000}});
  await api('PUT', '/users/ops', {password: 'ops-pw', tags: 'monitoring'});
  client = spawn('/usr/bin/python3', ['-c', `
import pika
c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", ${ports.amqp}))
ch = c.channel()
ch.basic_consume("events", lambda *a: None, consumer_tag="events-reader")
print("consuming", flush=True)
for _ in range(1200):  # at most 10 minutes
    c.process_data_events(0.5)
`], {stdio: ['ignore', 'pipe', 'inherit']});
  await waitFor(async () => (await api('GET', '/consumers')).length === 1, 'the pika consumer');

  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage({viewport: {width: 1280, height: 900}});
  page.setDefaultTimeout(15000);
  page.on('dialog', (dialog) => dialog.accept());
  page.on('pageerror', (error) => pageErrors.push(error.message));
});

after(async () => {
  await browser?.close();
  client?.kill();
  if (wharfd && wharfd.exitCode === null && wharfd.signalCode === null) {
    const exited = new Promise((resolve) => wharfd.on('exit', resolve));
    wharfd.kill('SIGTERM');
    await exited;
  }
  const log = fs.existsSync(path.join(dir, 'wharfd.log')) ? fs.readFileSync(path.join(dir, 'wharfd.log'), 'utf8') : '';
  fs.rmSync(dir, {recursive: true, force: true});
  assert.equal(wharfd?.exitCode, 0, `wharfd exited ${wharfd?.exitCode} ${wharfd?.signalCode}:\n${log.slice(-5000)}`);
  assert.deepEqual(pageErrors, []);
});

test('a wrong password is shown, then the overview after the right one', async () => {
  await page.goto(`${base}/`);
  await page.getByLabel('user').fill('guest');
  await page.getByLabel('password').fill('wrong');
  await page.getByRole('button', {name: 'Log in'}).click();
  await page.locator('#error', {hasText: 'wrong user name or password'}).waitFor();
  await page.getByLabel('password').fill('guest');
  await page.getByRole('button', {name: 'Log in'}).click();
  await page.getByRole('heading', {name: 'Overview'}).waitFor();
  await page.locator('dd', {hasText: 'ready'}).first().waitFor();
  assert.equal(await page.locator('svg.chart').count(), 2);
  assert.equal(await page.locator('#error').isHidden(), true);
  // Lines at once: the broker's samples since it started (GET /api/overview/history), then
  // the page's own.
  await page.locator('svg.chart path.s1').nth(1).waitFor();
  await shot('overview');
});

test('queues: listed, filtered and sorted, each with a sparkline', async () => {
  await go('#/queues');
  await page.getByRole('link', {name: 'orders'}).waitFor();
  for (const name of ['events', 'later', 'work', 'work.dlq']) {
    await page.getByRole('link', {name, exact: true}).waitFor();
  }
  assert.equal(await page.locator('svg.spark').count(), 5);
  await shot('queues');
  await page.getByLabel('filter').fill('work');
  await waitFor(async () => (await page.locator('tbody tr').count()) === 2, 'the filter');
  await page.getByRole('button', {name: 'Ready'}).click();  // the deepest first
  await waitFor(async () => (await page.locator('tbody tr td:nth-child(2)').first().textContent()) === 'work.dlq', 'sorting');
});

test("a queue's page: arguments, policy, messages with headers and bodies as text or hex", async () => {
  await go('#/queues/%2F/orders');
  await page.locator('article.message').nth(3).waitFor();
  assert.equal(await page.locator('article.message').count(), 4);
  await page.locator('dd', {hasText: 'cap-orders'}).waitFor();  // the policy
  await page.locator('dd pre', {hasText: '"max-length": 1000'}).first().waitFor();
  const first = page.locator('article.message').first();
  assert.equal(await first.locator('pre.body').textContent(), 'order 0');
  await first.locator('summary', {hasText: 'Properties and headers'}).click();
  await first.locator('pre', {hasText: '"tenant": "acme"'}).waitFor();
  const binary = page.locator('article.message').nth(3);
  await binary.getByRole('button', {name: 'Hex'}).click();
  assert.match(await binary.locator('pre.body').textContent(), /^00000000  00 01 02 ff fe/);
  await shot('queue');
});

test('errors from an action are shown, not swallowed', async () => {
  await page.getByRole('button', {name: 'Move', exact: true}).click();  // no target queue
  await page.locator('#error', {hasText: 'a move needs "to", a queue'}).waitFor();
});

test('a redrive started from the page moves the dead letters back, with its progress', async () => {
  await go('#/queues/%2F/work.dlq');
  await page.locator('article.message').nth(2).waitFor();
  await page.locator('article.message td', {hasText: 'rejected'}).first().waitFor();  // death records
  await shot('dead-letter-queue');
  await page.locator('#redrive').click();
  await page.locator('#redrive-progress', {hasText: 'finished: moved 3 of 3'}).waitFor();
  assert.equal(await page.locator('#redrive-progress progress').getAttribute('value'), '1');
  await page.getByText('No ready messages.').waitFor();
  await shot('redrive');
  const work = await api('GET', '/queues/%2F/work');
  assert.equal(work.messages_ready, 3);
});

test('delayed messages are listed and cancelled from the page', async () => {
  await go('#/queues/%2F/later');
  await page.getByRole('button', {name: 'Cancel'}).click();
  await page.getByRole('button', {name: 'Cancel'}).waitFor({state: 'detached'});
  assert.equal((await api('GET', '/queues/%2F/later/delayed')).messages.length, 0);
});

test('exchanges and their bindings', async () => {
  await go('#/exchanges');
  await page.getByRole('link', {name: 'delays'}).click();
  await page.getByRole('heading', {name: 'Exchange delays'}).waitFor();
  await page.getByRole('link', {name: 'later'}).waitFor();
  await page.locator('dd', {hasText: 'x-delayed-message'}).waitFor();
  await shot('exchange');
});

test('connections and consumers', async () => {
  await go('#/connections');
  await page.locator('td', {hasText: 'AMQP 0-9-1'}).waitFor();
  await page.locator('td', {hasText: 'events-reader'}).waitFor();
  await shot('connections');
});

test('users, permissions and policies', async () => {
  await go('#/admin');
  await page.locator('td', {hasText: 'ops'}).first().waitFor();
  await page.locator('td', {hasText: 'cap-orders'}).waitFor();
  await shot('admin');
});

test('a user without the administrator tag sees why a list is missing', async () => {
  await page.getByRole('button', {name: 'Log out'}).click();
  await page.getByLabel('user').fill('ops');
  await page.getByLabel('password').fill('ops-pw');
  await page.getByRole('button', {name: 'Log in'}).click();
  await page.getByRole('heading', {name: 'Users and policies'}).waitFor();  // where it was
  await page.getByText('Not administrator user').first().waitFor();
  await page.getByText('Not policymaker user').waitFor();
  assert.equal(await page.locator('#who').textContent(), 'ops Log out');
});
