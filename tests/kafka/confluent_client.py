"""confluent-kafka (librdkafka 2.x, bundled in the wheel) driven by tests/kafka_clients.rs.

Usage: confluent_client.py produce BOOTSTRAP TOPIC [--idempotent]
       confluent_client.py consume BOOTSTRAP TOPIC COUNT
       confluent_client.py group BOOTSTRAP TOPIC COUNT GROUP

Records are JSON lines (see clientlib.py). produce reads them from stdin and
prints where each landed, in input order; consume reads every partition from
the beginning; group reads as a member of GROUP (offset reset: earliest) and
commits what it read before leaving. Exits non-zero on any client error.
"""

import sys
import uuid

from clientlib import DEADLINE_S, Reader, emit, fail, inputs, parse_args
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


def produce(bootstrap, topic, idempotent):
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": DEADLINE_S * 1000,
    }
    if idempotent:
        conf["enable.idempotence"] = True
    fatal = []

    def on_error(err):
        # A fatal error (e.g. the broker lacks what idempotence needs) ends
        # the producer: report it rather than time out.
        if err.fatal():
            fatal.append(str(err))

    conf["error_cb"] = on_error
    p = Producer(conf)
    msgs = inputs()
    landed = [None] * len(msgs)
    errors = []

    def report(i):
        def cb(err, m):
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                landed[i] = {"partition": m.partition(), "offset": m.offset()}

        return cb

    for i, m in enumerate(msgs):
        extra = {} if m.get("partition") is None else {"partition": m["partition"]}
        try:
            p.produce(
                topic,
                key=None if m.get("key") is None else m["key"].encode(),
                value=m["value"].encode(),
                headers=[(k, v.encode()) for k, v in m.get("headers", {}).items()],
                on_delivery=report(i),
                **extra,
            )
        except Exception as e:  # noqa: BLE001 - any failure fails the run
            fail(f"produce of record {i} failed: {e!r}; fatal: {fatal}")
        p.poll(0)
    try:
        left = p.flush(DEADLINE_S)
    except Exception as e:  # noqa: BLE001 - confluent-kafka 2.16 raises SystemError after a fatal error
        fail(f"flush failed: {e!r}; fatal: {fatal}")
    if fatal or errors or left:
        fail(f"{left} records undelivered; fatal: {fatal}; errors: {errors}")
    for r in landed:
        emit(r)


def record(m):
    return {
        "partition": m.partition(),
        "offset": m.offset(),
        "key": None if m.key() is None else m.key().decode(),
        "value": m.value().decode(),
        "headers": {k: v.decode() for k, v in (m.headers() or [])},
    }


def poller(c):
    def poll():
        m = c.poll(0.2)
        if m is None:
            return []
        if m.error():
            fail(f"consumer error: {m.error()}")
        return [record(m)]

    return poll


def consumer(bootstrap, group):
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 200,
        }
    )


def consume(bootstrap, topic, count):
    # assign() joins no group; the id only has to be set.
    c = consumer(bootstrap, f"reader-{uuid.uuid4()}")
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(parts)])
    got = Reader(poller(c)).read(count)
    c.close()
    for r in got:
        emit(r)


def group(bootstrap, topic, count, group_id):
    c = consumer(bootstrap, group_id)
    c.subscribe([topic])
    got = Reader(poller(c)).read(count)
    c.commit(asynchronous=False)
    c.close()
    for r in got:
        emit(r)


if __name__ == "__main__":
    mode, args = parse_args(sys.argv[1:])
    {"produce": produce, "consume": consume, "group": group}[mode](*args)
