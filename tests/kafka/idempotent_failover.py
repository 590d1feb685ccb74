"""An idempotent librdkafka producer (confluent-kafka) writing at a steady
rate while the test kills a partition owner.

usage: idempotent_failover.py BOOTSTRAP TOPIC COUNT RATE

Prints {"progress": delivered} lines about every 0.2 s while producing, then
one final {"delivered": [[partition, offset, value], ...], "failed": [...],
"unflushed": n} line.
"""
import json
import sys
import time

from confluent_kafka import Producer

bootstrap, topic, count, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
delivered, failed = [], []


def on_delivery(err, msg):
    if err is not None:
        failed.append([msg.partition(), msg.value().decode(), str(err)])
    else:
        delivered.append([msg.partition(), msg.offset(), msg.value().decode()])


producer = Producer(
    {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 120000,
        "retry.backoff.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
        "reconnect.backoff.max.ms": 500,
    }
)

started = time.monotonic()
last_report = 0.0
for i in range(count):
    while True:
        try:
            producer.produce(topic, key=str(i % 16), value=f"m{i}", on_delivery=on_delivery)
            break
        except BufferError:
            producer.poll(0.05)
    producer.poll(0)
    # Pace to the rate, reporting progress as we go.
    while True:
        now = time.monotonic()
        if now - last_report >= 0.2:
            print(json.dumps({"progress": len(delivered)}), flush=True)
            last_report = now
        ahead = (i + 1) / rate - (now - started)
        if ahead <= 0:
            break
        producer.poll(min(ahead, 0.05))

unflushed = producer.flush(150)
print(json.dumps({"delivered": delivered, "failed": failed, "unflushed": unflushed}), flush=True)
