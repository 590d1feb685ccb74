"""Produce records with kafka-python, consume them back, and check them.

Usage: kafka_python_roundtrip.py BOOTSTRAP TOPIC COUNT

The topic is auto-created by the first Metadata request. Prints one JSON
line with what was consumed; exits non-zero on any mismatch.
"""

import json
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def main():
    bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # Idempotence needs InitProducerId, which Sluice does not implement yet.
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=10000, enable_idempotence=False
    )
    futures = [
        producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", b"x")])
        for i in range(count)
    ]
    producer.flush(timeout=30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    if offsets != list(range(count)):
        sys.exit(f"offsets {offsets} are not 0..{count}")

    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, consumer_timeout_ms=10000
    )
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    for msg in consumer:
        got.append((msg.offset, msg.key.decode(), msg.value.decode(), [(k, v.decode()) for k, v in msg.headers]))
        if len(got) == count:
            break
    end = consumer.end_offsets([tp])[tp]
    consumer.close()
    want = [(i, f"k{i}", f"v{i}", [("h", "x")]) for i in range(count)]
    if got != want:
        sys.exit(f"consumed {got}, wanted {want}")
    print(json.dumps({"consumed": len(got), "end_offset": end}))


if __name__ == "__main__":
    main()
