// Transactions that write records, with kafkajs (its own transaction
// manager, unmodified), driven by tests/kafka_transactions_clients.rs (run
// with NODE_PATH pointing at .services/npm/node_modules). Prints one JSON
// line per step:
//
// - rounds: ROUNDS transactions of PER_ROUND records over the topic's 3
//   partitions (record i to partition i % 3), committed and aborted
//   alternately, with each commit's latency.
// - read: what a read_committed (readUncommitted: false) and a
//   read_uncommitted consumer read from the start, each in a fresh group
//   that never commits, up to every partition's end offset (ListOffsets
//   latest, taken after the last transaction ended).
// - zombie: a second producer with the same transactionalId fences the
//   first, whose later produce and commit are refused.
//
// Usage: txn_kafkajs.js BOOTSTRAP TOPIC ROUNDS PER_ROUND
'use strict';

const crypto = require('crypto');
const { Kafka, logLevel } = require('kafkajs');

const PARTITIONS = 3;
// Every step gives up after this long; the Rust test's own timeout is longer.
const DEADLINE_MS = 60000;

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

function client(bootstrap) {
  return new Kafka({
    clientId: 'sluice-txn-test',
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 2000 },
  });
}

function withDeadline(promise, what, ms = DEADLINE_MS) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

async function producer(kafka, transactionalId) {
  const p = kafka.producer({
    transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: 60000,
    allowAutoTopicCreation: false,
  });
  await withDeadline(p.connect(), 'producer connect');
  return p;
}

async function errorOf(f) {
  try {
    await withDeadline(f(), 'zombie step', 20000);
    return null;
  } catch (e) {
    return { name: e.name, type: e.type ?? null, code: e.code ?? null, message: e.message };
  }
}

function percentile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : null;
}

// Every message from the start to each partition's end offset, per
// partition in order; and whether every partition reached its end. The
// consumer's position in a partition is the offset after the last batch it
// fetched there, including batches it filtered out entirely (control
// batches, aborted ones), which kafkajs reports by batch events.
async function readAll(kafka, topic, readUncommitted) {
  const admin = kafka.admin();
  await withDeadline(admin.connect(), 'admin connect');
  const offsets = await withDeadline(admin.fetchTopicOffsets(topic), 'fetchTopicOffsets');
  await admin.disconnect();
  const end = {};
  for (const o of offsets) end[o.partition] = Number(o.high);
  const consumer = kafka.consumer({
    groupId: `txn-reader-${crypto.randomUUID()}`,
    readUncommitted,
    sessionTimeout: 6000,
    heartbeatInterval: 500,
    rebalanceTimeout: 10000,
    maxWaitTimeInMs: 200,
  });
  const out = {};
  const position = {};
  for (let p = 0; p < PARTITIONS; p++) {
    out[p] = [];
    position[p] = 0;
  }
  const reachedEnd = () => Object.keys(end).every((p) => position[p] >= end[p]);
  let finished;
  const done = new Promise((resolve) => {
    finished = resolve;
  });
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    if (payload.lastOffset != null) {
      position[payload.partition] = Math.max(position[payload.partition], Number(payload.lastOffset) + 1);
    }
    if (reachedEnd()) finished();
  });
  await withDeadline(consumer.connect(), 'consumer connect');
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      out[partition].push([Number(message.offset), message.value.toString()]);
    },
  });
  if (!reachedEnd()) {
    let timer;
    await Promise.race([done, new Promise((resolve) => (timer = setTimeout(resolve, DEADLINE_MS)))]);
    clearTimeout(timer);
  }
  await consumer.disconnect();
  return { out, reached: reachedEnd(), end, position };
}

async function run() {
  const [bootstrap, topic, roundsArg, perArg] = process.argv.slice(2);
  const rounds = Number(roundsArg);
  const per = Number(perArg);
  const kafka = client(bootstrap);

  const p = await producer(kafka, 'txn-kafkajs');
  const committed = [];
  const aborted = [];
  const commitMs = [];
  for (let r = 0; r < rounds; r++) {
    const txn = await withDeadline(p.transaction(), 'begin');
    const values = [];
    for (let i = 0; i < per; i++) values.push(`r${r}-${i}`);
    // One send: kafkajs groups the messages by partition, keeping their
    // order; it resolves once every partition's leader answered, so the
    // aborted records are in the log before the abort.
    await withDeadline(
      txn.send({ topic, acks: -1, messages: values.map((value, i) => ({ value, partition: i % PARTITIONS })) }),
      `send round ${r}`,
    );
    if (r % 2 === 0) {
      const t = process.hrtime.bigint();
      await withDeadline(txn.commit(), `commit round ${r}`);
      commitMs.push(Number(process.hrtime.bigint() - t) / 1e6);
      committed.push(...values);
    } else {
      await withDeadline(txn.abort(), `abort round ${r}`);
      aborted.push(...values);
    }
  }
  await p.disconnect();
  const rounded = commitMs.map((ms) => Math.round(ms * 100) / 100).sort((a, b) => a - b);
  emit({
    step: 'rounds',
    committed: committed.length,
    aborted: aborted.length,
    commit_ms_p50: percentile(rounded, 0.5),
    commit_ms_max: rounded[rounded.length - 1],
    commit_ms: rounded,
  });

  const rc = await readAll(kafka, topic, false);
  const ru = await readAll(kafka, topic, true);
  const values = (read) => Object.values(read.out).flatMap((part) => part.map(([, v]) => v));
  const rcValues = values(rc);
  const ruValues = values(ru);
  const abortedSet = new Set(aborted);
  const all = [];
  for (let r = 0; r < rounds; r++) for (let i = 0; i < per; i++) all.push(`r${r}-${i}`);
  const expected = (vs, part) => vs.filter((v) => Number(v.split('-')[1]) % PARTITIONS === part);
  const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  const inOrder = (read, vs) =>
    [...Array(PARTITIONS).keys()].every((part) =>
      same(
        read.out[part].map(([, v]) => v),
        expected(vs, part),
      ),
    );
  const sorted = (vs) => [...vs].sort();
  const perPartition = {};
  for (const [part, rs] of Object.entries(ru.out)) perPartition[part] = rs.length;
  emit({
    step: 'read',
    committed_reached_end: rc.reached,
    uncommitted_reached_end: ru.reached,
    committed_end_offsets: rc.end,
    committed_positions: rc.position,
    uncommitted_end_offsets: ru.end,
    read_committed: rcValues.length,
    read_committed_exact: same(sorted(rcValues), sorted(committed)),
    read_committed_in_order: inOrder(rc, committed),
    read_committed_aborted: rcValues.filter((v) => abortedSet.has(v)).length,
    read_uncommitted: ruValues.length,
    read_uncommitted_exact: same(sorted(ruValues), sorted(committed.concat(aborted))),
    read_uncommitted_in_order: inOrder(ru, all),
    // A control record surfacing as a message would not be one of ours.
    strangers: ruValues.filter((v) => !v.startsWith('r')).length,
    uncommitted_per_partition: perPartition,
    uncommitted_sample: ruValues.slice(0, 3).concat(ruValues.slice(-3)),
  });

  // Zombie fencing.
  const z1 = await producer(kafka, 'txn-kafkajs-zombie');
  const t1 = await withDeadline(z1.transaction(), 'zombie begin');
  await withDeadline(t1.send({ topic, acks: -1, messages: [{ value: 'z-before', partition: 0 }] }), 'z-before');
  const z2 = await producer(kafka, 'txn-kafkajs-zombie');
  // InitProducerId at the second instance fences the first and aborts its
  // transaction.
  const t2 = await withDeadline(z2.transaction(), 'second begin');
  // Partition 0 is in z1's transaction already: this goes straight to the
  // leader, which the abort marker at the bumped epoch fenced.
  const produceError = await errorOf(() =>
    t1.send({ topic, acks: -1, messages: [{ value: 'z-after', partition: 0 }] }),
  );
  // A partition not in it needs AddPartitionsToTxn, which the coordinator refuses.
  const addError = await errorOf(() => t1.send({ topic, acks: -1, messages: [{ value: 'z-after', partition: 1 }] }));
  const commitError = await errorOf(() => t1.commit());
  await z1.disconnect().catch(() => {});
  await withDeadline(t2.send({ topic, acks: -1, messages: [{ value: 'z-second', partition: 2 }] }), 'z-second');
  await withDeadline(t2.commit(), 'second commit');
  await z2.disconnect();
  const after = await readAll(kafka, topic, false);
  const seen = new Set(values(after));
  emit({
    step: 'zombie',
    produce_error: produceError,
    add_error: addError,
    commit_error: commitError,
    reached_end: after.reached,
    before_visible: seen.has('z-before'),
    after_visible: seen.has('z-after'),
    second_visible: seen.has('z-second'),
  });
}

run().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`kafkajs: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
