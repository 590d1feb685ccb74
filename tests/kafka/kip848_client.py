"""A KIP-848 (group.protocol=consumer) group member on confluent-kafka, driven by
tests/kafka_kip848.rs.

Usage: kip848_client.py member BOOTSTRAP TOPIC GROUP NAME

Runs until stdin closes (or says "stop"), printing JSON lines:
  {"member": NAME, "event": "assigned" | "revoked", "partitions": [..]}
  {"member": NAME, "event": "record", "partition": p, "offset": o, "value": v}
  {"member": NAME, "event": "committed", "partition": p, "offset": o}   (next offset to read)
  {"member": NAME, "event": "closed"}
Every record read is committed synchronously before the next poll, so what
a member read and committed is known exactly. On stop the member commits and
closes (leaves the group). Exits non-zero on a client error.
"""

import json
import os
import select
import sys
import time

from confluent_kafka import Consumer, KafkaException


def emit(obj):
    print(json.dumps(obj), flush=True)


def member(bootstrap, topic, group, name):
    errors = []

    def on_error(err):
        if err.fatal():
            errors.append(str(err))

    debug = {"debug": os.environ["KIP848_DEBUG"]} if os.environ.get("KIP848_DEBUG") else {}
    c = Consumer(
        {
            **debug,
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "error_cb": on_error,
        }
    )

    def assigned(_c, parts):
        emit({"member": name, "event": "assigned", "partitions": sorted(p.partition for p in parts)})

    def revoked(_c, parts):
        emit({"member": name, "event": "revoked", "partitions": sorted(p.partition for p in parts)})

    c.subscribe([topic], on_assign=assigned, on_revoke=revoked)
    stop_at = time.monotonic() + 120
    while time.monotonic() < stop_at and not errors:
        ready, _, _ = select.select([sys.stdin], [], [], 0)
        if ready:
            line = sys.stdin.readline()
            if line == "" or line.strip() == "stop":
                break
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            emit({"member": name, "event": "error", "error": str(m.error())})
            continue
        emit({"member": name, "event": "record", "partition": m.partition(), "offset": m.offset(), "value": m.value().decode()})
        try:
            done = c.commit(message=m, asynchronous=False)
            for tp in done or []:
                emit({"member": name, "event": "committed", "partition": tp.partition, "offset": tp.offset})
        except KafkaException as e:
            # A commit refused during a rebalance (stale epoch) is normal:
            # the record will be read again by its next owner.
            emit({"member": name, "event": "commit_failed", "error": str(e)})
    c.close()
    emit({"member": name, "event": "closed"})
    if errors:
        sys.exit(f"fatal: {errors}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) != 5 or args[0] != "member":
        sys.exit(__doc__)
    member(*args[1:])
