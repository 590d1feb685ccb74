// A consumer-group member on kafkajs, speaking the line protocol of
// memberlib.py (classic protocol; kafkajs has no static membership or
// KIP-848). kafkajs reports each new assignment (GROUP_JOIN), not
// revocations: each is printed as the old partitions revoked, the new assigned.
//
// Usage: member_kafkajs.js BOOTSTRAP TOPIC GROUP [--session-ms N]
'use strict';

const readline = require('readline');
const { Kafka, logLevel } = require('kafkajs');

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

async function main() {
  const [bootstrap, topic, group, ...rest] = process.argv.slice(2);
  let sessionTimeout = 10000;
  for (let i = 0; i + 1 < rest.length; i += 2) {
    if (rest[i] === '--session-ms') sessionTimeout = Number(rest[i + 1]);
  }
  const kafka = new Kafka({
    clientId: 'sluice-member',
    brokers: bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 },
  });
  const consumer = kafka.consumer({ groupId: group, sessionTimeout, heartbeatInterval: 500, maxWaitTimeInMs: 200 });
  // kafkajs replaces the whole assignment on each join: say so as a
  // revocation of the old partitions and an assignment of the new.
  let current = [];
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const parts = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b);
    if (current.length) emit({ event: 'revoked', partitions: current });
    emit({ event: 'assigned', partitions: parts });
    current = parts;
  });
  consumer.on(consumer.events.CRASH, (e) => emit({ event: 'error', error: String(e.payload.error) }));
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      let last = null;
      for (const m of batch.messages) {
        emit({ event: 'record', p: batch.partition, o: Number(m.offset), v: m.value.toString() });
        resolveOffset(m.offset);
        last = Number(m.offset);
      }
      if (last !== null) {
        const next = String(last + 1);
        try {
          await consumer.commitOffsets([{ topic, partition: batch.partition, offset: next }]);
          emit({ event: 'committed', offsets: { [batch.partition]: Number(next) } });
        } catch (e) {
          emit({ event: 'commit_failed', error: String(e) });
        }
      }
      await heartbeat();
    },
  });
  const rl = readline.createInterface({ input: process.stdin });
  let done = false;
  const finish = async () => {
    if (done) return;
    done = true;
    await consumer.disconnect();
    emit({ event: 'closed' });
    process.exit(0);
  };
  rl.on('line', (line) => {
    if (line.trim() === 'crash') process.exit(0);
    if (line.trim() === 'leave') finish();
  });
  rl.on('close', finish);
}

main().catch((e) => {
  emit({ event: 'error', error: String(e) });
  process.exit(1);
});
