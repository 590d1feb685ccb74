// kafkajs driven by tests/kafka_clients.rs (run with NODE_PATH pointing at
// .services/npm/node_modules, where scripts/services.sh install puts it).
//
// Usage: kafkajs_client.js produce BOOTSTRAP TOPIC [--idempotent]
//        kafkajs_client.js consume BOOTSTRAP TOPIC COUNT
//        kafkajs_client.js group BOOTSTRAP TOPIC COUNT GROUP
//
// Same modes and JSON lines as the Python drivers (see clientlib.py).
// kafkajs always consumes in a group: consume uses a fresh group that never
// commits, starting from the beginning.
'use strict';

const crypto = require('crypto');
const { Kafka, Partitioners, logLevel } = require('kafkajs');

// Every step gives up after this long; the Rust test's own timeout is longer.
const DEADLINE_MS = 30000;
// After the wanted count, keep consuming this long: extra records are printed too.
const LINGER_MS = 1000;

function fail(why) {
  process.stderr.write(`${why}\n`);
  process.exit(1);
}

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

function client(bootstrap) {
  return new Kafka({
    clientId: 'sluice-test',
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 2000 },
  });
}

async function stdinLines() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks)
    .toString()
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

function withDeadline(promise, what) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${DEADLINE_MS} ms`)), DEADLINE_MS);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

async function produce(bootstrap, topic, idempotent) {
  const msgs = await stdinLines();
  const kafka = client(bootstrap);
  // Partition every message up front with kafkajs's default partitioner
  // (murmur2 of the key, like Java's), as send() would, so each answer's base
  // offset can be spread over its partition's messages in order.
  const admin = kafka.admin();
  await admin.connect();
  const { topics } = await withDeadline(admin.fetchTopicMetadata({ topics: [topic] }), 'metadata');
  await admin.disconnect();
  const partitionMetadata = topics[0].partitions;
  const partitioner = Partitioners.DefaultPartitioner();
  const messages = msgs.map((m) => {
    const message = { key: m.key == null ? null : m.key, value: m.value, headers: m.headers || {} };
    message.partition = m.partition != null ? m.partition : partitioner({ topic, partitionMetadata, message });
    return message;
  });
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
    ...(idempotent ? { idempotent: true, maxInFlightRequests: 1 } : {}),
  });
  await producer.connect();
  // One send: kafkajs groups the messages by partition, keeping their order,
  // and answers one base offset per partition.
  const answers = await withDeadline(producer.send({ topic, acks: -1, messages }), 'send');
  await producer.disconnect();
  const next = new Map(answers.map((a) => [a.partition, BigInt(a.baseOffset)]));
  for (const m of messages) {
    const o = next.get(m.partition);
    if (o === undefined) fail(`no answer for partition ${m.partition}: ${JSON.stringify(answers)}`);
    next.set(m.partition, o + 1n);
    emit({ partition: m.partition, offset: Number(o) });
  }
}

function record(partition, message) {
  const headers = {};
  for (const [k, v] of Object.entries(message.headers || {})) headers[k] = v.toString();
  return {
    partition,
    offset: Number(message.offset),
    key: message.key == null ? null : message.key.toString(),
    value: message.value.toString(),
    headers,
  };
}

async function read(bootstrap, topic, count, groupId, commit) {
  const consumer = client(bootstrap).consumer({
    groupId,
    sessionTimeout: 6000,
    heartbeatInterval: 500,
    rebalanceTimeout: 10000,
    maxWaitTimeInMs: 200,
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const got = [];
  let reached;
  const enough = new Promise((resolve) => {
    reached = resolve;
  });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      got.push(record(partition, message));
      if (got.length >= count) reached();
    },
  });
  let timer;
  await Promise.race([enough, new Promise((resolve) => (timer = setTimeout(resolve, DEADLINE_MS)))]);
  clearTimeout(timer);
  await new Promise((resolve) => setTimeout(resolve, LINGER_MS));
  if (commit) {
    const last = new Map();
    for (const r of got) last.set(r.partition, Math.max(last.get(r.partition) ?? -1, r.offset));
    const offsets = [...last].map(([partition, o]) => ({ topic, partition, offset: String(o + 1) }));
    await withDeadline(consumer.commitOffsets(offsets), 'commitOffsets');
  }
  await consumer.disconnect();
  for (const r of got) emit(r);
}

async function main() {
  const [mode, bootstrap, topic, ...rest] = process.argv.slice(2);
  if (mode === 'produce' && (rest.length === 0 || (rest.length === 1 && rest[0] === '--idempotent'))) {
    await produce(bootstrap, topic, rest[0] === '--idempotent');
  } else if (mode === 'consume' && rest.length === 1) {
    await read(bootstrap, topic, Number(rest[0]), `reader-${crypto.randomUUID()}`, false);
  } else if (mode === 'group' && rest.length === 2) {
    await read(bootstrap, topic, Number(rest[0]), rest[1], true);
  } else {
    fail('usage: produce BOOTSTRAP TOPIC [--idempotent] | consume BOOTSTRAP TOPIC COUNT | group BOOTSTRAP TOPIC COUNT GROUP');
  }
}

main().then(
  () => process.exit(0),
  (e) => fail(`kafkajs: ${e && e.stack ? e.stack : e}`),
);
