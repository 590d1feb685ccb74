"""Produce with every librdkafka compression codec, then consume back.

usage: compressed_roundtrip.py BOOTSTRAP COUNT

For each codec (gzip, snappy, lz4, zstd) produces COUNT keyed records with a
header to topic "z-<codec>" (auto-created), then consumes the topic from the
beginning. Prints one JSON line: {codec: [[offset, key, value, header], ...]}.
"""
import json
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, count = sys.argv[1], int(sys.argv[2])
out = {}
for codec in ["gzip", "snappy", "lz4", "zstd"]:
    topic = f"z-{codec}"
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 20,
        }
    )
    errors = []
    for i in range(count):
        producer.produce(
            topic,
            key=f"k{i}",
            value=f"{codec} record {i} " + "x" * (i % 50),
            headers=[("h", f"v{i}".encode())],
            on_delivery=lambda err, msg: errors.append(str(err)) if err else None,
        )
    assert producer.flush(30) == 0, "unflushed messages"
    assert not errors, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{codec}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    while len(got) < count:
        msg = consumer.poll(10)
        assert msg is not None, f"{codec}: timed out after {len(got)} records"
        assert msg.error() is None, msg.error()
        headers = dict(msg.headers() or [])
        got.append([msg.offset(), msg.key().decode(), msg.value().decode(), headers["h"].decode()])
    consumer.close()
    out[codec] = got
print(json.dumps(out), flush=True)
