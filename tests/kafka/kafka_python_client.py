"""kafka-python driven by tests/kafka_clients.rs.

Usage: kafka_python_client.py produce BOOTSTRAP TOPIC [--idempotent]
       kafka_python_client.py consume BOOTSTRAP TOPIC COUNT
       kafka_python_client.py group BOOTSTRAP TOPIC COUNT GROUP

Same modes and JSON lines as confluent_client.py (see clientlib.py).
kafka-python 3 enables idempotence by default; here it is on only with
--idempotent, so both paths are exercised.
"""

import sys

from clientlib import DEADLINE_S, Reader, emit, fail, inputs, parse_args
from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def produce(bootstrap, topic, idempotent):
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        request_timeout_ms=10000,
        enable_idempotence=idempotent,
    )
    futures = []
    for m in inputs():
        futures.append(
            p.send(
                topic,
                key=None if m.get("key") is None else m["key"].encode(),
                value=m["value"].encode(),
                headers=[(k, v.encode()) for k, v in m.get("headers", {}).items()],
                partition=m.get("partition"),
            )
        )
    p.flush(timeout=DEADLINE_S)
    landed = []
    for i, f in enumerate(futures):
        try:
            md = f.get(timeout=DEADLINE_S)
        except Exception as e:  # noqa: BLE001 - any failure fails the run
            fail(f"record {i}: {e!r}")
        landed.append({"partition": md.partition, "offset": md.offset})
    p.close()
    for r in landed:
        emit(r)


def poller(c):
    def poll():
        return [
            {
                "partition": r.partition,
                "offset": r.offset,
                "key": None if r.key is None else r.key.decode(),
                "value": r.value.decode(),
                "headers": {k: v.decode() for k, v in r.headers},
            }
            for records in c.poll(timeout_ms=200).values()
            for r in records
        ]

    return poll


def consumer(bootstrap, group):
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=200,
    )


def consume(bootstrap, topic, count):
    c = consumer(bootstrap, None)
    parts = c.partitions_for_topic(topic)
    if not parts:
        fail(f"no partitions for {topic}")
    tps = [TopicPartition(topic, p) for p in sorted(parts)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = Reader(poller(c)).read(count)
    c.close()
    for r in got:
        emit(r)


def group(bootstrap, topic, count, group_id):
    c = consumer(bootstrap, group_id)
    c.subscribe([topic])
    got = Reader(poller(c)).read(count)
    c.commit()
    c.close()
    for r in got:
        emit(r)


if __name__ == "__main__":
    mode, args = parse_args(sys.argv[1:])
    {"produce": produce, "consume": consume, "group": group}[mode](*args)
