// The console in a real browser: headless Debian chromium driven by
// playwright-core, against the cluster tests/console.rs starts. Each step
// throws on failure; measurements are printed as `measure <name> <value>`
// lines for the Rust side (and docs/console.md).
//
// Environment: CONSOLE_URL (the node the page is opened on), CONSOLE_BOOTSTRAP
// (Kafka), CONSOLE_KILL_PID / CONSOLE_KILL_NODE (the node to kill -9),
// CONSOLE_NODE_TIMEOUT_MS, CONSOLE_AUTH_URL / CONSOLE_ADMIN_TOKEN (a node
// with --auth on), CONSOLE_SHOTS (where screenshots go).
'use strict';

const { chromium } = require('playwright-core');
const { Kafka, logLevel } = require('kafkajs');
const path = require('path');

const URL_ = process.env.CONSOLE_URL;
const AUTH_URL = process.env.CONSOLE_AUTH_URL;
const SHOTS = process.env.CONSOLE_SHOTS;
const TOPIC = 'console-orders';
const GROUP = 'console-group';

function measure(name, value) { console.log(`measure ${name} ${value}`); }
function step(s) { console.log(`step ${s}`); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

// Every request the page makes, to prove it stays on its node.
function watch(page, origin, outside) {
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(origin + '/') && !u.startsWith('data:')) outside.push(u);
  });
  page.on('pageerror', (e) => outside.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') console.log(`browser console error: ${m.text()}`); });
}

async function until(what, fn, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

async function open(browser, origin) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await ctx.newPage();
  const outside = [];
  watch(page, origin, outside);
  page.on('dialog', (d) => d.accept());
  return { ctx, page, outside };
}

async function main() {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking'],
  });
  const kafka = new Kafka({
    clientId: 'console-test', brokers: process.env.CONSOLE_BOOTSTRAP.split(','), logLevel: logLevel.NOTHING,
    connectionTimeout: 5000, requestTimeout: 15000, retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 },
  });
  const { page, outside } = await open(browser, URL_);

  step('overview');
  await page.goto(`${URL_}/ui`);
  await page.waitForSelector('#node-table tr[data-status="live"]');
  await until('three live nodes', async () => (await page.locator('#node-table tr[data-status="live"]').count()) === 3);
  const sizes = await page.evaluate(() => performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
    .filter((e) => e.name.includes('/ui')).map((e) => [e.name.replace(location.origin, ''), e.transferSize, e.decodedBodySize]));
  for (const [name, transfer, decoded] of sizes) measure(`transfer ${name}`, `${transfer} ${decoded}`);
  // Every node's WAL backlog, the others' fetched through n1.
  for (const n of ['n1', 'n2', 'n3']) {
    await until(`${n}'s WAL backlog`, async () => /^\d+(\.\d)? (B|KiB|MiB)$/.test(await page.textContent(`#node-table td[data-backlog="${n}"]`)));
  }
  measure('transfer total', sizes.reduce((s, x) => s + x[1], 0));
  await shot(page, 'overview');

  step('create a topic from the page');
  await page.click('a[data-nav="topics"]');
  await page.fill('#create-topic input[name="name"]', TOPIC);
  await page.fill('#create-topic input[name="partitions"]', '3');
  await page.click('#create-topic button[type="submit"]');
  await page.waitForSelector(`#topic-table tr[data-topic="${TOPIC}"]`);
  await page.click(`a[href="#/topic/${TOPIC}"]`);
  await until('every partition open with an owner', async () =>
    (await page.locator('#partition-table tr[data-partition]').count()) === 3 &&
    (await page.locator('#partition-table td:text("open")').count()) === 3);
  await shot(page, 'topic');

  step('transfer a partition from the page');
  const owner = async () => (await page.textContent('#partition-table tr[data-partition="2"] td:nth-child(2)')).trim();
  const from = await owner();
  const target = ['n1', 'n2', 'n3'].find((n) => n !== from);
  await page.selectOption('select[data-to="2"]', target);
  await page.click('button[data-transfer="2"]');
  const moved = Date.now();
  await until(`partition 2 owned by ${target}`, async () => (await owner()) === target, 30000);
  measure('transfer shown ms', Date.now() - moved);

  step('live tail');
  await page.goto(`${URL_}/ui#/p/${TOPIC}/0`);
  await page.click('#tail-toggle');
  await until('the tail to connect', async () => (await page.textContent('#tail-count')) === 'connected');
  const producer = kafka.producer();
  await producer.connect();
  const value = JSON.stringify({ order: 42, item: 'console' });
  const t0 = Date.now();
  const [ack] = await producer.send({ topic: TOPIC, acks: -1, messages: [{ partition: 0, key: 'k-42', value, headers: { source: 'kafkajs' } }] });
  const acked = Date.now();
  const offset = ack.baseOffset;
  await page.waitForSelector(`#tail tr[data-offset="${offset}"]`, { timeout: 5000 });
  const seen = Date.now();
  measure('tail ms after ack', seen - acked);
  measure('tail ms after send', seen - t0);
  if (seen - acked > 1000) throw new Error(`the record reached the tail ${seen - acked} ms after its acknowledgement`);
  const shown = await page.textContent(`#tail tr[data-offset="${offset}"]`);
  if (!shown.includes('k-42') || !shown.includes('"order":42') || !shown.includes('source=kafkajs')) throw new Error(`tail row: ${shown}`);
  // Record bytes are shown as text, never as markup.
  const hostile = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>';
  const [h] = await producer.send({ topic: TOPIC, acks: -1, messages: [{ partition: 0, key: '<b>k</b>', value: hostile }] });
  await page.waitForSelector(`#tail tr[data-offset="${h.baseOffset}"]`, { timeout: 5000 });
  const row = await page.textContent(`#tail tr[data-offset="${h.baseOffset}"]`);
  if (!row.includes(hostile) || !row.includes('<b>k</b>')) throw new Error(`markup not shown as text: ${row}`);
  if ((await page.evaluate(() => window.__xss)) !== undefined) throw new Error('a record value ran as script');
  if ((await page.locator('#tail img, #tail b, #tail script').count()) !== 0) throw new Error('a record value became markup');
  await page.selectOption('#browse select[name="format"]', 'json');
  await page.click('#browse button[type="submit"]');
  await page.waitForSelector('#record-table tr[data-offset]');
  if (!(await page.textContent('#record-table')).includes('"item": "console"')) throw new Error('JSON view is not pretty-printed');
  await shot(page, 'partition');
  await page.selectOption('#browse select[name="format"]', 'hex');
  await page.click('#browse button[type="submit"]');
  await until('hex view', async () => (await page.textContent('#record-table')).includes('7b 22 6f 72'));

  step('consumer group lag');
  const batch = (n, from) => Array.from({ length: n }, (_, i) => ({ key: `k${from + i}`, value: `v${from + i}` }));
  await producer.send({ topic: TOPIC, acks: -1, messages: batch(30, 0) });
  const consume = async (expect) => {
    const consumer = kafka.consumer({ groupId: GROUP, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 });
    await consumer.connect();
    await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
    let got = 0;
    await consumer.run({ autoCommitInterval: 200, eachMessage: async () => { got++; } });
    await until(`${expect} records consumed`, async () => got >= expect, 30000);
    return consumer;
  };
  let consumer = await consume(32);
  await page.click('a[data-nav="groups"]');
  await until('the group at lag 0', async () => (await page.getAttribute(`#group-table tr[data-group="${GROUP}"]`, 'data-lag')) === '0', 30000);
  await page.click(`a[href="#/group/${GROUP}"]`);
  await page.waitForSelector('#member-table');
  await shot(page, 'group');
  await consumer.disconnect();
  await producer.send({ topic: TOPIC, acks: -1, messages: batch(20, 30) });
  await page.click('a[data-nav="groups"]');
  await until('lag 20 while nobody consumes', async () => (await page.getAttribute(`#group-table tr[data-group="${GROUP}"]`, 'data-lag')) === '20', 30000);
  await shot(page, 'groups');
  const resumed = Date.now();
  consumer = await consume(20);
  await until('the lag to fall to 0', async () => (await page.getAttribute(`#group-table tr[data-group="${GROUP}"]`, 'data-lag')) === '0', 30000);
  measure('lag 20 to 0 ms', Date.now() - resumed);
  await consumer.disconnect();

  step('durable streams');
  const put = (p, headers) => fetch(`${URL_}/v1/stream/${p}`, { method: 'PUT', headers: { 'content-type': 'text/plain', ...headers } });
  if (!(await put('console/events', { 'Stream-TTL': '3600' })).ok) throw new Error('create stream');
  await fetch(`${URL_}/v1/stream/console/events`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' });
  if (!(await put('console/events-fork', { 'Stream-Forked-From': '/v1/stream/console/events' })).ok) throw new Error('create fork');
  await page.click('a[data-nav="streams"]');
  await until('the stream and its fork', async () => {
    const t = await page.textContent('#streams');
    return t.includes('console/events-fork') && t.includes('console/events @');
  });
  await shot(page, 'streams');

  step('charts');
  await page.click('a[data-nav="charts"]');
  // A steady trickle for the charts to show: 20 records every 250 ms for 12 s.
  for (let i = 0; i < 48; i++) {
    await producer.send({ topic: TOPIC, acks: -1, messages: batch(20, 100 + i * 20) });
    await sleep(250);
  }
  await until('a chart with points', async () => (await page.locator('svg.chart polyline').count()) >= 7);
  await shot(page, 'charts');
  // Another node's charts, through this one.
  await page.selectOption('#chart-node', 'n2');
  await until("n2's charts", async () => (await page.locator('svg.chart polyline').count()) >= 7 &&
    !(await page.textContent('#cards')).includes('appended: —'));
  await producer.disconnect();

  step('kill -9 a node');
  await page.click('a[data-nav="overview"]');
  await page.waitForSelector('#node-table');
  const victim = process.env.CONSOLE_KILL_NODE;
  const killed = Date.now();
  process.kill(Number(process.env.CONSOLE_KILL_PID), 'SIGKILL');
  measure('killed at', new Date(killed).toISOString());
  await page.waitForSelector(`#node-table tr[data-node="${victim}"][data-status="fenced"]`, { timeout: 30000 });
  const fencedAfter = Date.now() - killed;
  measure('fenced in overview ms', fencedAfter);
  // Liveness is counted in heartbeats: the fence lands within the node
  // timeout plus one heartbeat interval of the kill, and the page shows it
  // at its next refresh (tests/console.rs checks that part against the
  // holder's log). The whole is asserted with 3 s to spare for a loaded
  // machine; the measured values are in docs/console.md.
  const expected = Number(process.env.CONSOLE_NODE_TIMEOUT_MS) + Number(process.env.CONSOLE_HEARTBEAT_MS) + 2000;
  measure('node timeout plus a heartbeat plus one refresh ms', expected);
  if (fencedAfter > expected + 3000) throw new Error(`fenced shown after ${fencedAfter} ms, over ${expected} + 3000`);
  await shot(page, 'overview-fenced');

  step('drain the node a second page is served from');
  const second = await open(browser, process.env.CONSOLE_SECOND_URL);
  await second.page.goto(`${process.env.CONSOLE_SECOND_URL}/ui`);
  const me = process.env.CONSOLE_SECOND_NODE;
  await second.page.click(`#node-table button[data-drain="${me}"]`);
  await second.page.waitForSelector('#banner[data-reason="drained"]:not([hidden])', { timeout: 10000 });
  await until('the drained node marked draining', async () =>
    (await page.getAttribute(`#node-table tr[data-node="${me}"]`, 'data-status')) === 'draining');
  await shot(second.page, 'drained-banner');

  step('shut the second page\'s node down (SIGTERM)');
  process.kill(Number(process.env.CONSOLE_SECOND_PID), 'SIGTERM');
  await second.page.waitForSelector('#banner[data-reason="draining"]:not([hidden])', { timeout: 10000 });
  await shot(second.page, 'shutdown-banner');
  await second.page.waitForSelector('#banner[data-reason="unreachable"]:not([hidden])', { timeout: 20000 });

  for (const o of [outside, second.outside]) if (o.length) throw new Error(`requests outside the node: ${o.join(', ')}`);
  measure('requests outside the node', 0);

  step('auth: a read-only token cannot delete a topic');
  const a = await open(browser, AUTH_URL);
  await a.page.goto(`${AUTH_URL}/ui#/topics`);
  await a.page.waitForSelector('#login:not([hidden])');
  await a.page.fill('#token', process.env.CONSOLE_ADMIN_TOKEN);
  await a.page.click('#login button');
  await a.page.fill('#create-topic input[name="name"]', 'guarded');
  await a.page.click('#create-topic button[type="submit"]');
  await a.page.waitForSelector('#topic-table tr[data-topic="guarded"]');
  await a.page.click('a[data-nav="admin"]');
  await a.page.fill('#issue input[name="name"]', 'viewer');
  await a.page.click('#issue button[type="submit"]');
  const viewer = (await a.page.waitForSelector('#new-token')).textContent();
  const viewerToken = await viewer;
  await a.page.waitForSelector('#token-table');
  await shot(a.page, 'tokens');
  await a.page.click('#signout');
  await a.page.waitForSelector('#login:not([hidden])');
  await a.page.fill('#token', viewerToken);
  await a.page.click('#login button');
  await a.page.click('a[data-nav="topics"]');
  await a.page.click('#topic-table button[data-delete="guarded"]');
  await until('a forbidden answer', async () => (await a.page.textContent('#toast')).includes('forbidden'));
  await shot(a.page, 'read-only-delete');
  const still = await fetch(`${AUTH_URL}/v1/topics/guarded`, { headers: { authorization: `Bearer ${process.env.CONSOLE_ADMIN_TOKEN}` } });
  if (still.status !== 200) throw new Error(`the topic is gone after a read-only delete: ${still.status}`);
  await a.page.click('a[data-nav="overview"]');
  await a.page.waitForSelector('#nodes p.err');
  if (!(await a.page.textContent('#nodes')).includes('forbidden')) throw new Error('a read-only token saw /admin/nodes');
  step('revoke the read-only token from the page');
  await a.page.click('#signout');
  await a.page.fill('#token', process.env.CONSOLE_ADMIN_TOKEN);
  await a.page.click('#login button');
  await a.page.click('a[data-nav="admin"]');
  await a.page.click('#token-table button[data-revoke]');
  await until('the viewer refused', async () =>
    (await fetch(`${AUTH_URL}/v1/topics`, { headers: { authorization: `Bearer ${viewerToken}` } })).status === 401);
  if (a.outside.length) throw new Error(`requests outside the node: ${a.outside.join(', ')}`);

  await browser.close();
  step('done');
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
