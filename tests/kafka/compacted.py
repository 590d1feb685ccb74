"""A compacted topic through Kafka clients.

Usage: compacted.py BOOTSTRAP TOPIC produce KEYS ROUNDS [VALUE_BYTES]
       compacted.py BOOTSTRAP TOPIC consume

produce: creates TOPIC (one partition, cleanup.policy=compact,
delete.retention.ms=0) through the admin API, sends ROUNDS rounds of
updates to KEYS keys with confluent-kafka (the last round deletes every
fifth key with a tombstone), then one record without a key, which the
broker must refuse. A value is "v<round>-<key>", padded with "." to
VALUE_BYTES when that is given. Prints {"step": "produced", ...}.

consume: reads the partition from the beginning to its end with
confluent-kafka and with kafka-python (when installed), each printing
{"step": "consumed", "client": ..., "records": [[offset, key, value], ...]}.
"""

import json
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def value_of(r, k, value_bytes):
    return f"v{r}-{k}".ljust(value_bytes, ".").encode()


def produce(bootstrap, topic, keys, rounds, value_bytes):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # Dirty ratio 0.01: compacted to the end whatever the last chunk holds.
    config = {"cleanup.policy": "compact", "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01"}
    for _, f in admin.create_topics([NewTopic(topic, 1, config=config)], operation_timeout=10).items():
        f.result()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "enable.idempotence": True})
    errors = []

    def done(err, _msg):
        if err is not None:
            errors.append(err.name())

    sent = 0
    for r in range(rounds):
        for k in range(keys):
            tombstone = r == rounds - 1 and k % 5 == 0
            value = None if tombstone else value_of(r, k, value_bytes)
            p.produce(topic, key=f"key{k}".encode(), value=value, on_delivery=done)
            sent += 1
        p.flush(30)
    ok_errors = list(errors)
    keyless = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0})
    keyless_errors = []
    keyless.produce(topic, value=b"no key", on_delivery=lambda err, _m: keyless_errors.append(err and err.name()))
    keyless.flush(30)
    print(json.dumps({"step": "produced", "sent": sent, "errors": ok_errors, "keyless": keyless_errors}), flush=True)


def consume_confluent(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compacted-reader", "enable.auto.commit": False})
    tp = TopicPartition(topic, 0, 0)
    _, high = c.get_watermark_offsets(tp, timeout=10)
    c.assign([tp])
    out = []
    while not out or out[-1][0] < high - 1:
        m = c.poll(5)
        if m is None:
            break
        if m.error():
            raise KafkaException(m.error())
        value = m.value().decode() if m.value() is not None else None
        out.append([m.offset(), m.key().decode(), value])
    c.close()
    return out, high


def consume_kafka_python(bootstrap, topic):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    tp = KTP(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    high = c.end_offsets([tp])[tp]
    out = []
    for m in c:
        value = m.value.decode() if m.value is not None else None
        out.append([m.offset, m.key.decode(), value])
        if m.offset >= high - 1:
            break
    c.close()
    return out, high


def main():
    bootstrap, topic, phase = sys.argv[1], sys.argv[2], sys.argv[3]
    if phase == "produce":
        value_bytes = int(sys.argv[6]) if len(sys.argv) > 6 else 0
        produce(bootstrap, topic, int(sys.argv[4]), int(sys.argv[5]), value_bytes)
        return
    records, high = consume_confluent(bootstrap, topic)
    print(json.dumps({"step": "consumed", "client": "confluent-kafka", "high": high, "records": records}), flush=True)
    try:
        import kafka  # noqa: F401
    except ImportError:
        return
    records, high = consume_kafka_python(bootstrap, topic)
    print(json.dumps({"step": "consumed", "client": "kafka-python", "high": high, "records": records}), flush=True)


if __name__ == "__main__":
    main()
