// Reads partition 0 of a compacted topic from the beginning to its end
// with kafkajs (unmodified), across the offsets compaction removed, driven
// by tests/kafka_compaction.rs (NODE_PATH at .services/npm/node_modules).
// Prints one JSON line: {"step": "consumed", "client": "kafkajs",
// "high": <end offset>, "records": [[offset, key, value], ...]}.
//
// Usage: compacted_kafkajs.js BOOTSTRAP TOPIC
'use strict';

const crypto = require('crypto');
const { Kafka, logLevel } = require('kafkajs');

const DEADLINE_MS = 60000;

async function run() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({
    clientId: 'sluice-compacted-test',
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 2000 },
  });
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  const high = Number(offsets.find((o) => o.partition === 0).high);
  const consumer = kafka.consumer({ groupId: `compacted-${crypto.randomUUID()}`, maxWaitTimeInMs: 200 });
  const records = [];
  let position = 0;
  let finished;
  const done = new Promise((resolve) => {
    finished = resolve;
  });
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    if (payload.lastOffset != null) position = Math.max(position, Number(payload.lastOffset) + 1);
    if (position >= high) finished();
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ message }) => {
      const value = message.value == null ? null : message.value.toString();
      records.push([Number(message.offset), message.key.toString(), value]);
    },
  });
  if (position < high) {
    let timer;
    await Promise.race([done, new Promise((resolve) => (timer = setTimeout(resolve, DEADLINE_MS)))]);
    clearTimeout(timer);
  }
  await consumer.disconnect();
  // To a pipe, stdout is asynchronous: exit only once the whole line is
  // out (process.exit cut it at 64 KiB with 8,000 1 KiB values).
  const line = `${JSON.stringify({ step: 'consumed', client: 'kafkajs', high, records })}\n`;
  await new Promise((resolve) => process.stdout.write(line, resolve));
}

run().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`${e.stack}\n`);
    process.exit(1);
  },
);
