"""A consumer-group member on confluent-kafka (librdkafka), speaking the
memberlib.py line protocol. `--protocol consumer` uses KIP-848."""

import os
import sys

from confluent_kafka import Consumer, KafkaException, TopicPartition
from memberlib import commands, emit, next_command, parse


def main():
    o = parse(sys.argv[1:])
    conf = {
        "bootstrap.servers": o["bootstrap"],
        "group.id": o["group"],
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 200,
        "error_cb": lambda e: emit({"event": "error", "error": str(e)}),
    }
    if os.environ.get("MEMBER_DEBUG"):
        conf["debug"] = os.environ["MEMBER_DEBUG"]
    if o["protocol"] == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf["session.timeout.ms"] = o["session_ms"]
        conf["heartbeat.interval.ms"] = 500
    if o["instance"]:
        conf["group.instance.id"] = o["instance"]
    c = Consumer(conf)
    pending = {}  # partition -> next offset, delivered but not committed

    def commit():
        if not pending:
            return
        offsets = [TopicPartition(o["topic"], p, off) for p, off in sorted(pending.items())]
        try:
            done = c.commit(offsets=offsets, asynchronous=False)
            bad = [str(tp.error) for tp in done or [] if tp.error]
            if bad:
                emit({"event": "commit_failed", "error": "; ".join(bad)})
                return
            emit({"event": "committed", "offsets": {str(p): off for p, off in pending.items()}})
            pending.clear()
        except KafkaException as e:
            emit({"event": "commit_failed", "error": str(e)})

    def on_assign(consumer, parts):
        emit({"event": "assigned", "partitions": sorted(tp.partition for tp in parts)})

    def on_revoke(consumer, parts):
        commit()
        revoked = {tp.partition for tp in parts}
        for p in revoked:
            pending.pop(p, None)
        emit({"event": "revoked", "partitions": sorted(revoked)})

    c.subscribe([o["topic"]], on_assign=on_assign, on_revoke=on_revoke)
    q = commands()
    while True:
        cmd = next_command(q)
        if cmd == "crash":
            os._exit(0)
        if cmd == "leave":
            commit()
            c.close()
            emit({"event": "closed"})
            return
        msgs = c.consume(num_messages=100, timeout=0.2)
        for m in msgs:
            if m.error():
                emit({"event": "error", "error": str(m.error())})
                continue
            emit({"event": "record", "p": m.partition(), "o": m.offset(), "v": m.value().decode()})
            pending[m.partition()] = m.offset() + 1
        if msgs:
            commit()


if __name__ == "__main__":
    main()
